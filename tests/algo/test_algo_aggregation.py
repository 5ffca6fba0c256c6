"""Loss aggregation (rlvr_cli/algo/aggregation.py): the length divisor, masks, micro-batch invariance."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_cli.algo.aggregation import AGGREGATIONS, aggregate, aggregation_normalizer, aggregation_weights
from rlvr_cli.algo.logprobs import token_logprobs
from rlvr_cli.algo.policy_loss import RATIOS, clipped_surrogate

HYP = settings(max_examples=40, deadline=None, derandomize=True, database=None)

# token losses [2] and [1, 1, 1], padded to width 3
VALUES = torch.tensor([[2.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
MASK = torch.tensor([[1, 0, 0], [1, 1, 1]])


# ---------------------------------------------------------------- hand-computed numbers


def test_token_mean_worked_example():
    # (2 + 1 + 1 + 1) / 4 tokens = 1.25
    assert aggregate(VALUES, MASK, "token_mean").item() == pytest.approx(1.25)


def test_seq_mean_token_mean_worked_example():
    # (2/1 + 3/3) / 2 sequences = 1.5
    assert aggregate(VALUES, MASK, "seq_mean_token_mean").item() == pytest.approx(1.5)


@pytest.mark.parametrize("length", [3, 4, 10])
def test_seq_mean_token_sum_norm_worked_example(length):
    # 5 / (2 * L): L=3 -> 0.8333, L=4 -> 0.625, L=10 -> 0.25
    assert aggregate(VALUES, MASK, "seq_mean_token_sum_norm", length_constant=length).item() == pytest.approx(
        5 / (2 * length)
    )


def test_weights_and_normalizers_by_hand():
    w = aggregation_weights(MASK, "seq_mean_token_mean")
    assert torch.allclose(w, torch.tensor([[1.0, 0, 0], [1 / 3, 1 / 3, 1 / 3]]))  # 1/|o_i| on each token
    assert torch.equal(aggregation_weights(MASK, "token_mean"), MASK.float())
    assert torch.allclose(aggregation_weights(MASK, "seq_mean_token_sum_norm", 4), MASK.float() / 4)
    assert aggregation_normalizer(MASK, "token_mean") == 4.0  # 4 unmasked tokens
    assert aggregation_normalizer(MASK, "seq_mean_token_mean") == 2.0  # 2 sequences
    assert aggregation_normalizer(MASK, "seq_mean_token_sum_norm") == 2.0


@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_padding_does_not_change_the_loss(mode):
    # the Dr. GRPO pitfall: L must be a constant, not the padded width. Extra padded columns with garbage
    # values under mask 0 must not change any mode.
    pad_v = torch.cat([VALUES, torch.full((2, 5), 7.0)], dim=1)
    pad_m = torch.cat([MASK, torch.zeros(2, 5, dtype=MASK.dtype)], dim=1)
    a = aggregate(VALUES, MASK, mode, length_constant=6)
    b = aggregate(pad_v, pad_m, mode, length_constant=6)
    assert a.item() == pytest.approx(b.item(), abs=1e-7)


def test_sum_norm_needs_a_length_constant():
    with pytest.raises(ValueError):
        aggregate(VALUES, MASK, "seq_mean_token_sum_norm")
    with pytest.raises(ValueError):
        aggregate(VALUES, MASK, "seq_mean_token_sum_norm", length_constant=0)


def test_unknown_mode_raises():
    with pytest.raises(ValueError):
        aggregate(VALUES, MASK, "sequence_mean")
    with pytest.raises(ValueError):
        aggregation_normalizer(MASK, "sequence_mean")


@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_everything_masked_gives_zero_with_a_gradient(mode):
    v = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    out = aggregate(v, torch.zeros(2, 2), mode, length_constant=2)
    assert out.item() == 0.0
    out.backward()
    assert torch.equal(v.grad, torch.zeros(2, 2))


# ---------------------------------------------------------------- masked (truncated) sequences


@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_fully_masked_sequence_leaves_numerator_and_denominator(mode):
    # batch [[2], [1,1,1]] plus a truncated (fully masked) sequence with large losses:
    # must aggregate exactly as the batch without it (1.25 / 1.5 / 5/(2*4) = 0.625)
    v = torch.cat([VALUES, torch.tensor([[100.0, 100.0, 100.0]])])
    m = torch.cat([MASK, torch.zeros(1, 3, dtype=MASK.dtype)])
    with_masked = aggregate(v, m, mode, length_constant=4)
    without = aggregate(VALUES, MASK, mode, length_constant=4)
    assert with_masked.item() == without.item()
    assert with_masked.item() == pytest.approx({"token_mean": 1.25, "seq_mean_token_mean": 1.5,
                                                "seq_mean_token_sum_norm": 0.625}[mode])


def test_counting_the_masked_sequence_would_differ():
    # the pitfall: the masked sequence still counted in the denominator -> (2 + 1) / 3 = 1.0 instead of 1.5
    m = torch.cat([MASK, torch.zeros(1, 3, dtype=MASK.dtype)])
    v = torch.cat([VALUES, torch.zeros(1, 3)])
    assert aggregate(v, m, "seq_mean_token_mean", normalizer=3.0).item() == pytest.approx(1.0)
    assert aggregate(v, m, "seq_mean_token_mean").item() == pytest.approx(1.5)


# ---------------------------------------------------------------- loop reference

batches = st.integers(1, 5).flatmap(
    lambda b: st.integers(1, 6).flatmap(
        lambda t: st.tuples(
            st.lists(st.lists(st.floats(-5, 5, width=32), min_size=t, max_size=t), min_size=b, max_size=b),
            st.lists(st.lists(st.booleans(), min_size=t, max_size=t), min_size=b, max_size=b),
        )
    )
)


def reference_aggregate(values, mask, mode, length):
    """Slow loop from the docstring's three formulas."""
    seqs = [[v for v, m in zip(vr, mr) if m] for vr, mr in zip(values, mask)]
    seqs = [s for s in seqs if s]  # sequences with at least one unmasked token
    if not seqs:
        return 0.0
    if mode == "token_mean":
        return sum(sum(s) for s in seqs) / sum(len(s) for s in seqs)
    if mode == "seq_mean_token_mean":
        return sum(sum(s) / len(s) for s in seqs) / len(seqs)
    return sum(sum(s) for s in seqs) / (len(seqs) * length)


