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
from rlvr_cli.bridges.export_verl import ACTOR  # noqa: E402
from rlvr_cli.cli.export import render  # noqa: E402
from rlvr_cli.recipe.load import list_shipped, load_recipe  # noqa: E402

VERL_YAML = Path(__file__).resolve().parents[1] / "fixtures" / "verl_0.9.1_ppo_trainer.yaml"
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
    o = r.loss.objective  # the new objectives carry their own upper bound in clip_ratio_high
    high = {"cispo": getattr(o, "eps_high", None), "gmpo": getattr(o, "eps_high", None)}.get(o.type, r.loss.clip.eps_high)
    assert actor.clip_ratio_high == high
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


REMEDY_RECIPES = [n for n in RL_PRESETS if n.startswith(("experiments/remedies/", "experiments/mismatch/"))]


@pytest.mark.parametrize("preset", REMEDY_RECIPES)
def test_remedy_recipes_map_to_verls_config(preset):
    """Every 2025-remedy field is carried by verl's own key (in struct mode) or named in a warning."""
    cfg, problems = apply(override_lines(preset))
    assert problems == []
    r = load_recipe(preset)
    fields = {w.split(":", 1)[0] for w in export_recipe(r, "verl").warnings}
    pl, rc = cfg.actor_rollout_ref.actor.policy_loss, cfg.algorithm.rollout_correction
    cov = r.loss.cov_penalty
    assert pl.loss_mode == (cov.type if cov is not None else "vanilla")
    assert ("loss.cov_penalty" in fields) == (cov is not None)
    assert ("loss.top_entropy_quantile" in fields) == (r.loss.top_entropy_quantile is not None)
    assert ("advantage.passk" in fields) == (r.advantage.passk is not None)
    assert cfg.actor_rollout_ref.rollout.dtype == (r.rollout.sample_autocast if r.rollout.sample_autocast != "none" else "bfloat16")
    mode = r.rollout.is_correction.mode
    assert (rc.rollout_is is None) == (not mode.endswith("truncate"))
    assert (rc.rollout_rs is None) == (not mode.endswith("mask"))


def test_remedy_values_by_hand():
    clip_cov, _ = apply(override_lines("experiments/remedies/clip_cov"))
    pl = clip_cov.actor_rollout_ref.actor.policy_loss
    assert (pl.loss_mode, pl.clip_cov_ratio, pl.clip_cov_lb, pl.clip_cov_ub) == ("clip_cov", 2e-4, 1.0, 5.0)
    kl_cov, _ = apply(override_lines("experiments/remedies/kl_cov"))
    pl = kl_cov.actor_rollout_ref.actor.policy_loss
    assert (pl.loss_mode, pl.kl_cov_ratio, pl.ppo_kl_coef) == ("kl_cov", 2e-3, 1.0)  # not verl's 0.1
    kl_w = export_recipe(load_recipe("experiments/remedies/kl_cov"), "verl").warnings
    assert any(w.startswith("loss.cov_penalty:") and "no PPO clip" in w for w in kl_w)
    assert not any(w.startswith("loss.clip.dual_clip") for w in kl_w)  # verl's kl_cov has no dual clip either
    gspo_cov = export_recipe(load_recipe("gspo", ["loss.cov_penalty.type=kl_cov"]), "verl")
    assert gspo_cov.settings[f"{ACTOR}.policy_loss.loss_mode"] == "gspo" and any(w.startswith("loss.cov_penalty:") for w in gspo_cov.warnings)

    tt, _ = apply(override_lines("experiments/mismatch/token_truncate_tight"))
    rc = tt.algorithm.rollout_correction
    assert (rc.rollout_is, rc.rollout_is_threshold, rc.rollout_rs) == ("token", 1.02, None)
    assert tt.actor_rollout_ref.rollout.calculate_log_probs is True and tt.actor_rollout_ref.rollout.dtype == "bfloat16"
    # masking = rejection sampling on log(pi_rollout / pi_old) within [log lower, log upper]: rlvr's
    # w = pi_old / pi_rollout in [0, 1.05] is pi_rollout / pi_old in [1/1.05, inf] (verl: float("inf")); a string in Hydra
    sm, _ = apply(override_lines("experiments/mismatch/sequence_mask_tight"))
    rc = sm.algorithm.rollout_correction
    assert (rc.rollout_is, rc.rollout_rs, rc.rollout_rs_threshold) == (None, "seq_sum_k1", "0.9523809524_inf")
    low, _ = apply(override_lines("experiments/mismatch/token_mask", "rollout.is_correction.cap_low=0.8"))
    rc = low.algorithm.rollout_correction
    assert (rc.rollout_rs, rc.rollout_rs_threshold) == ("token_k1", "0.5_1.25")
    trunc_low = export_recipe(load_recipe("experiments/mismatch/token_truncate", ["rollout.is_correction.cap_low=0.5"]), "verl")
    assert any(w.startswith("rollout.is_correction.cap_low:") for w in trunc_low.warnings)
    none, _ = apply(override_lines("grpo"))
    assert none.algorithm.rollout_correction.rollout_is is None and none.algorithm.rollout_correction.rollout_rs is None

    pk1 = export_recipe(load_recipe("experiments/remedies/pkpo_k4", ["advantage.passk.k=1"]), "verl")
    assert not any(w.startswith("advantage.passk") for w in pk1.warnings)  # PKPO at k = 1 is the plain reward


