"""model.autocast: sampling, log-probs and the update under bf16 / fp16 autocast on the CPU, weights and
optimiser in float32; the sampler/trainer mismatch is then measured and logged."""

from __future__ import annotations

import json

import pytest

from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.train.rl import train_rl
from rlvr_cli.train.run_writer import RunDir
from test_lora import lora_recipe, tiny_llama  # noqa: F401 - the fixture


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_autocast_runs_and_logs_the_mismatch(tiny_llama, tmp_path, dtype):  # noqa: F811
    r = lora_recipe(tiny_llama, f"model.autocast={dtype}", "steps=2", "model.lora=null", "optim.lr=1e-3")
    train_rl(r, tmp_path / "run")
    status = json.loads((tmp_path / "run" / "run.json").read_text())
    assert status["old_logprobs"] == "recompute"  # the sampler's reduced-precision log-probs are not the trainer's
    rows = RunDir(tmp_path / "run").read_metrics()
    assert all(row["mismatch_abs_mean"] is not None and row["mismatch_abs_mean"] >= 0 for row in rows)
    assert max(row["mismatch_abs_max"] for row in rows) > 0


def test_autocast_default_changes_nothing():
    r = load_recipe("grpo")
    assert r.model.autocast == "auto"
    assert not any("avx512_bf16" in n for n in r.notes())
