"""The reward-term registry (rlvr_cli/recipe/reward_terms.py): every registered type runs end to end, through
the scorer and its worker pool, on a right and a wrong answer, and the schema, the scorer and the metrics
read the registry. A type without a row in CASES fails here (issue 51: `{type: reasoning_gym}` validated
and scored 0 on a correct answer because one list in the scorer forgot it)."""

from __future__ import annotations

import json
import re
import typing

import pytest

from rlvr_cli.recipe import reward_terms
from rlvr_cli.recipe.reward_terms import REWARD_TERMS
from rlvr_cli.recipe.schema import MAX_COEF, RewardSpec
from rlvr_cli.rewards import ScoreItem, Scorer
from rlvr_cli.rewards.registry import VERIFIERS
from rlvr_cli.tasks import build_task
from rlvr_cli.tasks.base import Problem

ADD = "```python\ndef add(a, b):\n    return a {} b\n```"


class CodeTask:
    """A task whose references are Python tests (the `code` verifier's), for the `code` term."""

    verifier, answer_marker, spec = "code", "", None

    def incorrect_reference(self, problem):
        raise ValueError("no wrong label")


def arithmetic():
    task = build_task("arithmetic")
    return task, task.problem(347, 285)


def countdown():
    task = build_task("countdown")
    return task, Problem("cd:1", "8,2,1>8:", json.dumps({"numbers": [8, 2, 1], "target": 8}), {})


def reasoning_gym():
    pytest.importorskip("reasoning_gym", reason="the `reasoning-gym` extra is not installed")
    from rlvr_cli.recipe.schema import ReasoningGymTaskSpec

    task = build_task(ReasoningGymTaskSpec(dataset="basic_arithmetic", num_eval=2, num_train=2))
    return task, task.eval_problems()[0]


def code():
    return CodeTask(), Problem("code:1", "write add", "assert add(1, 2) == 3\nassert add(-1, 1) == 0", {})


def rg_answer(p, wrong=False):
    gold = json.loads(p.reference)["entry"]["answer"]
    return f"<answer>{gold}{'1' if wrong else ''}</answer>"


# type -> (the term's fields, the task and problem, the right response, the wrong one, the two values)
CASES = {
    "task": ({}, arithmetic, "#632", "#633", 1.0, 0.0),
    "integer": ({}, arithmetic, "#632", "#633", 1.0, 0.0),
    "math": ({}, arithmetic, "#632", "#633", 1.0, 0.0),
    "countdown": ({}, countdown, "1*8=8#1*8", "#8+2", 1.0, 0.0),
    "code": ({}, code, ADD.format("+"), ADD.format("-"), 1.0, 0.0),
    "reasoning_gym": ({}, reasoning_gym, rg_answer, lambda p: rg_answer(p, wrong=True), 1.0, 0.0),
    "format": ({}, arithmetic, "#632", "632 I think", 1.0, 0.0),
    "format_only": ({}, arithmetic, "#633", "no answer at all", 1.0, 0.0),
    "random": ({"p": 1.0}, arithmetic, "#632", "#633", 1.0, 1.0),
    "incorrect": ({}, arithmetic, "WRONG_LABEL", "#632", 1.0, 0.0),
    "function": ({"function": "FILE:credit"}, arithmetic, "#632", "#633", 1.0, 0.0),
}


def test_every_registered_type_has_a_case():
    assert set(CASES) == set(REWARD_TERMS)


@pytest.mark.parametrize("type_", sorted(REWARD_TERMS))
def test_every_registered_type_scores_a_right_and_a_wrong_answer(type_, tmp_path):
    fields, make, right, wrong, want_right, want_wrong = CASES[type_]
    task, p = make()
    if "function" in fields:
        module = tmp_path / "credit.py"
        module.write_text("def credit(completions, answer, **kw):\n"
                          "    return [1.0 if c == '#' + a else 0.0 for c, a in zip(completions, answer)]\n")
        fields = {"function": f"{module}:credit"}
    responses = [r(p) if callable(r) else r for r in (right, wrong)]
    if type_ == "incorrect":
        responses[0] = "#" + task.incorrect_reference(p)
    spec = RewardSpec.model_validate({"terms": [{"type": type_, "weight": 1.0, **fields}], "workers": 1})
    with Scorer(spec, task) as s:
        got = s.score([ScoreItem(p, r, i, 1) for i, r in enumerate(responses)])
    assert [g.terms[type_] for g in got] == [want_right, want_wrong], [g.outcome for g in got]
    assert [g.reward for g in got] == [want_right, want_wrong]


def test_the_schema_union_is_the_registry():
    union = typing.get_args(typing.get_args(reward_terms.RewardTerm)[0])
    assert set(union) == set(REWARD_TERMS.values())
    assert set(typing.get_args(reward_terms.VerifierName)) == set(VERIFIERS) | {"task"}
    assert reward_terms.MAX_WEIGHT == MAX_COEF
    for name, cls in REWARD_TERMS.items():  # each entry says how its value is computed
        assert "value" in cls.__dict__ or name in typing.get_args(reward_terms.VerifierName), name


def test_a_truncated_response_zeroes_answer_based_terms_only(tmp_path):
    task, p = arithmetic()
    spec = RewardSpec.model_validate({"terms": [{"type": "task"}, {"type": "random", "p": 1.0},
                                                {"type": "format_only"}], "workers": 1})
    with Scorer(spec, task) as s:
        (got,) = s.score([ScoreItem(p, "#632", 0, 1, truncated=True)])
    assert got.terms == {"task": 0.0, "random": 1.0, "format_only": 0.0}


def test_the_readme_reward_row_names_every_registered_type():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    (row,) = [line for line in readme.splitlines() if line.startswith("| reward | `reward.terms` |")]
    named = set(re.findall(r"`(\w+)`", row))
    assert sorted(set(REWARD_TERMS) - named) == [], "README's reward row misses these reward.terms types"