def test_strict_exits_2_on_a_remedy(cli):
    res = cli("export", "experiments/remedies/top_entropy", "--to", "verl", "--strict")
    assert res.code == 2 and "loss.top_entropy_quantile" in res.stderr


def test_out_that_cannot_be_written_is_exit_2(cli, tmp_path):
    (tmp_path / "a_file").write_text("x")
    for out in (tmp_path, tmp_path / "a_file" / "dapo.verl.txt"):
        res = cli("export", "dapo", "--to", "verl", "--out", str(out))
        assert res.code == 2, res.stderr
        assert f"--out {out}: cannot write" in res.stderr and "internal error" not in res.stderr


def _verl_seq_sum_k1_keeps(log_ratios, lower: float, upper: float) -> bool:
    """verl's seq_sum_k1 decision as its rollout_corr_helper states it (read at verl b178a3c, not imported):
    k1_t = -clamp(log pi_old/pi_rollout, -20, 20), kept when log(lower) <= sum_t k1_t <= log(upper)."""
    import math

    total = sum(-max(-20.0, min(20.0, d)) for d in log_ratios)
    return math.log(lower) <= total <= math.log(upper)


def test_sequence_mask_export_never_binds_without_cap_low_and_says_where_it_differs():
    """Issue 50: the export's "no bound" was 1e9, which seq_sum_k1 reaches (a sum of clamped tokens passes
    log 1e9 = 20.7): a response with pi_old / pi_rollout < 1e-9 was rejected. And verl clamps per token,
    rlvr the sum: d = [+25, -22] (sum 3, w = e^3 = 20 > cap 5) is masked by rlvr, kept by verl (20 - 20 = 0)."""
    import torch

    from rlvr_cli.algo.is_correction import is_correction_weights

    exported = export_recipe(load_recipe("experiments/mismatch/sequence_mask", ["rollout.is_correction.cap=5"]), "verl")
    lower, upper = exported.settings["algorithm.rollout_correction.rollout_rs_threshold"].split("_")
    assert (float(lower), float(upper)) == (0.2, float("inf"))
    assert any("seq_sum_k1 clamps each token's log(pi_old / pi_rollout) to +-20 before summing" in w
               for w in exported.warnings)

    def rlvr_keeps(d):
        w = is_correction_weights(torch.tensor([d], dtype=torch.float64), torch.zeros(1, len(d), dtype=torch.float64),
                                  torch.ones(1, len(d)), "sequence_mask", cap=5.0)
        return bool(w.weights[0, 0] > 0)

    far_below = [-15.0, -15.0]  # w = e^-30 < 1e-9: no lower cap, so rlvr keeps it; so does verl at the exported "inf"
    assert rlvr_keeps(far_below) and _verl_seq_sum_k1_keeps(far_below, 0.2, float(upper))
    assert not _verl_seq_sum_k1_keeps(far_below, 0.2, 1e9)  # the old export's bound rejected it
    one_far_token = [25.0, -22.0]  # the documented difference: per-token clamp vs the sum
    assert not rlvr_keeps(one_far_token) and _verl_seq_sum_k1_keeps(one_far_token, 0.2, float(upper))
    within = [1.0, 0.2]  # every |d| <= 20: the two agree (w = e^1.2 = 3.3 <= 5 kept; e^1.7 = 5.5 masked)
    assert rlvr_keeps(within) and _verl_seq_sum_k1_keeps(within, 0.2, float(upper))
    assert not rlvr_keeps([1.5, 0.2]) and not _verl_seq_sum_k1_keeps([1.5, 0.2], 0.2, float(upper))
