"""A plan before the sweep: from pilot runs (or committed records) of a control and an arm, how many seeds
per arm, or how many held-out prompts, bring the minimum detectable effect down to a target, and what
that costs in CPU time.

The variance components come from the pilot's primary test (:mod:`.crossed`); the budgets are searched
with :func:`.crossed.seeds_for` and :func:`.crossed.prompts_for` at the same per-arm level (0.05 / m over
the m arms of the comparison) and 80% power. Cost: the mean wall time of the pilot's runs times the
runs a plan needs (seeds per arm x 2 arms); more prompts cost evaluation time only, priced from the eval
files' ``sample_s`` (seconds to sample the held-out prompts at one eval step) scaled by the prompt ratio.
The plan is an estimate from few seeds: the seed component is itself uncertain (2 df with 3 seeds).
"""

from __future__ import annotations

import math

from rlvr_cli.compare import crossed


def plan_arm(test: dict, target: float, run_seconds: list[float], eval_seconds: list[float],
             evals_per_run: int) -> dict:
    """{"target", "mde_now", "seeds_per_arm", "prompts", "cpu_seconds_seeds", "cpu_seconds_prompts", "n",
    "mde_at_n", "note"} for one arm's summary TEST (:func:`rlvr_cli.compare.against.crossed_json`);
    ``mde_at_n`` is the model's MDE at today's seeds and prompts with n, 2n and 4n samples per prompt (keyed
    by n; at n it can differ from the test's own MDE, which uses this draw's mean squares)."""
    out = {"target": target, "mde_now": test.get("mde"), "seeds_per_arm": None, "prompts": None,
           "cpu_seconds_seeds": None, "cpu_seconds_prompts": None, "n": None, "mde_at_n": {}, "note": None}
    if test.get("p") is None or test.get("mde") is None:
        out["note"] = test.get("reason") or "no test: nothing to plan from"
        return out
    comp = components_from_json(test["components"])
    alpha, p_now = test["alpha_per_arm"], test["prompts"]
    seeds_now = max(test["seeds"])
    out["seeds_per_arm"] = crossed.seeds_for(comp, target, p_now, comp.n, alpha, start=2)
    out["prompts"] = crossed.prompts_for(comp, target, seeds_now if comp.design != "unpaired seeds"
                                         else tuple(test["seeds"]), comp.n, alpha, start=2)
    if comp.n:  # more samples per prompt shrink only the binomial part of the cell variance
        out["n"] = comp.n
        seeds_at = seeds_now if comp.design != "unpaired seeds" else tuple(test["seeds"])
        out["mde_at_n"] = {str(k * comp.n): crossed.predicted(comp, p_now, seeds_at, k * comp.n, alpha).mde
                           for k in (1, 2, 4)}
    run_s = _mean(run_seconds)
    if out["seeds_per_arm"] and run_s is not None:
        out["cpu_seconds_seeds"] = run_s * out["seeds_per_arm"] * 2
    eval_s = _mean(eval_seconds)
    if out["prompts"] and run_s is not None and eval_s is not None:
        extra = eval_s * evals_per_run * (out["prompts"] / p_now - 1)
        out["cpu_seconds_prompts"] = (run_s + max(0.0, extra)) * seeds_now * 2
    if comp.design == "one seed":
        out["note"] = "one seed per arm: the seed part is unseen; train 2 or more seeds to plan seeds"
    return out


def components_from_json(c: dict) -> crossed.Components:
    pair = lambda x: tuple(x) if isinstance(x, list) else x  # noqa: E731
    return crossed.Components(c["design"], c["prompt"], pair(c["seed"]), pair(c["cell"]), pair(c["binomial"]),
                              c["n"])


def _mean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    return sum(xs) / len(xs) if xs else None
