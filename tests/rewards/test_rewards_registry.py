"""The verifier registry agrees with the recipe schema; Outcome and its counts."""

from typing import get_args

import pytest

from rlvr_cli.recipe.schema import RewardSpec, VerifierName
from rlvr_cli.rewards import OUTCOMES, VERIFIERS, Outcome, outcome_counts, verify
from rlvr_cli.rewards.registry import accepted_options, options_for


def test_registry_is_keyed_by_the_schema_verifier_names():
    # `task` is not a verifier but "the task's own"; the scorer resolves it (tests/rewards/test_rewards_scorer.py)
    assert set(VERIFIERS) == set(get_args(VerifierName)) - {"task"}


def test_every_verifier_has_check_extract_and_a_safety_flag():
    for name, module in VERIFIERS.items():
        assert callable(module.check) and callable(module.extract), name
        assert module.IN_PROCESS_SAFE in (True, False), name
    # only the bounded-by-construction verifiers may run without the pool's time limit
    assert {n for n, m in VERIFIERS.items() if m.IN_PROCESS_SAFE} == {"integer", "countdown"}


def test_outcomes_are_the_five_of_the_issue():
    assert OUTCOMES == ("correct", "incorrect", "unparseable", "timeout", "error")


def test_outcome_rejects_an_unknown_outcome():
    with pytest.raises(ValueError):
        Outcome("maybe", 0.0, None)


def test_outcome_counts_has_every_outcome():
    results = [Outcome("correct", 1.0, "1"), Outcome("timeout", 0.0, None), Outcome("correct", 1.0, "2")]
    assert outcome_counts(results) == {"correct": 2, "incorrect": 0, "unparseable": 0, "timeout": 1, "error": 0}
    assert outcome_counts([]) == dict.fromkeys(OUTCOMES, 0)


def test_verify_dispatches_by_name_and_rejects_unknown_names():
    assert verify("integer", "#632", "632", marker="#").outcome == "correct"
    assert verify("countdown", "#(5*3)+7", '{"numbers": [3, 5, 7], "target": 22}', marker="#").outcome == "correct"
    assert verify("math", "\\boxed{\\frac12}", "0.5").outcome == "correct"
    with pytest.raises(ValueError, match="unknown verifier"):
        verify("task", "#1", "1")
    with pytest.raises(TypeError):
        verify("integer", "#1", "1", no_such_option=1)


def test_options_are_routed_to_the_verifiers_that_take_them():
    everything = {"marker": "#", "extract": ("boxed",), "rel_tol": 1e-3, "timeout_s": 1.0, "memory_mb": 256}
    assert options_for("integer", everything) == {"marker": "#", "extract": ("boxed",)}
    assert options_for("countdown", everything) == {"marker": "#"}
    assert set(options_for("math", everything)) == {"marker", "extract", "rel_tol"}
    assert set(options_for("code", everything)) == {"timeout_s", "memory_mb"}
    assert "on_start" not in accepted_options("code")


def test_reward_spec_extract_names_are_the_extractors():
    from typing import get_args

    from rlvr_cli.recipe.schema import ExtractMethod
    from rlvr_cli.rewards.extract import _METHODS, DEFAULT_EXTRACT, EXTRACT_METHODS

    assert get_args(ExtractMethod) == EXTRACT_METHODS == tuple(_METHODS)
    assert tuple(RewardSpec().extract) == DEFAULT_EXTRACT
    with pytest.raises(ValueError):
        RewardSpec(extract=["boxed", "boxed"])
    with pytest.raises(ValueError):
        RewardSpec(extract=["regex"])
