"""The length-inflation experiment's recipes (issue 32, recipes/experiments/length_check/): what each arm
changes, its base, a 2-step smoke run; and the earlier design's base (builtin:tiny-length).

The real base (builtin:tiny-check-marked) takes minutes to build, so the smoke runs start from the untrained
builtin:tiny-init; the experiment itself is `rlvr sweep results/length/sweep.yaml`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlvr_cli.errors import UserError
from rlvr_cli.models.builtin import WARM_START_RECIPES, builtin_model_dir
from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.train.rl import train_rl

from conftest import tiny_run  # tests/conftest.py: the shared tiny-run overrides

ROOT = Path(__file__).resolve().parents[2]
ARMS = {  # arm -> (advantage.scale, loss.aggregation)
    "grpo": ("group_std", "seq_mean_token_mean"),
    "dr_grpo": ("none", "seq_mean_token_sum_norm"),
    "no_length_norm": ("group_std", "seq_mean_token_sum_norm"),
    "no_std": ("none", "seq_mean_token_mean"),
}
SMALL = tiny_run("model.name=builtin:tiny-init", "rollout.max_new_tokens=12",
                 without=("eval.at_start", "eval.every", "checkpoint.every"))


def arm(name: str) -> Path:
    return ROOT / "recipes" / "experiments" / "length_check" / f"{name}.yaml"


@pytest.mark.parametrize("name", sorted(ARMS))
def test_arms_differ_only_in_the_two_normalisations(name):
    r, g = load_recipe(arm(name)), load_recipe(arm("grpo"))
    assert (r.advantage.scale, r.loss.aggregation) == ARMS[name]
    assert r.model.name == "builtin:tiny-check-marked" and r.kl.placement == "none"
    assert (r.task.name, r.task.check_marks) == ("answer_check", True)
    assert 150 <= r.steps <= 300
    same = lambda x: {k: v for k, v in x.model_dump().items() if k not in ("advantage", "loss", "name", "description")}  # noqa: E731
    assert same(r) == same(g)


def test_the_base_rambles_after_marked_errors_before_the_answer():
    assert WARM_START_RECIPES["tiny-length"] == "base_sft_length"
    t = load_recipe("base_sft_length").task
    assert (t.ramble_position, t.error_mark, t.ramble_length) == ("before_answer", "?", "geometric")
    assert t.ramble_error_rate > 4 * t.error_rate  # P(filler | error) >> P(filler | correct) in the data
    with pytest.raises(UserError, match="builtin:tiny-length"):
        builtin_model_dir("builtin:nosuch")


@pytest.mark.parametrize("name", ["grpo", "dr_grpo"])
def test_arm_smoke_runs_two_steps(name, tmp_path, rlvr_cache):
    out = train_rl(load_recipe(arm(name), SMALL), tmp_path / name)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    step0 = json.loads((out / "eval" / "step_0.json").read_text())
    assert "filler_given_incorrect" in step0  # the eval record carries conditional verbosity


GW_KEYS = ("gw_incorrect_share", "gw_incorrect_short_share", "gw_incorrect_mid_share", "gw_incorrect_long_share",
           "gw_len_corr_incorrect")


def test_the_step_row_carries_the_length_bias_of_the_trained_batch(tmp_path, tiny_base):
    """2 GRPO steps from builtin:tiny (pass@1 ~0.35: groups with right and wrong answers): every row has
    the gw_* metrics, and where a batch had incorrect responses with gradient their terciles add up."""
    recipe = load_recipe("grpo", ["model.name=builtin:tiny", "kl.placement=none", "rollout.prompts_per_step=4", "rollout.group_size=4",
                                       "rollout.max_new_tokens=32", "eval.n=2", "eval.num_prompts=2",
                                       "steps=2"])
    out = train_rl(recipe, tmp_path / "grpo")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and all(set(GW_KEYS) <= set(r) for r in rows)
    measured = [r for r in rows if r["gw_incorrect_share"] is not None]
    assert measured, "no step had a group with both right and wrong answers"
    for r in measured:
        assert 0 < r["gw_incorrect_share"] <= 1
        parts = r["gw_incorrect_short_share"] + r["gw_incorrect_mid_share"] + r["gw_incorrect_long_share"]
        assert parts == pytest.approx(r["gw_incorrect_share"])
