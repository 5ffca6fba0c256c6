"""`rollout.ignore_eos` reaches the trainer's sampler: fixed work per step (every response L_max tokens)."""

from __future__ import annotations

from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.train.rl import train_rl
from rlvr_cli.train.rundir import RunDir


def test_ignore_eos_makes_every_rollout_max_length(tiny_base, tmp_path):
    sets = [f"model.name={tiny_base}", "steps=1", "rollout.prompts_per_step=2", "rollout.group_size=2",
            "rollout.max_new_tokens=12", "eval.at_start=false", "eval.n=2", "eval.num_prompts=2", "checkpoint.every=0"]
    normal = RunDir(train_rl(load_recipe("dr_grpo", sets), tmp_path / "eos")).read_metrics()[0]
    fixed = RunDir(train_rl(load_recipe("dr_grpo", [*sets, "rollout.ignore_eos=true"]), tmp_path / "fixed")).read_metrics()[0]
    assert normal["len_mean"] < 12  # the warm-started model answers in fewer than 12 tokens
    assert fixed["len_mean"] == 12 and fixed["truncated_frac"] == 1.0 and fixed["gen_tokens"] == 4 * 12
