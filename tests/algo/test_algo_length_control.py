"""Length controls (rlvr_cli/algo/length_control.py): hand-computed numbers, then invariants."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_cli.algo.advantages import group_advantages
from rlvr_cli.algo.length_control import (
    brevity_bonus,
    group_length_penalty,
    length_controlled_rewards,
    offset_incorrect,
)

HYP = settings(max_examples=60, deadline=None, derandomize=True, database=None)
T = torch.tensor


# ---------------------------------------------------------------- hand-computed numbers


def test_brevity_bonus_worked_example():
    # correct lengths 10, 20, 30: mean 20; b = clamp(1 - [0.5, 1, 1.5], 0, 1) = [0.5, 0, 0]; wrong: 0
    r, lens, ok = T([[1.0, 1, 1, 0]]), T([[10, 20, 30, 40]]), T([[1, 1, 1, 0]])
    assert torch.allclose(brevity_bonus(lens, ok), T([[0.5, 0, 0, 0]]))
    shaped = length_controlled_rewards(r, lens, ok, brevity_weight=1.0)
    assert torch.allclose(shaped, T([[1.5, 1, 1, 0]]))
    # group mean 3.5 / 4 = 0.875
    adv = group_advantages(shaped, "group_mean", "none")
    assert torch.allclose(adv, T([[0.625, 0.125, 0.125, -0.875]]))


def test_group_length_penalty_worked_example():
    # min 10, max 40: lambda = 1/2 - [0, 1/3, 2/3, 1] = [1/2, 1/6, -1/6, -1/2]; wrong ones keep min(0, lambda)
    lens, ok = T([[10, 20, 30, 40]]), T([[1, 0, 1, 0]])
    assert torch.allclose(group_length_penalty(lens, ok), T([[0.5, 0.0, -1 / 6, -0.5]]))
    shaped = length_controlled_rewards(T([[1.0, 0, 1, 0]]), lens, ok, length_penalty_weight=1.0)
    assert torch.allclose(shaped, T([[1.5, 0.0, 5 / 6, -0.5]]))


def test_offset_incorrect_worked_example():
    # wrong 0 -> -1: rewards [1, -1, -1, 1]; without std the advantages double, with group std they do not move
    r, ok = T([[1.0, 0, 0, 1]]), T([[1, 0, 0, 1]])
    shaped = offset_incorrect(r, ok, -1.0)
    assert torch.equal(shaped, T([[1.0, -1, -1, 1]]))
    assert torch.allclose(group_advantages(shaped, "group_mean", "none"), T([[1.0, -1, -1, 1]]))
    assert torch.allclose(group_advantages(r, "group_mean", "none"), T([[0.5, -0.5, -0.5, 0.5]]))
    a_std, b_std = group_advantages(shaped, "group_mean", "group_std"), group_advantages(r, "group_mean", "group_std")
    assert torch.allclose(a_std, b_std, atol=1e-5) and abs(a_std[0, 0].item() - 0.866) < 1e-3
    # without a baseline the offset is a real penalty
    assert torch.equal(group_advantages(shaped, "none", "none"), T([[1.0, -1, -1, 1]]))


def test_brevity_bonus_two_groups_use_their_own_mean():
    # group 2 has no correct response: no bonus at all
    lens, ok = T([[4, 12], [1, 100]]), T([[1, 1], [0, 0]])
    assert torch.allclose(brevity_bonus(lens, ok), T([[0.5, 0.0], [0.0, 0.0]]))


def test_equal_lengths_give_no_length_term():
    # Kimi's 0/0 is taken as 0 (an eps would hand every correct response +1/2)
    lens, ok = T([[7, 7, 7]]), T([[1, 0, 1]])
    assert torch.equal(group_length_penalty(lens, ok), torch.zeros(1, 3))
    assert torch.equal(brevity_bonus(lens, ok), torch.zeros(1, 3))


def test_all_weights_zero_is_the_identity():
    r = T([[1.0, 0, 0.5]])
    out = length_controlled_rewards(r, T([[3, 9, 27]]), T([[1, 0, 0]]))
    assert torch.equal(out, r) and out is not r


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="one shape"):
        brevity_bonus(T([[1, 2]]), T([[1, 0, 1]]))
    with pytest.raises(ValueError, match="one shape"):
        group_length_penalty(T([1, 2]), T([1, 0]))


# ---------------------------------------------------------------- invariants

groups = st.integers(1, 4).flatmap(
    lambda p: st.integers(2, 8).flatmap(
        lambda g: st.tuples(
            st.lists(st.lists(st.integers(1, 200), min_size=g, max_size=g), min_size=p, max_size=p),
            st.lists(st.lists(st.booleans(), min_size=g, max_size=g), min_size=p, max_size=p),
        )
    )
)


@HYP
@given(groups, st.floats(0, 2), st.floats(0, 2), st.floats(-2, 0))
def test_advantages_stay_zero_mean_within_each_group(data, wb, wl, off):
    lens, ok = T(data[0]), T(data[1])
    r = ok.to(torch.float32)
    shaped = length_controlled_rewards(r, lens, ok, wb, wl, off)
    adv = group_advantages(shaped, "group_mean", "none")
    assert torch.allclose(adv.sum(dim=1), torch.zeros(adv.shape[0]), atol=1e-4)


@HYP
@given(groups)
def test_bonus_touches_only_correct_and_penalty_never_rewards_a_wrong_answer(data):
    lens, ok = T(data[0]), T(data[1]).to(torch.bool)
    b, pen = brevity_bonus(lens, ok), group_length_penalty(lens, ok)
    assert (b[~ok] == 0).all() and (b >= 0).all() and (b <= 1).all()
    assert (pen[~ok] <= 0).all() and (pen >= -0.5).all() and (pen <= 0.5).all()


@HYP
@given(groups)
def test_shorter_never_earns_less(data):
    # within a group and a verdict, a shorter response gets at least the longer one's length term
    lens, ok = T(data[0]), T(data[1]).to(torch.bool)
    for term in (brevity_bonus(lens, ok), group_length_penalty(lens, ok)):
        for p in range(lens.shape[0]):
            for i in range(lens.shape[1]):
                for j in range(lens.shape[1]):
                    if ok[p, i] == ok[p, j] and lens[p, i] < lens[p, j]:
                        assert term[p, i] >= term[p, j] - 1e-6


@HYP
@given(groups, st.floats(-3, -0.1))
def test_offset_is_invisible_to_group_std_advantages_with_binary_rewards(data, off):
    ok = T(data[1])
    r = ok.to(torch.float32)
    a0 = group_advantages(r, "group_mean", "group_std")
    a1 = group_advantages(offset_incorrect(r, ok, off), "group_mean", "group_std")
    assert torch.allclose(a0, a1, atol=1e-4)
    d0 = group_advantages(r, "group_mean", "none")
    d1 = group_advantages(offset_incorrect(r, ok, off), "group_mean", "none")
    assert torch.allclose(d1, (1 - off) * d0, atol=1e-5)
