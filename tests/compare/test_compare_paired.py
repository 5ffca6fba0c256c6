"""Paired comparisons between arms (rlvr_cli/compare/paired.py): McNemar and the bootstrap against
scipy.stats on hand-made tables, Holm on hand-computed values, the verdict rule, and hostile input."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from rlvr_cli.compare.paired import (
    UNDECIDED,
    Difference,
    McNemar,
    arm_from_records,
    holm,
    mcnemar_exact,
    pair_arms,
    paired_difference,
    paired_mcnemar,
    per_prompt_scores,
    legacy_verdict,
    legacy_verdict,
    verdict,
)
from rlvr_cli.errors import UserError


def record(counts, n=4, ids=None, majority=None, greedy=None):
    ids = ids or [f"p{i}" for i in range(len(counts))]
    return {"n": n, "per_prompt": [{"id": p, "correct": c} for p, c in zip(ids, counts)],
            "per_prompt_majority": majority, "per_prompt_greedy": greedy}


# ---------------------------------------------------------------- McNemar


def table(b, c, both=0, neither=0):
    """Paired outcomes with b prompts right only under the control, c only under the other arm."""
    x = [1] * b + [0] * c + [1] * both + [0] * neither
    y = [0] * b + [1] * c + [1] * both + [0] * neither
    return np.array(x, bool), np.array(y, bool)


def test_mcnemar_worked_example():
    # b = 1, c = 6: p = 2 * (C(7,0) + C(7,1)) / 2^7 = 2 * 8 / 128 = 0.125
    t = mcnemar_exact(*table(1, 6, both=10, neither=3))
    assert (t.only_control, t.only_other) == (1, 6)
    assert t.p_value == pytest.approx(0.125)
    # concordant prompts change nothing
    assert mcnemar_exact(*table(1, 6)).p_value == t.p_value


@pytest.mark.parametrize("b,c", [(0, 0), (0, 1), (0, 5), (3, 3), (2, 9), (9, 2), (10, 25), (40, 61), (150, 190)])
def test_mcnemar_equals_scipy_binomtest(b, c):
    t = mcnemar_exact(*table(b, c, both=7, neither=4))
    expected = 1.0 if b + c == 0 else stats.binomtest(b, b + c, 0.5).pvalue
    assert t.p_value == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_mcnemar_hostile_input():
    with pytest.raises(UserError, match="0/1"):
        mcnemar_exact([1, 0, np.nan], [1, 1, 0])
    with pytest.raises(UserError, match="not paired"):
        mcnemar_exact([1, 0, 1], [1, 1])
    with pytest.raises(UserError, match="one correct/incorrect value per prompt"):
        mcnemar_exact([], [])


# ---------------------------------------------------------------- bootstrap


def test_bootstrap_equals_scipy_percentile_paired():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 9, 60) / 8  # per-prompt pass@1 with n = 8
    b = np.clip(a + rng.choice([-0.125, 0, 0.125, 0.25], 60), 0, 1)
    d = paired_difference(a, b, n_resamples=4000, seed=11)
    ref = stats.bootstrap((a, b), lambda x, y, axis: np.mean(y - x, axis=axis), paired=True, vectorized=True,
                          n_resamples=4000, method="percentile", confidence_level=0.95,
                          rng=np.random.default_rng(11))
    assert d.mean == pytest.approx(np.mean(b - a))
    # the same draws: the same interval, to rounding
    assert d.low == pytest.approx(ref.confidence_interval.low, abs=1e-12)
    assert d.high == pytest.approx(ref.confidence_interval.high, abs=1e-12)
    assert (d.n_resamples, d.seed, d.prompts, d.resampled) == (4000, 11, 60, "prompts")


def test_bootstrap_hand_made_table():
    # 40 prompts: the other arm gains 0.25 on 20 of them and nothing on the rest -> D = 0.125,
    # bootstrap standard error sqrt(var/P) = sqrt(0.015625 / 40) = 0.0198 -> about 0.125 +- 0.039
    a = np.full(40, 0.5)
    b = a + np.r_[np.full(20, 0.25), np.zeros(20)]
    d = paired_difference(a, b)
    assert d.mean == pytest.approx(0.125)
    assert d.low == pytest.approx(0.125 - 1.96 * 0.0198, abs=0.01)
    assert d.high == pytest.approx(0.125 + 1.96 * 0.0198, abs=0.01)
    # identical arms: a point interval at 0
    z = paired_difference(a, a)
    assert (z.mean, z.low, z.high) == (0.0, 0.0, 0.0)


def test_bootstrap_is_seeded_and_stable_in_resamples():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 5, 80) / 4
    b = np.clip(a + rng.normal(0.05, 0.2, 80), 0, 1)
    first = paired_difference(a, b, seed=1)
    assert paired_difference(a, b, seed=1) == first
    width = first.high - first.low
    for s in range(2, 6):  # N_RESAMPLES's claim: another bootstrap seed moves a bound by < width / 10
        other = paired_difference(a, b, seed=s)
        assert abs(other.low - first.low) < width / 10 and abs(other.high - first.high) < width / 10


def test_paired_is_tighter_than_unpaired_when_prompts_vary():
    # prompt difficulty varies a lot, the arms differ by a little on every prompt: pairing sees it
    rng = np.random.default_rng(5)
    hard = rng.uniform(0, 1, 200)
    a, b = hard, np.clip(hard + 0.03 + rng.normal(0, 0.02, 200), 0, 1.2)
    d = paired_difference(a, b)
    assert d.low > 0
    unpaired = stats.bootstrap((b, a), lambda x, y, axis: np.mean(x, axis=axis) - np.mean(y, axis=axis),
                               n_resamples=2000, method="percentile", rng=np.random.default_rng(0))
    assert unpaired.confidence_interval.low < 0 < unpaired.confidence_interval.high


def test_seeds_enter_the_interval():
    # 3 paired seeds; prompts agree but one seed of the other arm is far off: seeds are resampled too
    a = np.tile(np.linspace(0, 1, 50), (3, 1))
    b = a + np.array([[0.02], [0.03], [0.30]])
    d = paired_difference(a, b, paired_seeds=True)
    assert d.resampled == "prompts and seeds" and d.seeds == (3, 3)
    assert d.mean == pytest.approx(np.mean([0.02, 0.03, 0.30]))
    assert d.low < 0.05 and d.high > 0.25  # the seed spread, not a prompt-only point
    only_prompts = paired_difference(a[:1], b[:1])
    assert only_prompts.high - only_prompts.low < 1e-9


def test_unpaired_seeds_average_within_each_arm():
    # 2 control seeds, 3 other seeds that are not the same seeds: D = mean(other) - mean(control)
    a = np.array([[0.2, 0.4, 0.6], [0.4, 0.6, 0.8]])
    b = np.array([[0.5, 0.5, 0.5], [0.6, 0.6, 0.6], [0.7, 0.7, 0.7]])
    d = paired_difference(a, b)
    assert d.mean == pytest.approx(0.6 - 0.5) and d.seeds == (2, 3) and not d.paired_seeds
    assert d.resampled == "prompts and seeds" and d.low < d.mean < d.high


def test_bootstrap_hostile_input():
    with pytest.raises(UserError, match=r"prompt index 2 .* nan, not a number"):
        paired_difference([0.1, 0.2, np.nan], [0.1, 0.2, 0.3])
    with pytest.raises(UserError, match="not paired"):
        paired_difference([0.1, 0.2], [0.1, 0.2, 0.3])
    with pytest.raises(UserError, match="no per-prompt results|no prompts"):
        paired_difference(np.zeros((0, 3)), np.zeros((1, 3)))


# ---------------------------------------------------------------- Holm


def test_holm_hand_values():
    # sorted 0.005, 0.01, 0.03, 0.04 -> 4*0.005 = 0.02, 3*0.01 = 0.03, 2*0.03 = 0.06, max(0.06, 1*0.04) = 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.2, None, 0.01]) == [pytest.approx(0.2), None, pytest.approx(0.02)]
    assert holm([0.9, 0.8]) == [1.0, pytest.approx(1.0)]  # capped at 1, monotone
    assert holm([]) == []
    with pytest.raises(UserError, match="not in"):
        holm([0.1, float("nan")])


# ---------------------------------------------------------------- verdict


def diff(low, high):
    return Difference((low + high) / 2, low, high, 0.95, 100, 0, 10, (1, 1), False, "prompts")


def test_legacy_verdict_rule():
    assert legacy_verdict(diff(0.01, 0.05)) == "better"
    assert legacy_verdict(diff(-0.05, -0.01)) == "worse"
    assert legacy_verdict(diff(-0.01, 0.05)) == UNDECIDED == "not distinguishable at this budget"
    right = McNemar(2, 12, 0.013, (0.013,))
    assert legacy_verdict(diff(0.01, 0.05), right) == "better"
    assert legacy_verdict(diff(0.01, 0.05), right, p_adjusted=0.08) == UNDECIDED  # Holm took it away
    assert legacy_verdict(diff(0.01, 0.05), McNemar(12, 2, 0.013, (0.013,))) == UNDECIDED  # the two disagree
    assert legacy_verdict(diff(-0.05, -0.01), McNemar(12, 2, 0.013, (0.013,))) == "worse"


def test_verdict_rule_is_the_holm_adjusted_crossed_test_with_its_sign():
    from rlvr_cli.compare.crossed import crossed_test

    up = crossed_test([[0.1, 0.2, 0.3, 0.4]], [[0.3, 0.4, 0.5, 0.7]], paired_seeds=True)  # every prompt higher
    down = crossed_test([[0.3, 0.4, 0.5, 0.7]], [[0.1, 0.2, 0.3, 0.4]], paired_seeds=True)
    assert up.p_value < 0.01
    assert verdict(up, up.p_value) == "better" and verdict(down, down.p_value) == "worse"
    assert verdict(up, 0.08) == UNDECIDED  # Holm took it away
    assert verdict(up, None) == UNDECIDED


# ---------------------------------------------------------------- arms from eval records


def test_arm_from_records_and_pass_scores():
    arm = arm_from_records("A", [1, 2], [record([2, 4, 0]), record([1, 4, 0])])
    assert arm.correct.tolist() == [[2, 4, 0], [1, 4, 0]] and arm.binary is None
    # pass^2 per prompt: C(2,2)/C(4,2) = 1/6, 1, 0; pass@2: 1 - C(2,2)/C(4,2) = 5/6
    assert per_prompt_scores(arm, "pass^k", 2)[0] == pytest.approx([1 / 6, 1, 0])
    assert per_prompt_scores(arm, "pass@k", 2)[0] == pytest.approx([5 / 6, 1, 0])
    assert per_prompt_scores(arm)[1] == pytest.approx([0.25, 1, 0])
    with pytest.raises(UserError, match="needs k <= n = 4"):
        per_prompt_scores(arm, "pass@k", 8)


def test_pairing_by_prompt_id_and_seed():
    ids = ["a", "b", "c"]
    control = arm_from_records("C", [2, 1], [record([1, 2, 3], ids=ids, majority=[False, True, True]),
                                             record([0, 2, 4], ids=ids, majority=[False, True, True])])
    # the other arm lists its prompts in another order and its seeds the other way round
    other = arm_from_records("O", [1, 2], [record([4, 0, 1], ids=["c", "a", "b"], majority=[True, False, False]),
                                           record([4, 3, 2], ids=["c", "a", "b"], majority=[True, True, True])])
    p = pair_arms(control, other)
    assert p.paired_seeds and p.control.seeds == p.other.seeds == (1, 2)
    assert p.control.correct.tolist() == [[0, 2, 4], [1, 2, 3]]
    assert p.other.correct.tolist() == [[0, 1, 4], [3, 2, 4]]
    assert p.other.binary.tolist() == [[False, False, True], [True, True, True]]
    # different seeds: still paired by prompt, not by seed
    third = arm_from_records("T", [7], [record([1, 1, 1], ids=ids)])
    assert not pair_arms(control, third).paired_seeds


def test_paired_mcnemar_over_seeds_is_the_largest_p():
    ids = [f"q{i}" for i in range(30)]
    maj_c = [False] * 30
    strong = [True] * 20 + [False] * 10  # c = 20, b = 0: p = 2 / 2^20
    weak = [True] * 4 + [False] * 26  # c = 4, b = 0: p = 2 / 16 = 0.125
    control = arm_from_records("C", [1, 2], [record([0] * 30, ids=ids, majority=maj_c)] * 2)
    other = arm_from_records("O", [1, 2], [record([0] * 30, ids=ids, majority=strong),
                                           record([0] * 30, ids=ids, majority=weak)])
    t = paired_mcnemar(pair_arms(control, other))
    assert t.per_seed == pytest.approx((2 / 2**20, 0.125))
    assert t.p_value == pytest.approx(0.125) and (t.only_control, t.only_other) == (0, 24)
    # unpaired seeds: no single pair of outcomes per prompt
    lone = arm_from_records("L", [9, 8], [record([0] * 30, ids=ids, majority=weak)] * 2)
    assert paired_mcnemar(pair_arms(control, lone)) is None
    # no binary outcomes recorded: no test
    bare = arm_from_records("B", [1, 2], [record([0] * 30, ids=ids)] * 2)
    assert paired_mcnemar(pair_arms(control, bare)) is None


def test_refuses_different_prompts_naming_them():
    a = arm_from_records("grpo", [0], [record([1, 2, 3], ids=["x", "y", "z"])])
    b = arm_from_records("dapo", [0], [record([1, 2, 3], ids=["x", "y", "w"])])
    with pytest.raises(UserError, match=r"arm grpo and arm dapo were evaluated on different prompts: "
                                        r"1 only in arm grpo \(first 'z'\), 1 only in arm dapo \(first 'w'\)"):
        pair_arms(a, b)


def test_refuses_different_n():
    a = arm_from_records("grpo", [0], [record([1, 2], n=4)])
    b = arm_from_records("dapo", [0], [record([1, 2], n=8)])
    with pytest.raises(UserError, match=r"different n \(4 vs 8 samples per prompt\)"):
        pair_arms(a, b)


def test_refuses_seeds_of_one_arm_on_different_prompts():
    with pytest.raises(UserError, match=r"arm A seed 1 and seed 2 were evaluated on different prompts"):
        arm_from_records("A", [1, 2], [record([1, 2]), record([1, 2], ids=["p0", "other"])])


@pytest.mark.parametrize(
    "rec,match",
    [
        (record([1, float("nan")]), r"per_prompt\[1\] \('p1'\): correct = nan, expected an integer 0..4"),
        (record([1, 5]), r"correct = 5, expected an integer 0..4"),
        (record([1, 2.5]), r"correct = 2.5"),
        (record([1, None]), r"correct = None"),
        ({"n": 4}, "no per_prompt list"),
        ({"n": 4, "per_prompt": []}, "no per_prompt list"),
        ({"n": float("nan"), "per_prompt": [{"id": "a", "correct": 1}]}, "n = nan"),
        (record([1, 2], majority=[True]), "per_prompt_majority is not a list of 2"),
    ],
)
def test_hostile_records(rec, match):
    with pytest.raises(UserError, match=match) as e:
        arm_from_records("A", [3], [rec])
    assert "arm A (seed 3)" in str(e.value)


def test_a_prompt_listed_twice_pairs_by_occurrence():
    """A dataset with a repeated row lists its prompt twice in every arm's held-out set: the k-th
    occurrences pair with each other, whatever order the other arm lists them in."""
    from rlvr_cli.compare.paired import occurrence_keys

    assert occurrence_keys(["a", "b", "a", "a"]) == ["a", "b", "a#2", "a#3"]
    a = arm_from_records("A", [0], [record([1, 2, 3], ids=["a", "b", "a"])])
    b = arm_from_records("B", [0], [record([4, 0, 2], ids=["a", "b", "a"])])
    assert a.prompt_ids == ("a", "b", "a#2") and a.correct.tolist() == [[1, 2, 3]]
    pairing = pair_arms(a, b)
    assert pairing.other.correct.tolist() == [[4, 0, 2]]


def test_an_arm_with_no_eval_files():
    with pytest.raises(UserError, match="arm empty: no eval records"):
        arm_from_records("empty", [], [])


def test_an_astronomically_large_count_is_a_user_error_not_an_overflow():
    with pytest.raises(UserError, match=r"correct = 1000000000000.*expected an integer 0..4"):
        arm_from_records("A", [0], [record([1, 10**400, 0])])
