"""The staleness experiment's arms (recipes/experiments/staleness/, results/staleness/sweep.yaml): each is the
control with its lag and at most one correction, and every one of them trains (a 2-step smoke run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.sweep.spec import load_plan
from rlvr_cli.train.rl import train_rl
from rlvr_cli.train.run_writer import RunDir

from conftest import tiny_run  # tests/conftest.py

ROOT = Path(__file__).resolve().parents[2]
SMOKE = tiny_run("steps=2", "rollout.prompts_per_step=2", "rollout.group_size=4", "rollout.max_new_tokens=12")


def arms() -> dict:
    plan = load_plan(ROOT / "results" / "staleness" / "sweep.yaml")
    assert plan.arms[0] == "sync" and len(plan.arms) >= 6
    return {a: load_recipe(str(ROOT / "recipes" / "experiments" / "staleness" / f"{a}.yaml")) for a in plan.arms}


def flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        out.update(flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


ALLOWED = ("rollout.staleness.max", "rollout.old_logprobs", "rollout.is_correction.", "off_policy.", "name",
           "description")


def test_each_arm_is_the_control_with_its_lag_and_one_correction():
    recipes = arms()
    control = flat(recipes["sync"].model_dump(mode="json"))
    for name, r in recipes.items():
        assert r.rollout.staleness.max == (0 if name == "sync" else int(name.split("_")[0][3:])), name
        got = flat(r.model_dump(mode="json"))
        changed = {k for k in got.keys() | control.keys() if got.get(k) != control.get(k)}
        assert all(k.startswith(ALLOWED) for k in changed), (name, changed)
        if name.endswith("_decoupled"):
            assert r.rollout.old_logprobs == "recompute" and r.rollout.is_correction.mode == "token_mask"


def test_every_arm_trains_two_steps(tiny_base, tmp_path):
    for name in ("lag2", "lag2_decoupled", "lag4_m2po", "lag8_behaviour_kl"):
        r = load_recipe(str(ROOT / "recipes" / "experiments" / "staleness" / f"{name}.yaml"),
                        [f"model.name={tiny_base}", *SMOKE])
        train_rl(r, tmp_path / name)
        assert [row["policy_lag"] for row in RunDir(tmp_path / name).read_metrics()] == [0, 1]
