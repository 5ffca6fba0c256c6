"""Unbiased pass@k, pass^k and maj@k (rlvr_cli/algo/passk.py)."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction
from math import comb

import pytest

from rlvr_cli.algo.passk import (
    maj_at_k,
    majority_vote,
    mean_pass_at_k,
    mean_pass_hat_k,
    pass_at_k,
    pass_hat_k,
)


def test_worked_example_n4_c1():
    # pass@1 = 1 - C(3,1)/C(4,1) = 1 - 3/4 = 0.25; pass@2 = 1 - C(3,2)/C(4,2) = 1 - 3/6 = 0.5
    # pass@3 = 1 - C(3,3)/C(4,3) = 1 - 1/4 = 0.75; pass@4 = 1 (n - c = 3 < 4)
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)
    assert pass_at_k(4, 1, 3) == pytest.approx(0.75)
    assert pass_at_k(4, 1, 4) == 1.0


def test_more_hand_values():
    # n=5, c=2, k=2: 1 - C(3,2)/C(5,2) = 1 - 3/10 = 0.7
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    # c = 0 -> 0 for every k; c = n -> 1
    assert pass_at_k(8, 0, 3) == 0.0
    assert pass_at_k(8, 8, 1) == 1.0


def test_one_when_fewer_wrong_than_k():
    # n - c < k: every k-subset contains a correct sample
    for n in range(1, 9):
        for c in range(n + 1):
            for k in range(n - c + 1, n + 1):
                assert pass_at_k(n, c, k) == 1.0, (n, c, k)


def _brute_force(n, c, k):
    # samples 0..c-1 are the correct ones; fraction of k-subsets that contain at least one
    subsets = list(itertools.combinations(range(n), k))
    return Fraction(sum(any(i < c for i in s) for s in subsets), len(subsets))


def test_matches_brute_force_enumeration():
    rng = random.Random(0)
    cases = [(n, c, k) for n in range(1, 9) for c in range(n + 1) for k in range(1, n + 1)]
    for n, c, k in rng.sample(cases, 80) + [(8, 3, 4), (8, 1, 8), (7, 2, 3)]:
        assert pass_at_k(n, c, k) == pytest.approx(float(_brute_force(n, c, k)), abs=1e-12), (n, c, k)


def test_stable_for_large_n():
    # product form vs exact big-integer combinatorics: 1 - C(990, 100) / C(1000, 100)
    exact = 1 - Fraction(comb(990, 100), comb(1000, 100))
    assert pass_at_k(1000, 10, 100) == pytest.approx(float(exact), abs=1e-12)


def test_mean_over_prompts():
    # n = 4, k = 1: (0.25 + 1 + 0) / 3 = 0.416667
    assert mean_pass_at_k([1, 4, 0], n=4, k=1) == pytest.approx(1.25 / 3)
    with pytest.raises(ValueError):
        mean_pass_at_k([], n=4, k=1)


@pytest.mark.parametrize("fn", [pass_at_k, pass_hat_k])
@pytest.mark.parametrize("n,c,k", [(4, 5, 1), (4, -1, 1), (4, 1, 0), (4, 1, 5)])
def test_invalid_arguments(fn, n, c, k):
    with pytest.raises(ValueError):
        fn(n, c, k)


# ---------------------------------------------------------------- pass^k


def test_pass_hat_k_worked_example_n4_c2():
    # pass^1 = C(2,1)/C(4,1) = 2/4; pass^2 = C(2,2)/C(4,2) = 1/6; pass^3 = C(2,3)/C(4,3) = 0/4
    assert pass_hat_k(4, 2, 1) == pytest.approx(0.5)
    assert pass_hat_k(4, 2, 2) == pytest.approx(1 / 6)
    assert pass_hat_k(4, 2, 3) == 0.0
    assert pass_hat_k(4, 2, 4) == 0.0


def test_pass_hat_k_more_hand_values():
    # n=5, c=3, k=2: C(3,2)/C(5,2) = 3/10; n=8, c=6, k=3: C(6,3)/C(8,3) = 20/56
    assert pass_hat_k(5, 3, 2) == pytest.approx(0.3)
    assert pass_hat_k(8, 6, 3) == pytest.approx(20 / 56)
    assert pass_hat_k(8, 8, 8) == 1.0 and pass_hat_k(8, 0, 1) == 0.0
    # k = 1 is the plain accuracy, equal to pass@1
    for c in range(9):
        assert pass_hat_k(8, c, 1) == pytest.approx(c / 8) == pytest.approx(pass_at_k(8, c, 1))


def _brute_force_all(n, c, k):
    # samples 0..c-1 are the correct ones; fraction of k-subsets made only of them
    subsets = list(itertools.combinations(range(n), k))
    return Fraction(sum(all(i < c for i in s) for s in subsets), len(subsets))


def test_pass_hat_k_matches_enumeration_and_pass_at_k_swapped():
    for n in range(1, 9):
        for c in range(n + 1):
            for k in range(1, n + 1):
                exact = float(_brute_force_all(n, c, k))
                assert pass_hat_k(n, c, k) == pytest.approx(exact, abs=1e-12), (n, c, k)
                # all k right = not (at least one of k wrong)
                assert pass_hat_k(n, c, k) == pytest.approx(1 - pass_at_k(n, n - c, k), abs=1e-12), (n, c, k)
                assert pass_hat_k(n, c, k) <= pass_at_k(n, c, k) + 1e-12


def test_pass_hat_k_stable_for_large_n():
    exact = Fraction(comb(990, 100), comb(1000, 100))
    assert pass_hat_k(1000, 990, 100) == pytest.approx(float(exact), rel=1e-9)


def test_mean_pass_hat_k_over_prompts():
    # n = 4, k = 2: (1/6 + 1 + 0) / 3
    assert mean_pass_hat_k([2, 4, 0], n=4, k=2) == pytest.approx((1 / 6 + 1) / 3)
    with pytest.raises(ValueError):
        mean_pass_hat_k([], n=4, k=1)


# ---------------------------------------------------------------- majority vote / maj@k


def test_majority_vote_counts():
    assert majority_vote(["1", "2", "2", "3"]) == "2"


def test_ties_go_to_first_appearance():
    # b and a both twice: b appears first
    assert majority_vote(["b", "a", "a", "b"]) == "b"
    assert majority_vote(["a", "b", "b", "a"]) == "a"
    assert majority_vote(["x", "y", "z"]) == "x"


def test_none_does_not_vote():
    # three Nones would win if they voted
    assert majority_vote([None, None, None, "7"]) == "7"
    # first appearance counts among voters only: None at index 0 doesn't make anything "first"
    assert majority_vote([None, "b", "a", "a", "b"]) == "b"
    assert majority_vote([None, None]) is None
    assert majority_vote([]) is None


def test_maj_at_k_blocks():
    # k = 3 -> blocks [1,1,2] and [2,2,1]: winners 1 (wrong) and 2 (right) -> 1/2
    answers = ["1", "1", "2", "2", "2", "1"]
    correct = [False, False, True, True, True, False]
    assert maj_at_k(answers, correct, 3) == pytest.approx(0.5)
    # k = 6: one block, 3 votes each, tie -> "1" first -> 0
    assert maj_at_k(answers, correct, 6) == 0.0
    # k = 1: each sample alone -> accuracy 3/6
    assert maj_at_k(answers, correct, 1) == pytest.approx(0.5)


def test_maj_at_k_ignores_leftover_samples():
    # n = 5, k = 2: floor(5/2) = 2 blocks [a, a], [b, b]; the 5th sample is unused -> (1 + 0) / 2
    assert maj_at_k(["a", "a", "b", "b", "a"], [True, True, False, False, True], 2) == pytest.approx(0.5)


def test_maj_at_k_all_none_is_zero():
    assert maj_at_k([None, None, None, None], [False] * 4, 2) == 0.0
    # None never wins even if most samples have no answer: blocks [None, None, 5] and [None, None, None] -> 1/2
    assert maj_at_k([None, None, "5", None, None, None], [False, False, True, False, False, False], 3) == 0.5


def test_maj_at_k_invalid():
    with pytest.raises(ValueError):
        maj_at_k(["a"], [True, False], 1)
    with pytest.raises(ValueError):
        maj_at_k(["a", "b"], [True, False], 3)
