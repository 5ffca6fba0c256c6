"""`rlvr export` names the staleness knob and the off-policy corrections (docs/async.md): decoupled PPO's
weights are carried (TRL's vllm_importance_sampling_*, verl's rollout_correction), the rest is a warning."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlvr_cli.bridges import export_recipe
from rlvr_cli.recipe.load import load_recipe

ARMS = sorted((Path(__file__).resolve().parents[2] / "recipes" / "experiments" / "staleness").glob("*.yaml"))


def named(r, target) -> list[str]:
    return [w.split(": ", 1)[0] for w in export_recipe(r, target).warnings]


@pytest.mark.parametrize("target", ["trl", "verl"])
def test_staleness_and_each_correction_without_a_counterpart_is_a_warning(target):
    r = load_recipe("grpo", ["rollout.staleness.max=2", "off_policy.m2po={}", "off_policy.behaviour_kl={coef: 0.1}",
                             "rollout.top_k=50"])
    warned = named(r, target)
    for field in ("rollout.staleness", "off_policy.m2po", "off_policy.behaviour_kl", "rollout.top_k"):
        assert field in warned, (target, field)
    assert not {"rollout.staleness", "off_policy.m2po", "off_policy.behaviour_kl", "rollout.top_k",
                "rollout.top_p"} & set(named(load_recipe("grpo"), target))
    assert "max_staleness=2" in " ".join(export_recipe(r, "trl").warnings)


def test_decoupled_ppo_exports_its_weights():
    r = load_recipe("experiments/staleness/lag2_decoupled")
    trl = export_recipe(r, "trl").settings
    assert trl["vllm_importance_sampling_mode"] == "token_mask" and trl["vllm_importance_sampling_clip_max"] == 5.0
    verl = export_recipe(r, "verl").settings
    assert verl["algorithm.rollout_correction.rollout_rs"] == "token_k1"


@pytest.mark.parametrize("arm", ARMS, ids=lambda p: p.stem)
def test_every_staleness_arm_exports_to_both_targets(arm):
    r = load_recipe(str(arm))
    for target in ("trl", "verl"):
        warned = named(r, target)
        assert ("rollout.staleness" in warned) == (r.rollout.staleness.max > 0)
