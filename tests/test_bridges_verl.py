"""`rlvr export --to verl`: the overrides of every shipped RL preset apply to verl's own trainer
configuration in OmegaConf struct mode, through Hydra's override parser: every key exists (or is added
with `+` where verl's schema has no such key), and every value has the type of verl's default.

The configuration is verl 0.9.1's flattened ``_generated_ppo_trainer.yaml``, shipped as
tests/fixtures/verl_0.9.1_ppo_trainer.yaml (its header gives the provenance): installing verl itself
needs ray and a transformers older than the one rlvr uses.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

omegaconf = pytest.importorskip("omegaconf", reason="the `verl` extra (omegaconf) is not installed")
pytest.importorskip("hydra", reason="the `verl` extra (hydra-core) is not installed")

from hydra._internal.config_loader_impl import ConfigLoaderImpl  # noqa: E402
from hydra.core.override_parser.overrides_parser import OverridesParser  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from rlvr_cli.bridges import export_recipe  # noqa: E402
from rlvr_cli.cli.export import render  # noqa: E402
from rlvr_cli.recipe.load import list_shipped, load_recipe  # noqa: E402

VERL_YAML = Path(__file__).parent / "fixtures" / "verl_0.9.1_ppo_trainer.yaml"
RL_PRESETS = [name for name, path in list_shipped() if load_recipe(str(path)).algorithm == "rl"]
_MISSING = object()


_LOADED = None


def verl_config():
    global _LOADED
    if _LOADED is None:
        _LOADED = OmegaConf.load(VERL_YAML)
    cfg = copy.deepcopy(_LOADED)
    OmegaConf.set_struct(cfg, True)
    return cfg


def _kind(v):
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "str"
    if OmegaConf.is_list(v) or isinstance(v, list):
        return "list"
    if OmegaConf.is_dict(v) or isinstance(v, dict):
        return "dict"
    return type(v).__name__


def apply(lines: list[str]):
    """Apply override lines as Hydra does (struct mode: an unknown key without `+` raises)."""
    cfg = verl_config()
    before = verl_config()
    overrides = OverridesParser.create().parse_overrides(lines)
    ConfigLoaderImpl._apply_overrides_to_config(overrides, cfg)
    problems = []
    for ov in overrides:
        key = ov.key_or_group
        default = OmegaConf.select(before, key, default=_MISSING)
        if ov.is_add():
            if default is not _MISSING:
                problems.append(f"{key}: `+` on a key verl already has")
            continue
        new = OmegaConf.select(cfg, key)
        if default is not None and _kind(default) != _kind(new):
            problems.append(f"{key}: verl's default {default!r} is {_kind(default)}, exported {new!r} is {_kind(new)}")
    return cfg, problems


def override_lines(preset: str, *sets: str) -> list[str]:
    r = load_recipe(preset, list(sets))
    text = render(export_recipe(r, "verl"), r, preset)
    return [line for line in text.splitlines() if line and not line.startswith("#")]


@pytest.mark.parametrize("preset", RL_PRESETS)
def test_every_preset_applies_to_verls_config(preset):
    cfg, problems = apply(override_lines(preset))
    assert problems == []
    r = load_recipe(preset)
    actor = cfg.actor_rollout_ref.actor
    assert cfg.actor_rollout_ref.rollout.n == r.rollout.group_size
    assert actor.clip_ratio_high == r.loss.clip.eps_high
    assert actor.ppo_epochs == r.optim.mu


def test_the_check_can_fail():
    with pytest.raises(Exception, match="clip_ratio_hi"):
        apply(["actor_rollout_ref.actor.clip_ratio_hi=0.3"])
    _, problems = apply(["actor_rollout_ref.actor.use_kl_loss=0.5"])
    assert problems and "use_kl_loss" in problems[0]


def test_values_carried():
    dr, _ = apply(override_lines("dr_grpo"))
    actor = dr.actor_rollout_ref.actor
    assert actor.loss_agg_mode == "seq-mean-token-sum-norm"
    assert actor.loss_scale_factor == 64  # rlvr's constant L, not verl's padded width
    assert dr.algorithm.norm_adv_by_std_in_grpo is False
    klr, _ = apply(override_lines("grpo_kl_in_reward"))
    assert klr.algorithm.use_kl_in_reward is True and klr.algorithm.kl_ctrl.kl_coef == 0.04
    assert klr.algorithm.kl_penalty == "kl" and klr.actor_rollout_ref.actor.use_kl_loss is False
    grpo, _ = apply(override_lines("grpo"))
    assert grpo.actor_rollout_ref.actor.kl_loss_type == "low_var_kl"
    assert grpo.actor_rollout_ref.actor.ppo_mini_batch_size == 8  # 16 prompts, 2 minibatches
    gspo, _ = apply(override_lines("gspo"))
    assert gspo.actor_rollout_ref.actor.policy_loss.loss_mode == "gspo"
    dapo, _ = apply(override_lines("dapo"))
    assert dapo.algorithm.filter_groups.enable is True
    assert dapo.reward.reward_kwargs.overlong_buffer_cfg.len == 16
    assert dapo.reward.reward_manager.name == "dapo"


def test_warnings_and_strict(cli, tmp_path):
    res = cli("export", "grpo", "--to", "verl", "--out", str(tmp_path / "grpo.verl.txt"))
    assert res.code == 0
    assert "warning: loss.clip.dual_clip:" in res.stderr
    strict = cli("export", "grpo", "--to", "verl", "--strict")
    assert strict.code == 2
    exact = export_recipe(load_recipe("gspo", ["kl.track=false", "reward.truncated_is_incorrect=false"]), "verl")
    assert exact.warnings == []


def test_remedies_carried_or_warned():
    cc, problems = apply(override_lines("experiments/remedies/clip_cov"))
    pl = cc.actor_rollout_ref.actor.policy_loss
    assert problems == [] and pl.loss_mode == "clip_cov" and pl.clip_cov_ratio == 2e-4 and (pl.clip_cov_lb, pl.clip_cov_ub) == (1, 5)
    kc, _ = apply(override_lines("experiments/remedies/kl_cov"))
    pl = kc.actor_rollout_ref.actor.policy_loss
    assert pl.loss_mode == "kl_cov" and pl.kl_cov_ratio == 2e-3 and pl.ppo_kl_coef == 1.0
    sm, _ = apply(override_lines("experiments/mismatch/sequence_mask_tight"))
    assert sm.algorithm.rollout_correction.rollout_is == "sequence"
    assert sm.algorithm.rollout_correction.rollout_is_threshold == 1.05
    warned = export_recipe(load_recipe("experiments/mismatch/sequence_mask_tight"), "verl").warnings
    assert {w.split(":")[0] for w in warned} >= {"rollout.is_correction.mode", "rollout.sample_autocast"}
    for name, field in [("top_entropy", "loss.top_entropy_quantile"), ("passk_adv", "advantage.passk")]:
        assert any(w.startswith(f"{field}:") for w in export_recipe(load_recipe(f"experiments/remedies/{name}"), "verl").warnings)
