"""Behaviour log-probs under top-k / top-p (TRL#6789): the trainer renormalises every log-prob over the
support the sampler drew from, so an on-policy step has ratio exactly 1 again (rlvr_cli/algo/logprobs.py)."""

from __future__ import annotations

import pytest

from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.train.rl import train_rl
from rlvr_cli.train.run_writer import RunDir

from conftest import tiny_run  # tests/conftest.py

SMALL = tiny_run("rollout.prompts_per_step=3", "rollout.group_size=4", "rollout.max_new_tokens=16", "optim.mu=1",
                 "optim.minibatches=1", "rollout.temperature=1.3")


@pytest.mark.parametrize("truncation", [["rollout.top_k=3"], ["rollout.top_p=0.7"]], ids=["top_k", "top_p"])
def test_an_on_policy_step_under_truncated_sampling_has_ratio_exactly_one(tiny_base, tmp_path, truncation):
    # recomputed behaviour log-probs: the same forward as the update's, over the same supports: rho = 1 bit for bit
    train_rl(load_recipe("grpo", [f"model.name={tiny_base}", *SMALL, *truncation, "rollout.old_logprobs=recompute"]),
             tmp_path / "recompute")
    rows = RunDir(tmp_path / "recompute").read_metrics()
    for row in rows:
        assert row["ratio_max"] == 1.0 and row["ratio_min"] == 1.0
        assert row["clip_low_frac"] == 0 and row["clip_high_frac"] == 0
        # the sampler's log-probs are the renormalised ones too: they differ from the trainer's by round-off,
        # not by the log of the kept mass (which is > 0.01 at these settings, tests/sampling)
        assert row["mismatch_abs_max"] < 1e-4
    # the sampler's log-probs as pi_old (auto in float32): the ratio is 1 up to round-off, as without truncation
    train_rl(load_recipe("grpo", [f"model.name={tiny_base}", *SMALL, *truncation]), tmp_path / "sampler")
    for row in RunDir(tmp_path / "sampler").read_metrics():
        assert abs(row["ratio_max"] - 1) < 1e-4 and abs(row["ratio_min"] - 1) < 1e-4
        assert row["clip_low_frac"] == 0 and row["clip_high_frac"] == 0
