"""MaxRL advantages and REINFORCE without a baseline (rlvr_cli/algo/advantages.py): hand-computed numbers,
the single-sample and all-fail conventions, and the estimator's exact expectation."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from rlvr_cli.algo.advantages import baseline_group_mean, group_advantages, maxrl_advantages, scale_group_mean

# ---------------------------------------------------------------- hand-computed numbers


def test_maxrl_worked_example():
    # mean 0.25: (1 - 0.25) / 0.25 = 3, (0 - 0.25) / 0.25 = -1
    adv = maxrl_advantages(torch.tensor([[1.0, 0.0, 0.0, 0.0]]), eps=0.0)
    assert torch.equal(adv, torch.tensor([[3.0, -1.0, -1.0, -1.0]]))
    # the default eps = 1e-6 (the authors' code): 0.75 / 0.250001 = 2.999988, -0.25 / 0.250001 = -0.999996
    adv = maxrl_advantages(torch.tensor([[1.0, 0.0, 0.0, 0.0]]))
    assert torch.allclose(adv, torch.tensor([[2.999988, -0.999996, -0.999996, -0.999996]]), atol=1e-6)


def test_maxrl_versus_grpo_on_a_hard_and_a_medium_prompt():
    # G = 16. One correct: MaxRL 16/1 - 1 = 15; GRPO (15/16) / 0.25 = 3.75 (Bessel std of one 1 in 16 is 0.25).
    # Eight correct: MaxRL 16/8 - 1 = 1; GRPO 0.5 / 0.5164 = 0.9682.
    hard = torch.zeros(1, 16)
    hard[0, 0] = 1.0
    medium = torch.zeros(1, 16)
    medium[0, :8] = 1.0
    r = torch.cat([hard, medium])
    m = maxrl_advantages(r, eps=0.0)
    g = group_advantages(r, "group_mean", "group_std", eps=0.0)
    assert m[0, 0].item() == pytest.approx(15.0) and m[1, 0].item() == pytest.approx(1.0)
    assert g[0, 0].item() == pytest.approx(3.75, abs=1e-5) and g[1, 0].item() == pytest.approx(0.968246, abs=1e-5)


def test_all_fail_group_is_zero_and_all_correct_group_is_zero():
    adv = maxrl_advantages(torch.tensor([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0], [0.0, 1.0, 0.0]]))
    assert torch.equal(adv[0], torch.zeros(3)) and torch.equal(adv[1], torch.zeros(3))
    assert (adv[2] != 0).all()


def test_single_sample_group_keeps_its_raw_reward():
    # order-1 MaxRL is REINFORCE; the authors' code would give 1 / 1e-6 = 1e6 here
    adv = maxrl_advantages(torch.tensor([[1.0], [0.0]]))
    assert torch.equal(adv, torch.tensor([[1.0], [0.0]]))


def test_maxrl_needs_binary_rewards():
    with pytest.raises(ValueError, match="binary"):
        maxrl_advantages(torch.tensor([[0.5, 0.0]]))
    with pytest.raises(ValueError):
        maxrl_advantages(torch.tensor([1.0, 0.0]))


def test_maxrl_is_group_mean_baseline_over_group_mean_scale():
    # the phase-2 wiring as advantage.scale = mean must give the same numbers for G >= 2
    gen = torch.Generator().manual_seed(0)
    r = (torch.rand(32, 8, generator=gen) < torch.rand(32, 1, generator=gen)).double()
    r[0] = 0.0
    m = scale_group_mean(r)
    composed = torch.where(m <= 1e-6, torch.zeros_like(r), (r - baseline_group_mean(r)) / (m + 1e-6))
    assert torch.allclose(maxrl_advantages(r), composed.float(), atol=1e-6)
    assert torch.allclose(maxrl_advantages(r).double().sum(dim=1), torch.zeros(32, dtype=torch.float64), atol=1e-4)


# ---------------------------------------------------------------- the estimator's expectation, enumerated exactly


def _truncated_ml_grad(p: float, order: int) -> float:
    """d/dtheta of J_T = -sum_{k=1..T} (1 - p)^k / k with p = sigmoid(theta): sum_k (1 - p)^(k-1) * p (1 - p)."""
    return sum((1 - p) ** (k - 1) for k in range(1, order + 1)) * p * (1 - p)


def _expected_gradient(p: float, g: int, control_variate: bool) -> float:
    """E over all 2^G outcomes of (1/G) sum_i A_i d log pi(o_i) / d theta for a two-outcome policy."""
    total = 0.0
    for outcome in itertools.product([0, 1], repeat=g):
        prob = math.prod(p if o else 1 - p for o in outcome)
        r = torch.tensor([outcome], dtype=torch.float64)
        if control_variate:
            a = maxrl_advantages(r, eps=0.0).double()[0].tolist()
        else:  # Theorem 1 without the control variate: r_i / mean(r), 0 for an all-fail group
            k = sum(outcome)
            a = [g * o / k if k else 0.0 for o in outcome]
        score = [(1 - p) if o else -p for o in outcome]  # d log sigmoid / d theta, d log (1 - sigmoid) / d theta
        total += prob * sum(ai * si for ai, si in zip(a, score)) / g
    return total


@pytest.mark.parametrize("g", [2, 3, 4, 6])
@pytest.mark.parametrize("p", [0.05, 0.37, 0.8])
def test_control_variate_form_is_unbiased_for_order_g_minus_1(g, p):
    assert _expected_gradient(p, g, True) == pytest.approx(_truncated_ml_grad(p, g - 1), rel=1e-6)  # float32 advantages
    # and not for order G: the dropped control variate of all-fail groups is worth p (1 - p)^G
    assert _expected_gradient(p, g, True) != pytest.approx(_truncated_ml_grad(p, g), rel=1e-6)


@pytest.mark.parametrize("g", [1, 2, 3, 6])
@pytest.mark.parametrize("p", [0.05, 0.37, 0.8])
def test_no_control_variate_form_is_unbiased_for_order_g(g, p):
    assert _expected_gradient(p, g, False) == pytest.approx(_truncated_ml_grad(p, g), rel=1e-9, abs=1e-12)


def test_single_sample_is_reinforce_in_expectation():
    # G = 1 keeps the raw reward: E[r d log pi] = dp/dtheta = d J_1 / d theta
    for p in (0.1, 0.5, 0.9):
        assert _expected_gradient(p, 1, True) == pytest.approx(p * (1 - p), rel=1e-12)


# ---------------------------------------------------------------- REINFORCE without a baseline


def test_no_baseline_keeps_constant_groups():
    # the floor of the ladder: an all-correct group still pushes every answer up (A = r = 1), unlike GRPO
    r = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 0.0, 0.0]])
    assert torch.equal(group_advantages(r, "none", "none"), r)
    assert torch.equal(group_advantages(r, "group_mean", "none")[0], torch.zeros(4))


def test_no_baseline_gradient_is_the_reinforce_gradient():
    # on-policy, -A * logp aggregated with per-sequence means: d/dtheta = -(1/N) sum_i r_i * mean_t d logp_t
    gen = torch.Generator().manual_seed(3)
    theta = torch.randn(3, 5, generator=gen, requires_grad=True)
    targets = torch.randint(0, 5, (3,), generator=gen)
    logp = torch.log_softmax(theta, dim=-1).gather(1, targets[:, None])  # one token per sequence
    r = torch.tensor([[1.0], [0.0], [1.0]])
    adv = group_advantages(r.T, "none", "none").T  # one group of three
    (grad,) = torch.autograd.grad((-adv * logp).mean(), theta)
    want = torch.zeros(3, 5)
    for i in range(3):
        onehot = torch.nn.functional.one_hot(targets[i], 5).float()
        want[i] = -r[i, 0] * (onehot - torch.softmax(theta[i].detach(), dim=-1)) / 3
    assert torch.allclose(grad, want, atol=1e-7)
    assert grad[1].abs().max() == 0  # the wrong answer gets no push at all without a baseline
