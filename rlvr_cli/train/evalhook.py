"""Evaluation during training: the same function `rlvr eval` uses, on the recipe's eval settings."""

from __future__ import annotations

from rlvr_cli.evaluation.core import evaluate_policy


def eval_and_record(session, task, scorer, step: int) -> dict:
    """Evaluate the current policy and write eval/step_N.json (step 0 = the initial model)."""
    spec = session.recipe.eval
    with session.full_params():
        result = _evaluate(session, task, scorer, spec)
    record = {"step": step, "model": session.recipe.model.name, "task": task.name, "budget": None, **result}
    session.run.write_eval(step, record)
    return record


def _evaluate(session, task, scorer, spec) -> dict:
    return evaluate_policy(
        session.model,
        session.tokenizer,
        task,
        scorer,
        n=spec.n,
        num_prompts=spec.num_prompts,
        temperature=spec.temperature,
        top_p=spec.top_p,
        max_new_tokens=spec.max_new_tokens,
        seed=spec.seed,
        pass_at_k=spec.pass_at_k,
        maj_at_k=spec.maj_at_k,
        autocast_dtype=session.autocast_dtype,
    )
