"""Ratios and the clipped surrogate (rlvr_cli/algo/policy_loss.py): values, zero-gradient regions, GSPO."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_cli.algo.aggregation import AGGREGATIONS, aggregate
from rlvr_cli.algo.logprobs import token_logprobs
from rlvr_cli.algo.policy_loss import MAX_LOG_RATIO, RATIOS, clipped_surrogate, sequence_log_ratio, token_log_ratio

HYP = settings(max_examples=60, deadline=None, derandomize=True, database=None)


def _one(rho: float, adv: float, eps_low=0.2, eps_high=0.2, dual_clip=None):
    """Loss, d loss / d log_ratio, and the flags for a single token."""
    lr = torch.tensor([[math.log(rho)]], dtype=torch.float64, requires_grad=True)
    out = clipped_surrogate(lr, torch.tensor([[adv]], dtype=torch.float64), eps_low, eps_high, dual_clip)
    out.loss.sum().backward()
    flags = (bool(out.clip_low), bool(out.clip_high), bool(out.dual_clip))
    return out.loss.item(), lr.grad.item(), flags


# ---------------------------------------------------------------- hand-computed values (eps = 0.2)
# loss = -min(rho*A, clip(rho, 0.8, 1.2)*A); unclipped branch: d loss / d log rho = -A * rho


def test_rho_1_5_positive_advantage_is_clipped():
    # -min(1.5 * 1, 1.2 * 1) = -1.2, constant -> zero gradient
    loss, grad, flags = _one(1.5, +1.0)
    assert loss == pytest.approx(-1.2) and grad == 0.0 and flags == (False, True, False)


def test_rho_1_5_negative_advantage_is_unclipped():
    # -min(1.5 * -1, 1.2 * -1) = -min(-1.5, -1.2) = 1.5; gradient -A * rho = 1.5
    loss, grad, flags = _one(1.5, -1.0)
    assert loss == pytest.approx(1.5) and grad == pytest.approx(1.5) and flags == (False, False, False)


def test_rho_0_5_positive_advantage_is_unclipped():
    # -min(0.5 * 1, 0.8 * 1) = -0.5; gradient -A * rho = -0.5
    loss, grad, flags = _one(0.5, +1.0)
    assert loss == pytest.approx(-0.5) and grad == pytest.approx(-0.5) and flags == (False, False, False)


def test_rho_0_5_negative_advantage_is_clipped():
    # -min(0.5 * -1, 0.8 * -1) = -min(-0.5, -0.8) = 0.8, constant -> zero gradient
    loss, grad, flags = _one(0.5, -1.0)
    assert loss == pytest.approx(0.8) and grad == 0.0 and flags == (True, False, False)


def test_clip_higher_uses_eps_high_only_above():
    # DAPO bounds 0.2 / 0.28: rho 1.5, A=+1 -> -min(1.5, 1.28) = -1.28
    assert _one(1.5, 1.0, 0.2, 0.28)[0] == pytest.approx(-1.28)
    # rho 1.25 < 1.28 is unclipped with clip-higher (-1.25, grad -1.25) but clipped at symmetric 0.2 (-1.2, grad 0)
    assert _one(1.25, 1.0, 0.2, 0.28)[:2] == pytest.approx((-1.25, -1.25))
    assert _one(1.25, 1.0, 0.2, 0.2)[:2] == pytest.approx((-1.2, 0.0))
    # lower bound still 1 - 0.2: rho 0.5, A=-1 -> 0.8
    assert _one(0.5, -1.0, 0.2, 0.28)[0] == pytest.approx(0.8)


def test_dual_clip_caps_negative_advantage_loss():
    # c = 3, A = -1, rho = 4: PPO loss max(4, 1.2) = 4 is capped at -c*A = 3, zero gradient
    loss, grad, flags = _one(4.0, -1.0, dual_clip=3.0)
    assert loss == pytest.approx(3.0) and grad == 0.0 and flags == (False, False, True)
    # A = -2, rho = 4: min(8, -3 * -2 = 6) = 6
    assert _one(4.0, -2.0, dual_clip=3.0)[0] == pytest.approx(6.0)
    # without dual clip the same token costs rho * |A| = 4 with gradient 4
    assert _one(4.0, -1.0)[:2] == pytest.approx((4.0, 4.0))


def test_dual_clip_inactive_below_c_and_for_positive_advantages():
    # rho = 2 < c = 3, A = -1: the ordinary unclipped 2.0, gradient -A*rho = 2
    loss, grad, flags = _one(2.0, -1.0, dual_clip=3.0)
    assert (loss, grad) == pytest.approx((2.0, 2.0)) and flags == (False, False, False)
    # A = +1, rho = 4: the ordinary clip -1.2, dual clip does not apply
    loss, grad, flags = _one(4.0, 1.0, dual_clip=3.0)
    assert (loss, grad) == pytest.approx((-1.2, 0.0)) and flags == (False, True, False)


def test_advantages_broadcast_per_sequence():
    # (B, 1) advantages apply to every token: rho = 1 everywhere -> loss = -A
    out = clipped_surrogate(torch.zeros(2, 3), torch.tensor([[2.0], [-1.0]]), 0.2, 0.2)
    assert torch.equal(out.loss, torch.tensor([[-2.0, -2.0, -2.0], [1.0, 1.0, 1.0]]))


# ---------------------------------------------------------------- zero-gradient regions


def test_gradient_exactly_zero_in_clipped_regions():
    rho = torch.tensor([1.21, 1.5, 3.0, 100.0, 0.79, 0.5, 0.1, 1e-3], dtype=torch.float64)
    adv = torch.tensor([1.0, 0.5, 2.0, 1.0, -1.0, -0.5, -2.0, -1.0], dtype=torch.float64)
    lr = rho.log().unsqueeze(0).requires_grad_(True)
    out = clipped_surrogate(lr, adv.unsqueeze(0), 0.2, 0.2)
    out.loss.sum().backward()
    assert torch.equal(lr.grad, torch.zeros_like(lr))
    assert out.clip_high[0, :4].all() and out.clip_low[0, 4:].all()


def test_gradient_nonzero_just_inside_the_clip_range():
    # rho = 1.19, A = 1 -> unclipped, gradient -A*rho = -1.19 (guards against a test that passes on any zero)
    assert _one(1.19, 1.0)[1] == pytest.approx(-1.19)
    assert _one(0.81, -1.0)[1] == pytest.approx(0.81)


@pytest.mark.parametrize("ratio", sorted(RATIOS))
@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_ratio_one_means_no_clipping_and_plain_policy_gradient(mode, ratio):
    # mu = 1: old = current, rho = 1; the surrogate's gradient is the unclipped policy gradient
    # grad = d/dtheta aggregate(-A * logp), and every clip fraction is 0.
    gen = torch.Generator().manual_seed(7)
    w = torch.randn(5, 3, generator=gen, requires_grad=True)
    x = torch.randn(4, 6, 3, generator=gen)
    targets = torch.randint(0, 5, (4, 6), generator=gen)
    mask = (torch.arange(6).unsqueeze(0) < torch.tensor([[6], [2], [4], [1]])).float()
    adv = torch.tensor([[1.5], [-0.7], [0.3], [-2.0]])

    logp = token_logprobs(x @ w.T, targets)
    out = clipped_surrogate(RATIOS[ratio](logp, logp.detach(), mask), adv, 0.2, 0.28, dual_clip=3.0)
    assert torch.equal(out.ratio, torch.ones_like(out.ratio))
    assert not out.clip_low.any() and not out.clip_high.any() and not out.dual_clip.any()
    (g_surrogate,) = torch.autograd.grad(aggregate(out.loss, mask, mode, length_constant=6), w)

    logp = token_logprobs(x @ w.T, targets)
    (g_pg,) = torch.autograd.grad(aggregate(-adv * logp, mask, mode, length_constant=6), w)
    assert g_pg.abs().max() > 1e-3
    assert torch.allclose(g_surrogate, g_pg, rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------- extreme log-ratios


@pytest.mark.parametrize("dual_clip", [None, 3.0])
def test_extreme_log_ratios_stay_finite(dual_clip):
    lr = torch.tensor([[1e4, -1e4, 1e4, -1e4, 50.0, -50.0]], requires_grad=True)
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0, -1.0, 1.0]])
    out = clipped_surrogate(lr, adv, 0.2, 0.28, dual_clip)
    assert torch.isfinite(out.loss).all() and torch.isfinite(out.ratio).all()
    # rho is capped at exp(20) = 4.85e8: A = -1 at +1e4 costs exp(20) (or c = 3 with dual clip)
    expected = math.exp(MAX_LOG_RATIO) if dual_clip is None else 3.0
    assert out.loss[0, 2].item() == pytest.approx(expected, rel=1e-5)
    out.loss.sum().backward()
    assert torch.isfinite(lr.grad).all()


# ---------------------------------------------------------------- GSPO sequence ratio


def test_sequence_log_ratio_by_hand():
    # row 0: mean(0.1, 0.3) = 0.2 (the masked 5.0 is ignored); row 1: mean(-0.4) = -0.4
    logp = torch.tensor([[0.1, 0.3, 5.0], [-0.4, 9.0, 9.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    got = sequence_log_ratio(logp, torch.zeros_like(logp), mask)
    assert torch.allclose(got, torch.tensor([[0.2, 0.2, 0.0], [-0.4, 0.0, 0.0]]))
    assert torch.allclose(token_log_ratio(logp, torch.zeros_like(logp), mask),
                          torch.tensor([[0.1, 0.3, 0.0], [-0.4, 0.0, 0.0]]))


def test_sequence_ratio_equals_token_ratio_when_token_ratios_are_equal():
    gen = torch.Generator().manual_seed(3)
    old = torch.randn(3, 5, generator=gen)
    per_seq = torch.tensor([[0.25], [-0.1], [0.0]])
    logp = old + per_seq  # every token of sequence i has log-ratio per_seq[i]
    mask = (torch.arange(5).unsqueeze(0) < torch.tensor([[5], [3], [1]])).float()
    s = sequence_log_ratio(logp, old, mask)
    t = token_log_ratio(logp, old, mask)
    assert torch.allclose(s, t, atol=1e-6)
    assert torch.allclose(s[:, 0], per_seq[:, 0], atol=1e-6)


def test_gspo_with_seq_mean_token_mean_is_the_sequence_objective_by_hand():
    # seq 0: log-ratios [0.2, 0.6] -> s0 = exp(0.4) = 1.49182, A0 = +1 -> min(1.49182, 1.2) = 1.2 (clipped)
    # seq 1: log-ratios [-0.1, 0.0, -0.2] -> s1 = exp(-0.1) = 0.904837, A1 = -1 -> min(-0.904837, -0.904837)
    # J = (1/2)(1.2 - 0.904837) = 0.1475813; loss = -J = -0.1475813
    # gradient: seq 0 clipped -> 0; seq 1: d(-J)/d logp_t = -(1/2) * A1 * s1 * (1/3) = 0.904837 / 6 = 0.150806
    logp = torch.tensor([[0.2, 0.6, 0.0], [-0.1, 0.0, -0.2]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    adv = torch.tensor([[1.0], [-1.0]])
    out = clipped_surrogate(sequence_log_ratio(logp, torch.zeros(2, 3), mask), adv, 0.2, 0.2)
    loss = aggregate(out.loss, mask, "seq_mean_token_mean")
    assert loss.item() == pytest.approx(-0.1475813, abs=1e-6)
    loss.backward()
    assert torch.allclose(logp.grad, torch.tensor([[0.0, 0.0, 0.0], [0.150806, 0.150806, 0.150806]]), atol=1e-6)


def test_gspo_matches_sequence_objective_on_random_input():
    # (1/G) sum_i -min(s_i A_i, clip(s_i) A_i), s_i = exp(mean over o_i of log-ratios), by a loop
    gen = torch.Generator().manual_seed(11)
    g, t = 6, 7
    logp = (0.3 * torch.randn(g, t, generator=gen, dtype=torch.float64)).requires_grad_(True)
    old = 0.3 * torch.randn(g, t, generator=gen, dtype=torch.float64)
    lengths = [7, 1, 3, 5, 2, 6]
    mask = (torch.arange(t).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).double()
    adv = torch.randn(g, 1, generator=gen, dtype=torch.float64)
    out = clipped_surrogate(sequence_log_ratio(logp, old, mask), adv, 0.2, 0.28)
    got = aggregate(out.loss, mask, "seq_mean_token_mean")
    want = 0.0
    for i in range(g):
        s = math.exp(sum(logp[i, j].item() - old[i, j].item() for j in range(lengths[i])) / lengths[i])
        a = adv[i, 0].item()
        want += -min(s * a, min(max(s, 0.8), 1.28) * a) / g
    assert got.item() == pytest.approx(want, abs=1e-6)  # aggregation weights are float32 (1/|o_i| rounded)


# ---------------------------------------------------------------- loop reference


def reference_surrogate(lrs, advs, eps_low, eps_high, dual_clip):
    losses, lows, highs, duals = [], [], [], []
    for x, a in zip(lrs, advs):
        rho = math.exp(min(max(x, -MAX_LOG_RATIO), MAX_LOG_RATIO))
        clipped_rho = min(max(rho, 1 - eps_low), 1 + eps_high)
        loss = -min(rho * a, clipped_rho * a)
        if dual_clip is not None and a < 0:
            loss = min(loss, -dual_clip * a)
        losses.append(loss)
        lows.append(a < 0 and rho < 1 - eps_low)
        highs.append(a > 0 and rho > 1 + eps_high)
        duals.append(dual_clip is not None and a < 0 and rho > dual_clip)
    return losses, lows, highs, duals


tokens = st.integers(1, 12).flatmap(
    lambda n: st.tuples(
        st.lists(st.floats(-30, 30, allow_nan=False), min_size=n, max_size=n),
        st.lists(st.floats(-3, 3, allow_nan=False), min_size=n, max_size=n),
    )
)


@HYP
@given(tokens, st.sampled_from([(0.2, 0.2), (0.2, 0.28), (0.1, 0.5), (0.0, 0.0)]), st.sampled_from([None, 3.0, 10.0]))
def test_clipped_surrogate_matches_loop_reference(tok, eps, dual_clip):
    lrs, advs = tok
    out = clipped_surrogate(torch.tensor([lrs], dtype=torch.float64), torch.tensor([advs], dtype=torch.float64),
                            eps[0], eps[1], dual_clip)
    losses, lows, highs, duals = reference_surrogate(lrs, advs, eps[0], eps[1], dual_clip)
    assert torch.allclose(out.loss[0], torch.tensor(losses, dtype=torch.float64), rtol=1e-12, atol=1e-12)
    assert out.clip_low[0].tolist() == lows
    assert out.clip_high[0].tolist() == highs
    assert out.dual_clip[0].tolist() == duals


def test_sequence_log_ratio_matches_loop_reference():
    gen = torch.Generator().manual_seed(5)
    logp, old = torch.randn(5, 6, generator=gen), torch.randn(5, 6, generator=gen)
    mask = (torch.rand(5, 6, generator=gen) < 0.6).float()
    mask[0] = 0.0  # an empty sequence gets 0, not 0/0
    got = sequence_log_ratio(logp, old, mask)
    for i in range(5):
        idx = [j for j in range(6) if mask[i, j]]
        mean = sum(logp[i, j].item() - old[i, j].item() for j in idx) / len(idx) if idx else 0.0
        for j in range(6):
            assert got[i, j].item() == pytest.approx(mean if mask[i, j] else 0.0, abs=1e-6)