@HYP
@given(batches, st.sampled_from(AGGREGATIONS), st.integers(1, 8))
def test_matches_loop_reference(batch, mode, length):
    values, mask = batch
    got = aggregate(torch.tensor(values), torch.tensor(mask, dtype=torch.float32), mode, length_constant=length)
    assert got.item() == pytest.approx(reference_aggregate(values, mask, mode, length), rel=1e-5, abs=1e-5)


# ---------------------------------------------------------------- micro-batch invariance of the gradient

B, T, V, D, L_CONST = 8, 5, 6, 4, 5


def _problem():
    """A tiny linear 'policy': logits = x @ W^T, per-token log-probs of fixed targets; ragged masks."""
    gen = torch.Generator().manual_seed(1234)
    w = torch.randn(V, D, generator=gen)
    x = torch.randn(B, T, D, generator=gen)
    targets = torch.randint(0, V, (B, T), generator=gen)
    lengths = torch.tensor([0, 1, 5, 2, 3, 5, 4, 1])  # row 0 fully masked (truncated), ragged otherwise
    mask = (torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)).float()
    with torch.no_grad():
        old = token_logprobs(x @ w.T, targets) + 0.3 * torch.randn(B, T, generator=gen)  # ratios != 1, some clipped
    adv = torch.randn(B, 1, generator=gen)
    return w, x, targets, mask, old, adv


def _loss(w, x, targets, mask, old, adv, mode, ratio, normalizer):
    logp = token_logprobs(x @ w.T, targets)
    out = clipped_surrogate(RATIOS[ratio](logp, old, mask), adv, 0.2, 0.28)
    return aggregate(out.loss, mask, mode, length_constant=L_CONST, normalizer=normalizer)


def _accumulated_grad(mode, ratio, n_micro, own_normalizer=False):
    w, x, targets, mask, old, adv = _problem()
    w.requires_grad_(True)
    z_full = aggregation_normalizer(mask, mode)
    for idx in torch.arange(B).chunk(n_micro):
        if own_normalizer:  # the naive accumulation: each micro-batch's own mean, divided by the number of steps
            loss = _loss(w, x[idx], targets[idx], mask[idx], old[idx], adv[idx], mode, ratio, None) / n_micro
        else:
            loss = _loss(w, x[idx], targets[idx], mask[idx], old[idx], adv[idx], mode, ratio, z_full)
        loss.backward()
    return w.grad.clone()


def _full_grad(mode, ratio):
    w, x, targets, mask, old, adv = _problem()
    w.requires_grad_(True)
    _loss(w, x, targets, mask, old, adv, mode, ratio, None).backward()
    return w.grad.clone()


@pytest.mark.parametrize("ratio", sorted(RATIOS))
@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_micro_batching_does_not_change_the_gradient(mode, ratio):
    full = _full_grad(mode, ratio)
    assert full.abs().max() > 1e-3  # a real gradient, not a trivially equal zero
    for n_micro in (1, 2, 4):
        acc = _accumulated_grad(mode, ratio, n_micro)
        assert torch.allclose(acc, full, rtol=1e-6, atol=1e-6), (mode, ratio, n_micro)


@pytest.mark.parametrize("ratio", sorted(RATIOS))
@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_naive_per_micro_batch_normaliser_differs(mode, ratio):
    # the pitfall the test above guards against: it must be detectable, for every mode
    full = _full_grad(mode, ratio)
    for n_micro in (2, 4):
        naive = _accumulated_grad(mode, ratio, n_micro, own_normalizer=True)
        assert not torch.allclose(naive, full, rtol=1e-4, atol=1e-4), (mode, ratio, n_micro)
