"""A LoRA run says nothing peft has to say about itself (issue 44): every checkpoint logged "Could not find
a config file in builtin:tiny" after peft asked the Hub for the base's config.json, and every run
"fan_in_fan_out is set to False" (GPT-2's Conv1D) and transformers' is_gradient_checkpointing deprecation.
Here on builtin:tiny, a name peft cannot read as a path, with a checkpoint at every step and the run
loaded back as a merged model."""

from __future__ import annotations

import json
import warnings

import pytest

pytest.importorskip("peft")

from rlvr_cli.models import load_model  # noqa: E402
from rlvr_cli.recipe.load import load_recipe  # noqa: E402
from rlvr_cli.train.rl import train_rl  # noqa: E402

from conftest import tiny_run  # noqa: E402  (tests/conftest.py)

PEFT_NOISE = ("config file", "fan_in_fan_out", "is_gradient_checkpointing", "save_embedding_layers")


def test_a_lora_run_and_its_checkpoints_raise_no_peft_warning(tiny_base, tmp_path, monkeypatch):
    import huggingface_hub

    asked = []
    monkeypatch.setattr(huggingface_hub, "file_exists", lambda *a, **k: asked.append(a) or False)
    recipe = load_recipe("grpo", ["model.name=builtin:tiny", *tiny_run("checkpoint.every=1"), "model.lora.rank=4",
                                  "optim.lr=1e-3"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train_rl(recipe, tmp_path / "run")
        model, _, resolved = load_model(str(tmp_path / "run"))
    noise = [f"{w.filename}:{w.lineno}: {w.message}" for w in caught if any(n in str(w.message) for n in PEFT_NOISE)]
    assert noise == [] and asked == []
    assert resolved.step == 2
    config = json.loads((tmp_path / "run" / "checkpoints" / "step_2" / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == "builtin:tiny" and config["fan_in_fan_out"] is True
