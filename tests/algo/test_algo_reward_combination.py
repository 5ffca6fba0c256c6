"""GDPO (rlvr_cli/algo/reward_combination.py): the worked example against normalising the sum, its
invariances, and when it reduces to GRPO."""

from __future__ import annotations

import math

import pytest
import torch

from rlvr_cli.algo.advantages import group_advantages
from rlvr_cli.algo.reward_combination import decoupled_group_advantages

# prompt 0: samples with terms (correct, format) (1, 0), (0, 0); prompt 1: (1, 1), (0, 0)
TERMS = torch.tensor([[[1.0, 0.0], [0.0, 0.0]], [[1.0, 1.0], [0.0, 0.0]]])


def test_gdpo_worked_example():
    # term advantages (G = 2, Bessel std 0.70711): prompt 0 [+0.70711, -0.70711] and [0, 0] (zero spread);
    # prompt 1 [+0.70711, -0.70711] twice. Sums [0.70711, -0.70711, 1.41421, -1.41421], batch mean 0,
    # Bessel std sqrt((0.5 + 0.5 + 2 + 2) / 3) = 1.29099 -> [0.54772, -0.54772, 1.09545, -1.09545]
    adv = decoupled_group_advantages(TERMS, [1.0, 1.0])
    assert torch.allclose(adv, torch.tensor([[0.54772, -0.54772], [1.09545, -1.09545]]), atol=1e-5)
    before_batch = decoupled_group_advantages(TERMS, [1.0, 1.0], batch_normalize=False)
    assert torch.allclose(before_batch, torch.tensor([[0.70711, -0.70711], [1.41421, -1.41421]]), atol=1e-5)


def test_normalising_the_sum_collapses_the_two_prompts():
    # GRPO on r = correct + format: [1, 0] and [2, 0] both give [+0.70711, -0.70711]
    grpo = group_advantages(TERMS.sum(dim=2), "group_mean", "group_std")
    assert torch.allclose(grpo[0], grpo[1]) and grpo[0, 0].item() == pytest.approx(0.70711, abs=1e-5)
    gdpo = decoupled_group_advantages(TERMS, [1.0, 1.0])
    assert gdpo[1, 0].item() == pytest.approx(2 * gdpo[0, 0].item(), rel=1e-5)


def test_one_term_without_batch_step_is_grpo():
    gen = torch.Generator().manual_seed(0)
    r = (torch.rand(6, 4, generator=gen) < 0.5).float()
    got = decoupled_group_advantages(r.unsqueeze(2), [1.0], batch_normalize=False)
    assert torch.equal(got, group_advantages(r, "group_mean", "group_std"))


def test_invariant_to_rescaling_a_term_unlike_the_sum():
    # each term is divided by its own group std, so multiplying a term by c > 0 changes nothing
    gen = torch.Generator().manual_seed(1)
    terms = torch.rand(5, 4, 3, generator=gen, dtype=torch.float64)
    scaled = terms.clone()
    scaled[:, :, 1] *= 7.0
    w = [1.0, 0.5, 0.25]
    a, b = decoupled_group_advantages(terms, w), decoupled_group_advantages(scaled, w)
    assert torch.allclose(a, b, atol=1e-5)
    wt = torch.tensor(w, dtype=torch.float64)
    s1 = group_advantages((terms * wt).sum(2), "group_mean", "group_std")
    s2 = group_advantages((scaled * wt).sum(2), "group_mean", "group_std")
    assert not torch.allclose(s1, s2, atol=1e-3)


def test_without_a_std_decoupling_is_the_centred_sum():
    # why the schema refuses GDPO with scale none: centring is linear, so sum_k w_k (r_k - mean r_k) = r - mean r
    gen = torch.Generator().manual_seed(2)
    terms = torch.rand(4, 5, 2, generator=gen, dtype=torch.float64)
    w = torch.tensor([1.0, 0.3], dtype=torch.float64)
    decoupled = sum(w[k] * group_advantages(terms[:, :, k], "group_mean", "none").double() for k in range(2))
    assert torch.allclose(decoupled, group_advantages((terms * w).sum(2), "group_mean", "none").double(), atol=1e-6)


def test_silent_groups_stay_exactly_zero_and_batch_is_standardised():
    gen = torch.Generator().manual_seed(3)
    terms = (torch.rand(8, 4, 2, generator=gen) < 0.5).float()
    terms[0] = 0.0  # every term constant: no signal
    terms[1, :, 0] = 1.0
    terms[1, :, 1] = 0.0
    adv = decoupled_group_advantages(terms, [1.0, 0.1]).double()
    zero = torch.zeros(4, dtype=torch.float64)
    assert torch.equal(adv[0], zero) and torch.equal(adv[1], zero)
    assert adv.mean().item() == pytest.approx(0.0, abs=1e-6)
    assert adv.flatten().std().item() == pytest.approx(1.0, abs=1e-4)
    assert torch.allclose(adv.sum(dim=1), torch.zeros(8, dtype=torch.float64), atol=1e-5)  # per-group sums stay 0


def test_everything_silent_is_zero_not_nan():
    adv = decoupled_group_advantages(torch.ones(3, 4, 2), [1.0, 1.0])
    assert torch.equal(adv, torch.zeros(3, 4))


def test_matches_loop_reference():
    gen = torch.Generator().manual_seed(5)
    terms = torch.rand(3, 4, 2, generator=gen, dtype=torch.float64)
    w = [1.0, 0.4]
    eps = 1e-6

    def std(xs):
        m = sum(xs) / len(xs)
        return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))

    sums = []
    for p in range(3):
        row = [0.0] * 4
        for k in range(2):
            xs = terms[p, :, k].tolist()
            m, s = sum(xs) / 4, std(xs)
            for i in range(4):
                row[i] += w[k] * (xs[i] - m) / (s + eps)
        sums.append(row)
    flat = [x for row in sums for x in row]
    mean, s = sum(flat) / len(flat), std(flat)
    want = torch.tensor([[(x - mean) / (s + eps) for x in row] for row in sums], dtype=torch.float32)
    assert torch.allclose(decoupled_group_advantages(terms, w, eps), want, atol=1e-5)


def test_bad_shapes():
    with pytest.raises(ValueError):
        decoupled_group_advantages(torch.zeros(2, 3), [1.0])
    with pytest.raises(ValueError):
        decoupled_group_advantages(torch.zeros(2, 3, 2), [1.0])
