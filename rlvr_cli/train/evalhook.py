"""Evaluation during training: the same function `rlvr eval` uses, on the recipe's eval settings."""

from __future__ import annotations

from rlvr_cli import dist
from rlvr_cli.evaluation import cache
from rlvr_cli.evaluation.core import evaluate_policy
from rlvr_cli.evaluation.decoding import environment_turns
from rlvr_cli.evaluation.settings import EvalSettings


def eval_and_record(session, task, scorer, step: int) -> dict:
    """Evaluate the current policy and write eval/step_N.json (step 0 = the initial model).

    The initial model's record comes from the eval cache when the same weights, prompts and settings
    were evaluated before by this code (``evaluation/cache.py``; one process only), marked
    ``reused: true``; every other record is computed here (``reused: false``).
    """
    spec = session.recipe.eval
    key = _initial_key(session, task) if step == 0 else None
    result = cache.load(key) if key else None
    reused = result is not None
    if not reused:
        with session.full_params():
            result = _evaluate(session, task, scorer, spec)
        if key:
            cache.store(key, result)
    record = {"step": step, "model": session.recipe.model.name, "task": task.name, "budget": None,
              "reused": reused, **result}
    session.run.write_eval(step, record)
    return record


def _initial_key(session, task) -> str | None:
    if not cache.enabled() or dist.world()[1] > 1 or session.recipe.environment is not None:
        return None  # (the cache keys single-turn evaluations only)
    r = session.recipe
    try:
        return cache.initial_eval_key(session.model, session.tokenizer, task, r.task, r.reward, _settings(r.eval),
                                      session.autocast_dtype, session.device)
    except Exception:  # noqa: BLE001 (a model or tokenizer the key cannot read: evaluate it, uncached)
        return None


def _settings(spec) -> dict:
    """The eval settings ``evaluate_policy`` receives (also what the cache key hashes of ``eval.*``)."""
    return {"n": spec.n, "num_prompts": spec.num_prompts, "temperature": spec.temperature, "top_p": spec.top_p,
            "max_new_tokens": spec.max_new_tokens, "seed": spec.seed, "pass_at_k": spec.pass_at_k,
            "maj_at_k": spec.maj_at_k}


def _evaluate(session, task, scorer, spec) -> dict:
    r = session.recipe  # a multi-turn recipe is evaluated multi-turn, with its environment
    turns = environment_turns(r.environment, r.model.name, session.tokenizer, task, r.reward.extract)
    return evaluate_policy(session.model, session.tokenizer, task, scorer, EvalSettings(**_settings(spec), turns=turns),
                           autocast_dtype=session.autocast_dtype)
