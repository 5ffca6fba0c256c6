"""Task family `reasoning_gym`: three of its generators behind rlvr's task interface, scored by their own
scorers in the verifier pool (under its time limit) and mapped to rlvr's outcomes."""

from __future__ import annotations

import json
import random

import pytest

pytest.importorskip("reasoning_gym", reason="the `reasoning-gym` extra is not installed")

from rlvr_cli.recipe.schema import Recipe, ReasoningGymTaskSpec, RewardSpec  # noqa: E402
from rlvr_cli.rewards.scorer import Scorer, ScoreItem  # noqa: E402
from rlvr_cli.tasks import build_task  # noqa: E402

GENERATORS = ["countdown", "basic_arithmetic", "gsm_symbolic"]


def _task(dataset: str, **kw):
    return build_task(ReasoningGymTaskSpec(dataset=dataset, num_eval=4, num_train=40, **kw))


@pytest.fixture(scope="module")
def scorer_for():
    opened = []

    def make(task, **spec):
        s = Scorer(RewardSpec(workers=1, **spec), task)
        opened.append(s)
        return s

    yield make
    for s in opened:
        s.close()


@pytest.mark.parametrize("dataset", GENERATORS)
def test_generator_problems_and_outcomes(dataset, scorer_for):
    task = _task(dataset)
    held_out = task.eval_problems()
    assert len(held_out) == 4 and held_out == _task(dataset).eval_problems()  # fixed by split_seed
    train = task.train_problems(random.Random(0), 6)
    assert not {p.prompt for p in train} & {p.prompt for p in held_out}
    p = held_out[0]
    assert "<answer></answer>" in p.prompt
    gold = json.loads(p.reference)["entry"]["answer"]
    scorer = scorer_for(task)
    items = [
        ScoreItem(p, f"Let me think.\n<answer>{gold}</answer>", 0),
        ScoreItem(p, "<answer>-123456789</answer>", 1),
        ScoreItem(p, f"the answer is {gold}", 2),
    ]
    out = scorer.score(items)
    assert [s.outcome for s in out] == ["correct", "incorrect", "unparseable"]
    assert [s.reward for s in out] == [1.0, 0.0, 0.0]


def test_scorer_runs_under_the_pools_time_limit(scorer_for):
    # reasoning-gym's countdown scorer evaluates the expression: a power tower never finishes in-process
    task = _task("countdown")
    p = task.eval_problems()[0]
    s = scorer_for(task, timeout_s=1.0).score([ScoreItem(p, "<answer>9**9**9**9</answer>", 0)])[0]
    assert s.outcome == "timeout" and s.reward == 0.0


def test_recipe_and_missing_package(monkeypatch):
    r = Recipe.model_validate({"task": {"name": "reasoning_gym", "dataset": "chain_sum", "config": {"min_terms": 2, "max_terms": 3}}})
    assert build_task(r.task).name == "reasoning_gym:chain_sum"
    from rlvr_cli.errors import UserError

    with pytest.raises(UserError, match="reasoning-gym refused"):
        _task("no_such_generator")
    import builtins

    real_import = builtins.__import__

    def no_rg(name, *a, **k):
        if name == "reasoning_gym":
            raise ImportError(name)
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_rg)
    with pytest.raises(UserError, match=r"rlvr-cli\[reasoning-gym\]"):
        _task("countdown")


@pytest.mark.parametrize("template", ["{question} = {answer}?", "Answer in {0}", "{question"])
def test_bad_prompt_template_is_refused_when_the_recipe_is_read(template, tmp_path):
    """The schema refuses it (a recipe validation error, exit 2) before any task is built."""
    import yaml

    from rlvr_cli.errors import UserError
    from rlvr_cli.recipe.load import load_recipe

    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({"extends": "grpo", "task": {"name": "reasoning_gym", "dataset": "basic_arithmetic",
                                                                "prompt_template": template}}))
    with pytest.raises(UserError, match="prompt_template"):
        load_recipe(str(path))
