"""`rlvr export` of the objective family (issue 30): loss.objective, advantage.scale `mean` (MaxRL) and
loss.entropy_control, mapped exactly where TRL / verl have the knob, warned by name where not."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlvr_cli.bridges import export_recipe
from rlvr_cli.recipe.load import load_recipe

ACTOR = "actor_rollout_ref.actor"
VERL_YAML = Path(__file__).resolve().parents[1] / "fixtures" / "verl_0.9.1_ppo_trainer.yaml"


def _export(target: str, *sets: str, preset: str = "grpo"):
    return export_recipe(load_recipe(preset, list(sets)), target)


def _warned(exp, field: str) -> list[str]:
    return [w for w in exp.warnings if w.startswith(f"{field}:")]


# --- TRL ---------------------------------------------------------------------------------------------
def test_trl_cispo_cap_is_one_plus_eps_high():
    exp = _export("trl", "loss.objective.type=cispo", "loss.objective.eps_high=4.0", "loss.aggregation=token_mean")
    assert exp.settings["loss_type"] == "cispo" and exp.settings["epsilon_high"] == 5.0  # TRL clamps at max=epsilon_high
    assert not _warned(exp, "loss.objective.eps_low") and not _warned(exp, "loss.objective")


def test_trl_cispo_warns_for_a_lower_bound_and_another_aggregation():
    exp = _export("trl", "loss.objective.type=cispo", "loss.objective.eps_low=0.2")
    assert _warned(exp, "loss.objective.eps_low") and any("token_mean" in w for w in _warned(exp, "loss.aggregation"))


def test_trl_sapo_temperatures():
    exp = _export("trl", "loss.objective.type=sapo", "loss.objective.tau_pos=0.9", "loss.objective.tau_neg=1.2")
    s = exp.settings
    assert (s["loss_type"], s["sapo_temperature_pos"], s["sapo_temperature_neg"]) == ("sapo", 0.9, 1.2)
    assert not _warned(exp, "loss.aggregation")  # grpo's seq_mean_token_mean is what TRL's sapo forces
    assert _warned(_export("trl", "loss.objective.type=sapo", "loss.aggregation=token_mean"), "loss.aggregation")


@pytest.mark.parametrize("kind", ["gmpo", "dppo_tv", "dppo_kl"])
def test_trl_has_no_gmpo_or_dppo(kind):
    exp = _export("trl", f"loss.objective.type={kind}")
    assert exp.settings["loss_type"] == "grpo" and any(kind in w for w in _warned(exp, "loss.objective"))


def test_trl_maxrl_and_adaptive_entropy():
    exp = _export("trl", preset="maxrl")
    assert exp.settings["scale_rewards"] == "none" and any("MaxRL" in w for w in _warned(exp, "advantage.scale"))
    assert not _warned(exp, "advantage.eps")  # no std, no eps
    ent = _export("trl", "loss.entropy_control.target=0.3", "loss.entropy_coef=0.01", "loss.entropy_control.delta=0.002")
    s = ent.settings
    assert s["use_adaptive_entropy"] is True and (s["entropy_coef"], s["entropy_target"], s["entropy_coef_delta"]) == (
        0.01, 0.3, 0.002)
    assert (s["entropy_coef_min"], s["entropy_coef_max"]) == (0.0, 1.0)


@pytest.mark.parametrize("preset", ["cispo", "sapo", "gmpo", "maxrl"])
def test_trl_presets_build_a_grpo_config(preset):
    trl = pytest.importorskip("trl")
    cfg = trl.GRPOConfig(**export_recipe(load_recipe(preset), "trl").settings)
    assert cfg.loss_type == {"cispo": "cispo", "sapo": "sapo", "gmpo": "grpo", "maxrl": "dapo"}[preset]


# --- verl --------------------------------------------------------------------------------------------
def test_verl_loss_modes_and_bounds():
    cispo = _export("verl", preset="cispo").settings
    assert cispo[f"{ACTOR}.policy_loss.loss_mode"] == "cispo"
    assert cispo[f"{ACTOR}.clip_ratio_high"] == 4.0 and 1 - cispo[f"{ACTOR}.clip_ratio_low"] < 0  # no lower bound
    sapo = _export("verl", "loss.objective.type=sapo", "loss.objective.tau_pos=0.9").settings
    assert sapo[f"{ACTOR}.policy_loss.loss_mode"] == "sapo" and sapo[f"{ACTOR}.tau_pos"] == 0.9
    gmpo = _export("verl", "loss.objective.type=gmpo", "loss.objective.eps_high=0.3").settings
    assert gmpo[f"{ACTOR}.policy_loss.loss_mode"] == "geo_mean"
    assert (gmpo[f"{ACTOR}.clip_ratio_low"], gmpo[f"{ACTOR}.clip_ratio_high"]) == (0.4, 0.3)


@pytest.mark.parametrize("kind,delta", [("dppo_tv", 0.15), ("dppo_kl", 0.05)])
def test_verl_dppo_always_sets_the_importance_cap(kind, delta):
    s = _export("verl", f"loss.objective.type={kind}", "loss.objective.is_cap=10000").settings
    assert s[f"{ACTOR}.policy_loss.loss_mode"] == kind
    assert (s[f"{ACTOR}.clip_ratio_low"], s[f"{ACTOR}.clip_ratio_high"]) == (delta, delta)
    assert s[f"{ACTOR}.clip_ratio_c"] == 10000  # verl's default 3.0 would truncate rho at 3
    assert _export("verl", f"loss.objective.type={kind}").settings[f"{ACTOR}.clip_ratio_c"] == 20.0


def test_verl_warns_for_maxrl_and_adaptive_entropy():
    exp = _export("verl", preset="maxrl")
    assert exp.settings["algorithm.norm_adv_by_std_in_grpo"] is False
    assert any("tajwarfahim/maxrl" in w for w in _warned(exp, "advantage.scale"))
    ent = _export("verl", "loss.entropy_control.target=0.3", "loss.entropy_coef=0.01")
    assert ent.settings[f"{ACTOR}.entropy_coeff"] == 0.01 and _warned(ent, "loss.entropy_control")


def test_verl_sequence_ratio_with_cispo_is_warned():
    assert _warned(_export("verl", "loss.objective.type=cispo", "loss.ratio=sequence"), "loss.ratio")


@pytest.mark.parametrize("sets", [["loss.objective.type=cispo"], ["loss.objective.type=sapo"],
                                  ["loss.objective.type=gmpo"], ["loss.objective.type=dppo_kl"]])
def test_verl_objective_keys_exist_in_verls_config(sets):
    omegaconf = pytest.importorskip("omegaconf")
    cfg = omegaconf.OmegaConf.load(VERL_YAML)
    for key, value in _export("verl", *sets).settings.items():
        if key.startswith(ACTOR + ".") and key.split(".")[2] in ("clip_ratio", "clip_ratio_low", "clip_ratio_high", "clip_ratio_c", "tau_pos",
                                 "tau_neg", "policy_loss", "entropy_coeff"):
            default = omegaconf.OmegaConf.select(cfg, key, default=KeyError)
            assert default is not KeyError, key
            number = (int, float)
            same_kind = isinstance(value, number) if isinstance(default, number) else isinstance(value, type(default))
            assert default is None or same_kind, (key, default, value)


GDPO = ("reward.combination=decoupled", "reward.terms=[{type: task}, {type: format, weight: 0.5}]")


def test_gdpo_maps_to_each_anchors_name_and_warns_what_it_cannot_carry():
    trl = _export("trl", *GDPO)
    assert trl.settings["multi_objective_aggregation"] == "normalize_then_sum"
    assert any("one function per reward term" in w for w in _warned(trl, "reward.combination"))
    assert "multi_objective_aggregation" not in _export("trl").settings  # TRL's default: sum_then_normalize
    verl = _export("verl", *GDPO)
    assert verl.settings["algorithm.adv_estimator"] == "gdpo"
    assert any("gdpo_reward_keys" in w and "tokens" in w for w in _warned(verl, "reward.combination"))


def test_model_autocast_is_trls_mixed_precision_flag_and_a_warning_for_verl():
    assert _export("trl", "model.autocast=bfloat16").settings["bf16"] is True
    assert _export("trl", "model.autocast=float16").settings["fp16"] is True
    assert _export("trl").settings["bf16"] is False
    assert _warned(_export("verl", "model.autocast=bfloat16"), "model.autocast")
    assert not _warned(_export("verl"), "model.autocast")
