"""Evaluate models and run directories: which weights, with which scorer, written where.

A run directory is evaluated as its trainer evaluated it (``train/evalhook.py``): the base model
(``recipe.model.name``) as step 0 and each chosen checkpoint, on the recipe's task, with the reward
spec that scored its evaluations (for correctness: the true verifier's extraction options), on the
recipe's device and dtype, and with the same record header ``{"step", "model", "task", "budget"}``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from rlvr_cli import run_files
from rlvr_cli.errors import UserError
from rlvr_cli.evaluation.decoding import environment_turns
from rlvr_cli.evaluation.settings import EvalSettings
from rlvr_cli.rewards.extract import DEFAULT_EXTRACT


@dataclass(frozen=True)
class Target:
    """One set of weights to evaluate."""

    ref: str
    """A MODEL reference :func:`rlvr_cli.models.load_model` accepts."""
    step: int | None
    """Training step (0 = a run's base model); None for a model outside a run."""


def run_root(path: Path) -> Path | None:
    """The run directory ``path`` is, or whose ``checkpoints/step_N`` it is; None otherwise."""
    if run_files.is_run_dir(path):
        return path
    if path.parent.name == run_files.CHECKPOINTS_DIR and (path.parent.parent / run_files.RECIPE).is_file():
        return path.parent.parent
    return None


def load_run_recipe(root: Path):
    """The fully resolved recipe a run saved (its protocol, base model and task)."""
    from rlvr_cli.recipe.load import load_recipe

    path = root / run_files.RECIPE
    if not path.is_file():
        raise UserError(f"{root}: run directory has no recipe.yaml, so its base model and eval settings are unknown")
    return load_recipe(path)


def reward_spec_for(recipe):
    """The reward spec the trainer scored evaluations with: the recipe's for RL, the default for SFT.

    Mirrors ``train/rl.py`` and ``train/sft.py``: correctness depends on its extraction options.
    """
    from rlvr_cli.recipe.schema import RewardSpec

    return recipe.reward if recipe.algorithm == "rl" else RewardSpec()


def select_steps(root: Path, base_model: str, steps: str | None) -> list[Target]:
    """Step 0 (the base model) and the checkpoints ``steps`` names: `last` (default), `all` or `N,M`.

    `0` alone evaluates only the base model. Raises UserError naming ``--steps`` for a step without a
    checkpoint, a run without checkpoints, or text that is none of these.
    """
    found = dict(run_files.list_checkpoints(root))
    text = (steps or "last").strip()
    if text in ("last", "all"):
        if not found:
            raise UserError(
                f"--steps {text}: {root} has no complete checkpoint (--steps 0 evaluates only the base model)"
            )
        chosen = [max(found)] if text == "last" else sorted(found)
    else:
        try:
            chosen = sorted({int(x) for x in text.split(",") if x.strip()})
        except ValueError:
            chosen = []
        if not chosen or min(chosen) < 0:
            raise UserError(
                f"--steps {text}: expected last, all, or comma-separated steps such as 50,100 (0 = base only)"
            )
        missing = [s for s in chosen if s and s not in found]
        if missing:
            have = ", ".join(map(str, sorted(found))) or "none"
            raise UserError(
                f"--steps {text}: no checkpoint at step {','.join(map(str, missing))} in {root} (available: {have})"
            )
    return [Target(base_model, 0)] + [Target(str(found[s]), s) for s in chosen if s]


def eval_dir(root: Path, label: str | None) -> Path:
    """``RUN/eval`` for the run's own protocol, ``RUN/eval/LABEL`` for any other."""
    return root / run_files.EVAL_DIR / label if label else root / run_files.EVAL_DIR


@dataclass(frozen=True)
class AsEvaluated:
    """How a run's own evaluations were made, so ``rlvr eval`` repeats them (defaults: a model outside a run)."""

    reward_spec: object
    """The reward spec that scored them (:func:`reward_spec_for`; ``RewardSpec()`` outside a run)."""
    scorer_seed: int = 0
    model_name: str | None = None
    """The run's base model, named in every record's header in place of the weights' path."""
    device: str = "auto"
    dtype: str = "auto"
    environment: object = None
    """The run's ``environment:`` (a multi-turn run is evaluated multi-turn, with its tool); None: single-turn."""


def evaluate_targets(
    targets: list[Target],
    task,
    settings: EvalSettings,
    how: AsEvaluated,
    *,
    on_progress: Callable[[int], None] | None = None,
    on_record: Callable[[dict], None] | None = None,
) -> list[dict]:
    """One eval record per target, in order, with the trainer's header (``how.model_name`` = the run's base).

    Adds ``weights`` (the directory loaded), ``source: "rlvr eval"`` and ``reused: false`` (always computed;
    only the trainer's initial evaluation is cached) after the header;
    ``on_record(record)`` is called as each one is done (to write it before the next model loads).
    """
    from rlvr_cli.evaluation.core import evaluate_policy
    from rlvr_cli.models import load_model, resolve_device, weights_and_autocast
    from rlvr_cli.rewards import Scorer

    dev = resolve_device(how.device)
    _, autocast = weights_and_autocast(how.dtype, dev)
    records = []
    with Scorer(how.reward_spec, task, seed=how.scorer_seed) as scorer:
        for t in targets:
            model, tokenizer, resolved = load_model(t.ref, dev, how.dtype)
            step = t.step if t.step is not None else resolved.step
            turns = environment_turns(how.environment, how.model_name or t.ref, tokenizer, task,
                                      getattr(how.reward_spec, "extract", DEFAULT_EXTRACT))
            result = evaluate_policy(model, tokenizer, task, scorer, replace(settings, turns=turns),
                                     autocast_dtype=autocast, on_progress=on_progress)
            header = {"step": step, "model": how.model_name or t.ref, "task": task.name, "budget": settings.budget}
            records.append({**header, "weights": resolved.path, "source": "rlvr eval", "reused": False, **result})
            if on_record is not None:
                on_record(records[-1])
            del model
    return records


def responses_per_target(task, settings: EvalSettings) -> int:
    """Responses one target's evaluation draws (the progress bar's unit)."""
    prompts = min(settings.num_prompts, len(task.eval_problems()))
    return prompts * (settings.n + (1 if settings.greedy else 0))
