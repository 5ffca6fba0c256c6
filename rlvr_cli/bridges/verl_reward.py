"""rlvr's verifiers as a verl custom reward function.

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info)`` per response
(``reward.custom_reward_function.path=<this file> reward.custom_reward_function.name=compute_score``).
``data_source`` names the verifier (``integer``, ``math``, ``countdown``, ``code``, or a built-in task
name: ``arithmetic`` -> integer, ``countdown``); ``extra_info`` may carry ``marker``, the answer marker
(default ``#`` for the built-in task names, none otherwise: the answer is then extracted from
``\boxed{}``, ``####`` or the last number). Checks that are not bounded in-process (math with sympy, code) run in rlvr's
verifier worker pool under its hard time limit. Returns ``{"score": 0/1, "acc": 0/1, "outcome": ...}``,
so ``algorithm.filter_groups.metric=acc`` (DAPO dynamic sampling) can read it.
"""

from __future__ import annotations

from rlvr_cli.recipe.schema import RewardSpec
from rlvr_cli.rewards.pool import Check, VerifierPool, run_checks
from rlvr_cli.rewards.registry import options_for

TASK_VERIFIERS = {"arithmetic": "integer", "countdown": "countdown"}
_POOL: VerifierPool | None = None
_SPEC = RewardSpec()


def _pool() -> VerifierPool:
    global _POOL
    if _POOL is None:
        _POOL = VerifierPool(_SPEC.workers, _SPEC.worker_memory_mb)
    return _POOL


class _LazyPool:
    def run(self, checks):
        return _pool().run(checks)


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **_) -> dict:
    info = extra_info or {}
    name = TASK_VERIFIERS.get(data_source, data_source)
    marker = info.get("marker", "#" if data_source in TASK_VERIFIERS else "")
    options = {"marker": marker, "extract": tuple(_SPEC.extract), "rel_tol": _SPEC.math_rel_tol}
    check = Check(name, solution_str, str(ground_truth), options_for(name, options), _SPEC.timeout_s)
    out = run_checks([check], _LazyPool())[0]
    ok = 1.0 if out.outcome == "correct" else 0.0
    return {"score": ok, "acc": ok, "outcome": out.outcome}
