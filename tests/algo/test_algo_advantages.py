"""Group-relative advantages (rlvr_cli/algo/advantages.py): hand-computed numbers, invariants, a loop reference."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_cli.algo.advantages import BASELINES, SCALES, ZERO_SPREAD_ATOL, group_advantages

HYP = settings(max_examples=60, deadline=None, derandomize=True, database=None)


# ---------------------------------------------------------------- hand-computed numbers


def test_grpo_group_std_worked_example():
    # mean 0.5; deviations +-0.5; Bessel var = 4 * 0.25 / 3 = 1/3; std = 0.57735
    # A = +-0.5 / (0.57735 + 1e-6) = +-0.866024
    adv = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 1.0]]), "group_mean", "group_std")
    assert torch.allclose(adv, torch.tensor([[0.866024, -0.866024, -0.866024, 0.866024]]), atol=1e-6)


def test_population_std_would_give_a_different_number():
    # guards the Bessel convention: population std is 0.5, which would give A = +-1.0, not +-0.866
    adv = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 1.0]]), "group_mean", "group_std")
    assert abs(adv[0, 0].item() - 1.0) > 0.1


def test_dr_grpo_no_scale_worked_example():
    # A = r - mean = r - 0.5
    adv = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 1.0]]), "group_mean", "none")
    assert torch.equal(adv, torch.tensor([[0.5, -0.5, -0.5, 0.5]]))


def test_leave_one_out_worked_example():
    # r_0 - mean(0, 0, 0) = 1;  r_j - mean(1, 0, 0) = -1/3 for j = 1..3
    adv = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 0.0]]), "leave_one_out", "none")
    assert torch.allclose(adv, torch.tensor([[1.0, -1 / 3, -1 / 3, -1 / 3]]), atol=1e-7)


def test_leave_one_out_with_group_std():
    # LOO advantages [1, -1/3, -1/3, -1/3]; group std of [1,0,0,0]: mean 0.25,
    # Bessel var = (0.75^2 + 3 * 0.25^2) / 3 = (0.5625 + 0.1875) / 3 = 0.25 -> std 0.5
    # A = [1, -1/3, -1/3, -1/3] / 0.500001 = [2, -2/3, -2/3, -2/3] (to 1e-5)
    adv = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 0.0]]), "leave_one_out", "group_std")
    assert torch.allclose(adv, torch.tensor([[2.0, -2 / 3, -2 / 3, -2 / 3]]), atol=1e-5)


def test_no_baseline_no_scale_is_the_raw_reward():
    # plain REINFORCE: A = r
    r = torch.tensor([[1.0, 0.0, 0.5], [0.25, 0.25, 0.25]])
    assert torch.equal(group_advantages(r, "none", "none"), r)


def test_batch_std_worked_example():
    # batch [[1,0,0,1],[1,1,1,1]]: 8 rewards, six 1s and two 0s, batch mean 0.75
    # sum sq dev = 6 * 0.25^2 + 2 * 0.75^2 = 0.375 + 1.125 = 1.5; Bessel var = 1.5 / 7 = 0.2142857; std = 0.4629100
    # group 0: +-0.5 / (0.46291 + 1e-6) = +-1.080120; group 1 has zero spread -> exactly 0
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    adv = group_advantages(r, "group_mean", "batch_std")
    assert torch.allclose(adv[0], torch.tensor([1.080120, -1.080120, -1.080120, 1.080120]), atol=1e-5)
    assert torch.equal(adv[1], torch.zeros(4))


def test_group_std_is_per_group():
    # group 1 = 10 * group 0, so its std is 10x and its normalised advantages are the same +-0.866
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0], [10.0, 0.0, 0.0, 10.0]])
    adv = group_advantages(r, "group_mean", "group_std")
    assert torch.allclose(adv[0], adv[1], atol=1e-6)
    assert torch.allclose(adv[1], torch.tensor([0.866025, -0.866025, -0.866025, 0.866025]), atol=1e-5)


# ---------------------------------------------------------------- zero spread


@pytest.mark.parametrize("baseline", ["group_mean", "leave_one_out"])
@pytest.mark.parametrize("scale", ["group_std", "batch_std", "none"])
@pytest.mark.parametrize("noise", [0.0, 1e-12, 1e-9])
def test_zero_spread_group_gets_exactly_zero(baseline, scale, noise):
    r = torch.tensor([[0.3, 0.3 + noise, 0.3], [1.0, 0.0, 1.0]], dtype=torch.float64)
    adv = group_advantages(r, baseline, scale)
    assert torch.equal(adv[0], torch.zeros(3))  # exact zero, not +-1e-4 or +-1000
    assert (adv[1] != 0).all()  # the group with spread is untouched by the rule


@pytest.mark.parametrize("noise", [1e-12, 1e-9, 1e-7])
def test_zero_spread_rule_is_needed(noise):
    # without the rule, (r - mean) / std is O(1) for any nonzero spread, however tiny:
    # [0.3, 0.3+n, 0.3] -> deviations [-n/3, 2n/3, -n/3], std = n/sqrt(3), so A_1 = (2/3)*sqrt(3) = 1.1547 with eps = 0.
    # The rule must return 0 instead (and no NaN).
    r = torch.tensor([[0.3, 0.3 + noise, 0.3]], dtype=torch.float64)
    naive = (r - r.mean(dim=1, keepdim=True)) / r.std(dim=1, keepdim=True)
    assert naive[0, 1].item() == pytest.approx(2 / 3 * math.sqrt(3), rel=1e-3)
    assert torch.equal(group_advantages(r, "group_mean", "group_std", eps=0.0), torch.zeros(1, 3))


def test_constant_group_with_eps_zero_is_zero_not_nan():
    # std = 0, eps = 0: a plain division would give 0/0 = NaN
    adv = group_advantages(torch.tensor([[2.0, 2.0, 2.0, 2.0]]), "group_mean", "group_std", eps=0.0)
    assert torch.equal(adv, torch.zeros(1, 4))


@pytest.mark.parametrize("baseline", ["group_mean", "leave_one_out", "none"])
@pytest.mark.parametrize("noise", [0.0, 1e-12])
def test_batch_std_of_constant_batch_is_zero(baseline, noise):
    # every reward 0.3 (up to noise): batch std ~ 0 -> A = 0, not 0.3 / 1e-6 = 3e5 for baseline none
    r = torch.tensor([[0.3, 0.3 + noise], [0.3, 0.3]], dtype=torch.float64)
    adv = group_advantages(r, baseline, "batch_std")
    assert torch.equal(adv, torch.zeros(2, 2))


def test_std_at_threshold_boundary():
    # baseline none, so A = r / (s + eps) and only the std rule applies.
    # std of [0, 2e-6] = 2e-6 / sqrt(2) = 1.41421e-6 > atol = 1e-6: divides, A = [0, 2e-6 / 2.41421e-6] = [0, 0.828427]
    # std of [0, 1e-6] = 7.07e-7 <= atol: A = 0
    a = group_advantages(torch.tensor([[0.0, 2e-6]], dtype=torch.float64), "none", "group_std")
    assert torch.allclose(a, torch.tensor([[0.0, 0.828427]]), atol=1e-5)
    b = group_advantages(torch.tensor([[0.0, 1e-6]], dtype=torch.float64), "none", "group_std")
    assert torch.equal(b, torch.zeros(1, 2))
    assert ZERO_SPREAD_ATOL == 1e-6


# ---------------------------------------------------------------- errors and shapes


def test_leave_one_out_needs_two():
    with pytest.raises(ValueError):
        group_advantages(torch.tensor([[1.0]]), "leave_one_out", "none")


def test_rewards_must_be_2d():
    with pytest.raises(ValueError):
        group_advantages(torch.tensor([1.0, 0.0]), "group_mean", "group_std")


def test_output_is_float32_and_shape_preserved():
    adv = group_advantages(torch.tensor([[1, 0, 0], [0, 1, 1]], dtype=torch.float64), "group_mean", "group_std")
    assert adv.dtype == torch.float32 and adv.shape == (2, 3)


# ---------------------------------------------------------------- invariants and a loop reference

groups = st.integers(1, 4).flatmap(
    lambda p: st.integers(2, 6).flatmap(
        lambda g: st.lists(
            st.lists(st.floats(-3, 3, allow_nan=False, width=32), min_size=g, max_size=g), min_size=p, max_size=p
        )
    )
)


@HYP
@given(groups, st.sampled_from(["group_std", "batch_std", "none"]))
def test_group_mean_advantages_sum_to_zero(rows, scale):
    adv = group_advantages(torch.tensor(rows, dtype=torch.float64), "group_mean", scale)
    assert torch.allclose(adv.double().sum(dim=1), torch.zeros(len(rows), dtype=torch.float64), atol=1e-4)


@HYP
@given(groups)
def test_leave_one_out_is_rescaled_group_mean(rows):
    # r_i - (S - r_i)/(G-1) = (G r_i - S)/(G-1) = G/(G-1) * (r_i - S/G)
    r = torch.tensor(rows, dtype=torch.float64)
    g = r.shape[1]
    loo = group_advantages(r, "leave_one_out", "none")
    gm = group_advantages(r, "group_mean", "none")
    assert torch.allclose(loo, gm * g / (g - 1), atol=1e-5)


def _std(xs):
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def reference_advantages(rows, baseline, scale, eps=1e-6, atol=ZERO_SPREAD_ATOL):
    """Slow loop, written from the docstring's definitions."""
    flat = [x for row in rows for x in row]
    batch_s = _std(flat) if len(flat) >= 2 else 0.0
    out = []
    for row in rows:
        g = len(row)
        mean = sum(row) / g
        res = []
        for i, r in enumerate(row):
            if baseline == "group_mean":
                a = r - mean
            elif baseline == "leave_one_out":
                a = r - (sum(row) - r) / (g - 1)
            else:
                a = r
            s = {"group_std": _std(row), "batch_std": batch_s, "none": None, "mean": mean}[scale]
            if s is not None:
                a = 0.0 if s <= atol else a / (s + eps)
            if baseline != "none" and max(row) - min(row) <= atol:
                a = 0.0
            res.append(a)
        out.append(res)
    return out


@HYP
@given(groups, st.sampled_from(sorted(BASELINES)), st.sampled_from(sorted(SCALES)))
def test_matches_loop_reference(rows, baseline, scale):
    got = group_advantages(torch.tensor(rows, dtype=torch.float64), baseline, scale)
    want = torch.tensor(reference_advantages(rows, baseline, scale), dtype=torch.float32)
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-5)


def test_matches_loop_reference_on_binary_rewards():
    # the common RLVR case: 0/1 correctness, many zero-spread groups
    gen = torch.Generator().manual_seed(0)
    p_correct = torch.rand(16, 1, generator=gen)  # per-prompt difficulty, so some groups are all 0 or all 1
    r = (torch.rand(16, 8, generator=gen) < p_correct).double()
    r[0], r[1] = 0.0, 1.0
    rows = r.tolist()
    assert any(max(x) == min(x) for x in rows) and any(max(x) != min(x) for x in rows)
    for baseline in BASELINES:
        for scale in SCALES:
            got = group_advantages(r, baseline, scale)
            want = torch.tensor(reference_advantages(rows, baseline, scale), dtype=torch.float32)
            assert torch.allclose(got, want, rtol=1e-6, atol=1e-6), (baseline, scale)
