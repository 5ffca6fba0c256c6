"""rlvr_cli/evaluation/settings.py: flag overrides, their checks (one line per bad flag) and the protocol label."""

from __future__ import annotations

import pytest

from rlvr_cli.errors import UserError
from rlvr_cli.evaluation.settings import EvalSettings, powers_of_two, protocol_label, with_overrides


def test_powers_of_two_up_to_n():
    assert powers_of_two(16) == [1, 2, 4, 8, 16] and powers_of_two(12) == [1, 2, 4, 8] and powers_of_two(1) == [1]


def test_another_n_resets_the_k_values_and_maj_follows_pass():
    base = EvalSettings(n=16, pass_at_k=[1, 16], maj_at_k=[4])
    assert with_overrides(base, "#") == base  # nothing given: the run's own protocol
    s = with_overrides(base, "#", n=4)
    assert (s.pass_at_k, s.maj_at_k) == ([1, 2, 4], [1, 2, 4])
    s = with_overrides(base, "#", pass_at_k=[1, 8])
    assert (s.n, s.pass_at_k, s.maj_at_k) == (16, [1, 8], [1, 8])
    assert with_overrides(base, "#", temperature=0.6).maj_at_k == [4]  # k values kept while n is


def test_each_bad_flag_is_one_line():
    with pytest.raises(UserError) as e:
        with_overrides(EvalSettings(), "", n=4, pass_at_k=[1, 8], budget=32, min_think=40)
    assert e.value.problems == [
        "--pass-at-k 8: k must be <= n (4); raise --n or drop these k",
        "--maj-at-k 8: k must be <= n (4); raise --n or drop these k",  # maj@k follows the given pass@k
        "--budget: the task has no answer marker, so thinking has no end to force or delay",
        "--min-think: the task has no answer marker, so thinking has no end to force or delay",
        "--min-think 40: must be <= --budget (32)"]
    with pytest.raises(UserError, match="--min-think 64: must be below --max-new-tokens"):
        with_overrides(EvalSettings(), "#", min_think=64)


def test_the_protocol_label_names_what_differs():
    run = EvalSettings()
    assert protocol_label(run, run) is None
    s = with_overrides(run, "#", n=64, temperature=0.6, budget=32)
    assert protocol_label(run, s) == "n_64-temperature_0.6-pass_at_k_1,2,4,8,16,32,64-maj_at_k_1,2,4,8,16,32,64-budget_32"
    assert protocol_label(run, run, task_name="countdown") == "task_countdown"
