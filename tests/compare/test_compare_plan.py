"""`rlvr compare --plan TARGET` (rlvr_cli/compare/plan.py): seeds or prompts for a target MDE, and their cost."""

from __future__ import annotations

import numpy as np
import pytest

from rlvr_cli.compare import crossed, plan, simulate
from rlvr_cli.compare.against import crossed_json as as_json


def _pilot(seeds: int):
    a, b, _ = simulate.draw(simulate.World(prompts=64, seeds=seeds, seed_sd=0.2), -0.2, np.random.default_rng(5))
    return as_json(crossed.crossed_test(a, b, paired_seeds=True, n=16), 0.95, 0.05)


def test_the_plan_reaches_its_target_and_prices_it():
    t = _pilot(3)
    p = plan.plan_arm(t, t["mde"] / 2, [60.0, 80.0], [2.0], 5)
    comp = plan.components_from_json(t["components"])
    assert p["seeds_per_arm"] > 3
    assert crossed.predicted(comp, 64, p["seeds_per_arm"], 16, 0.05).mde <= t["mde"] / 2
    assert crossed.predicted(comp, 64, p["seeds_per_arm"] - 1, 16, 0.05).mde > t["mde"] / 2  # the fewest
    assert p["cpu_seconds_seeds"] == pytest.approx(70.0 * p["seeds_per_arm"] * 2)


def test_a_looser_target_needs_no_more_seeds():
    t = _pilot(3)
    tight = plan.plan_arm(t, 0.03, [60.0], [], 5)["seeds_per_arm"]
    loose = plan.plan_arm(t, 0.08, [60.0], [], 5)["seeds_per_arm"]
    assert loose is not None and (tight is None or loose <= tight)


def test_one_seed_plans_no_seeds_and_says_why():
    t = _pilot(1)
    p = plan.plan_arm(t, 0.01, [60.0], [], 5)
    assert p["seeds_per_arm"] is None and "one seed" in p["note"]


def test_a_bad_target_is_refused(tmp_path):
    from rlvr_cli.compare import compare_runs
    from rlvr_cli.errors import UserError

    with pytest.raises(UserError, match="--plan 2"):
        compare_runs([str(tmp_path)], tmp_path / "out", plan_target=2.0)
