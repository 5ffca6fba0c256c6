"""`rlvr export` of a model.lora recipe: TRL's peft_config, verl's lora_rank / lora_alpha / target_modules."""

from __future__ import annotations

import pytest

from rlvr_cli.bridges import export_recipe
from rlvr_cli.recipe.load import load_recipe

SETS = ["model.lora.rank=8", "model.lora.alpha=16", "model.lora.target_modules=[q_proj, v_proj]"]


def test_verl_lora_keys():
    e = export_recipe(load_recipe("dr_grpo", SETS), "verl")
    m = "actor_rollout_ref.model"
    assert (e.settings[f"{m}.lora_rank"], e.settings[f"{m}.lora_alpha"]) == (8, 16)
    assert e.settings[f"{m}.target_modules"] == ["q_proj", "v_proj"]
    assert not any("lora" in x for x in e.warnings)
    e = export_recipe(load_recipe("dr_grpo", ["model.lora.dropout=0.1"]), "verl")
    assert e.settings[f"{m}.target_modules"] == "all-linear"
    assert any(x.startswith("model.lora.dropout") for x in e.warnings)
    assert not any("lora" in k for k in export_recipe(load_recipe("dr_grpo"), "verl").settings)


def test_trl_lora_note_and_peft_config():
    e = export_recipe(load_recipe("dr_grpo", SETS), "trl")
    assert any("peft_config=peft.LoraConfig(r=8, lora_alpha=16" in n for n in e.notes)
    assert not any("lora" in n for n in export_recipe(load_recipe("dr_grpo"), "trl").notes)
    pytest.importorskip("peft")
    from rlvr_cli.bridges.trl_reward import trainer_inputs

    cfg = trainer_inputs(load_recipe("dr_grpo", ["model.name=builtin:tiny-init", *SETS]), num_prompts=4)["peft_config"]
    assert (cfg.r, cfg.lora_alpha, cfg.lora_dropout, set(cfg.target_modules)) == (8, 16, 0.0, {"q_proj", "v_proj"})
