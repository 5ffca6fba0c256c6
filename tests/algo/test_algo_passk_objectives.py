"""PKPO and the analytic pass@k advantage (rlvr_cli/algo/passk_objectives.py): hand values, k = 1, brute force."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_cli.algo.advantages import group_advantages
from rlvr_cli.algo.passk import pass_at_k
from rlvr_cli.algo.passk_objectives import passk_analytic_advantages, pkpo_rewards

HYP = settings(max_examples=60, deadline=None, derandomize=True, database=None)

GROUP = torch.tensor([[1.0, 0.0, 1.0, 0.0]])  # G = 4, 2 correct


# ---------------------------------------------------------------- hand-computed (G = 4, c = 2, k = 2)


def test_pkpo_hand_values():
    # correct -> 1; incorrect -> rho(3, 2, 1) = 2/3; mean = (2 + 4/3) / 4 = 5/6 = pass@2 of the group
    r = pkpo_rewards(GROUP, 2)
    assert r.flatten().tolist() == pytest.approx([1.0, 2 / 3, 1.0, 2 / 3])
    assert float(r.mean()) == pytest.approx(5 / 6) == pytest.approx(pass_at_k(4, 2, 2))
    adv = group_advantages(r.float(), "group_mean", "none")
    assert adv.flatten().tolist() == pytest.approx([1 / 6, -1 / 6, 1 / 6, -1 / 6], abs=1e-6)


def test_analytic_hand_values():
    # Rbar 5/6, sigma = sqrt(5/6 * 1/6) = 0.372678; A_pos = (1/6)/sigma, A_neg = (1/6 - 1/3)/sigma
    sigma = math.sqrt(5 / 36)
    adv = passk_analytic_advantages(GROUP, 2)
    assert adv.flatten().tolist() == pytest.approx([1 / 6 / sigma, -1 / 6 / sigma] * 2, abs=1e-6)
    assert adv[0, 0].item() == pytest.approx(0.447214, abs=1e-6)


# ---------------------------------------------------------------- k = 1


def test_pkpo_k1_is_plain_mean_centring():
    r = torch.tensor([[1.0, 0.0, 0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0, 0.0, 0.0]])
    assert torch.equal(pkpo_rewards(r, 1), r.double())
    adv = group_advantages(pkpo_rewards(r, 1).float(), "group_mean", "none")
    assert torch.allclose(adv, r - r.mean(dim=1, keepdim=True), atol=1e-7)


def test_analytic_k1_is_grpo_with_population_std():
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]])
    p = r.mean()
    expected = (r - p) / torch.sqrt(p * (1 - p))
    assert torch.allclose(passk_analytic_advantages(r, 1), expected, atol=1e-6)


# ---------------------------------------------------------------- edge cases and errors


def test_all_equal_and_too_few_wrong_groups_get_zero_analytic_advantage():
    # all correct, all wrong, and 1 wrong < k = 2 (every pair passes: sigma = 0)
    r = torch.tensor([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0]])
    assert torch.equal(passk_analytic_advantages(r, 2), torch.zeros(3, 4))
    # PKPO gives every sample 1 in the last group (each wrong one is in a passing pair for sure)
    assert pkpo_rewards(r, 2)[2].tolist() == [1.0, 1.0, 1.0, 1.0]
    assert pkpo_rewards(r, 2)[1].tolist() == [0.0, 0.0, 0.0, 0.0]


def test_k_equal_g_rewards_a_wrong_sample_only_when_some_other_is_right():
    # k = G = 3: the one subset is the group: any correct -> every sample gets 1
    assert pkpo_rewards(torch.tensor([[1.0, 0.0, 0.0]]), 3).tolist() == [[1.0, 1.0, 1.0]]


@pytest.mark.parametrize("fn", [pkpo_rewards, passk_analytic_advantages])
def test_bad_inputs_are_errors(fn):
    with pytest.raises(ValueError, match="binary"):
        fn(torch.tensor([[0.5, 1.0]]), 1)
    with pytest.raises(ValueError, match="k <= G"):
        fn(torch.tensor([[0.0, 1.0]]), 3)
    with pytest.raises(ValueError, match="prompts, group"):
        fn(torch.tensor([0.0, 1.0]), 1)


# ---------------------------------------------------------------- brute force over subsets


def _brute(f: list[int], k: int) -> tuple[list[float], list[float]]:
    """Enumerate every k-subset: PKPO's R_i = (G/k) * mean over subsets of [i in I] max_I f, and the
    analytic advantage = mean over subsets containing i of (max_I f - mean) / std (population std)."""
    g = len(f)
    subsets = list(itertools.combinations(range(g), k))
    score = {s: max(f[j] for j in s) for s in subsets}
    mean = sum(score.values()) / len(subsets)
    std = math.sqrt(sum((v - mean) ** 2 for v in score.values()) / len(subsets))
    pkpo = [g / k * sum(score[s] for s in subsets if i in s) / len(subsets) for i in range(g)]
    if std <= 1e-12:
        return pkpo, [0.0] * g
    analytic = []
    for i in range(g):
        mine = [score[s] for s in subsets if i in s]
        analytic.append(sum((v - mean) / std for v in mine) / len(mine))
    return pkpo, analytic


@HYP
@given(st.lists(st.integers(0, 1), min_size=2, max_size=8), st.data())
def test_equals_brute_force_enumeration(f, data):
    k = data.draw(st.integers(1, len(f)))
    pkpo, analytic = _brute(f, k)
    t = torch.tensor([f], dtype=torch.float32)
    assert pkpo_rewards(t, k).flatten().tolist() == pytest.approx(pkpo, abs=1e-9)
    assert passk_analytic_advantages(t, k).flatten().tolist() == pytest.approx(analytic, abs=1e-5)
    # mean PKPO reward is the group's unbiased pass@k
    assert sum(pkpo) / len(f) == pytest.approx(pass_at_k(len(f), sum(f), k), abs=1e-9)


@HYP
@given(st.lists(st.integers(0, 1), min_size=2, max_size=8), st.data())
def test_analytic_numerator_is_centred_pkpo(f, data):
    # the two objectives share their numerator: A_analytic * sigma = R - mean(R)
    k = data.draw(st.integers(1, len(f)))
    t = torch.tensor([f], dtype=torch.float32)
    r = pkpo_rewards(t, k)
    rbar = pass_at_k(len(f), sum(f), k)
    sigma = math.sqrt(rbar * (1 - rbar))
    a = passk_analytic_advantages(t, k).double()
    if sigma > 1e-6:
        assert (a * sigma).flatten().tolist() == pytest.approx((r - r.mean()).flatten().tolist(), abs=1e-5)
