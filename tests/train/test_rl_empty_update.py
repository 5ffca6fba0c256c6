"""A minibatch with no loss token (every response truncated and masked) takes no optimiser step.

Its gradient is exactly zero, yet AdamW's step would still move every weight (weight decay, and the
momentum of earlier updates). The update is counted in `updates_empty` and keeps its slot in the
learning-rate schedule.
"""

from __future__ import annotations

import torch
from safetensors.torch import load_file

from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.train.rl import train_rl
from rlvr_cli.train.run_writer import RunDir


def test_an_update_without_loss_tokens_leaves_the_weights(tiny_base, tmp_path):
    r = load_recipe("grpo", [
        f"model.name={tiny_base}", "overlong.mask_truncated=true", "rollout.max_new_tokens=1",
        "rollout.prompts_per_step=2", "rollout.group_size=4", "steps=2", "optim.weight_decay=0.1",
        "optim.lr=0.02", "eval.at_start=false", "eval.n=1", "eval.num_prompts=1", "checkpoint.every=0",
    ])
    train_rl(r, tmp_path / "run")
    rows = RunDir(tmp_path / "run").read_metrics()
    assert all(row["truncated_frac"] == 1.0 for row in rows)  # every response hit max_new_tokens
    before = load_file(f"{tiny_base}/model.safetensors")
    after = load_file(tmp_path / "run" / "checkpoints" / "step_2" / "model.safetensors")
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert [row["updates_empty"] for row in rows] == [2, 2] and [row["updates"] for row in rows] == [2, 2]
    assert rows[-1]["lr"] == r.optim.lr  # the schedule (constant here) still advanced without warnings
