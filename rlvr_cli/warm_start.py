"""Build the warm-started built-in models (`builtin:tiny`, `builtin:tiny-countdown`) by SFT.

This module sits above both :mod:`rlvr_cli.models` (which resolves a model name to a cached directory
and never trains) and :mod:`rlvr_cli.train` (whose SFT trainer does the build), so the layers only
point down. The commands call :func:`ensure_built` for the models they are about to load; a build
runs once per recipe version and is guarded by a file lock, so parallel runs build it once.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from rlvr_cli import rundir
from rlvr_cli.console import console
from rlvr_cli.models.builtin import WARM_START_RECIPES, warm_start_lock, warm_start_target


def ensure_built(*refs: str | None) -> None:
    """Build every warm-started built-in model among ``refs`` that is not cached yet (others: no-op)."""
    for ref in refs:
        if ref and ref.startswith("builtin:") and ref.split(":", 1)[1] in WARM_START_RECIPES:
            recipe, target = warm_start_target(ref)
            if (target / "built.json").is_file():
                continue
            with warm_start_lock(ref):
                if not (target / "built.json").is_file():
                    _build(ref, recipe, target)


def _build(ref: str, recipe, target: Path) -> None:
    from rlvr_cli.train.sft import train_sft

    name = ref.split(":", 1)[1]
    console.print(
        f"[bold]Building {ref}[/bold] once: a warm start by SFT (recipe {WARM_START_RECIPES[name]}, "
        f"{recipe.steps} steps); it is cached in {target.parent}",
        highlight=False,
    )
    work = target.with_name(target.name + f".build-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    t0 = time.perf_counter()
    run_dir = train_sft(recipe, work / "run")
    seconds = time.perf_counter() - t0
    final = rundir.checkpoint_path(run_dir, recipe.steps)
    if not (final / "config.json").is_file():
        raise RuntimeError(f"warm start of {ref} left no final checkpoint in {final}")
    model_dir = work / "model"
    shutil.copytree(final, model_dir, ignore=shutil.ignore_patterns("trainer_state.pt"))
    evals = rundir.eval_files(run_dir)
    last_eval = json.loads(evals[-1][1].read_text()) if evals else {}
    info = {
        "name": ref,
        "recipe": WARM_START_RECIPES[name],
        "steps": recipe.steps,
        "build_seconds": round(seconds, 1),
        "pass_at_k": last_eval.get("pass_at_k"),
        "len_mean": last_eval.get("len_mean"),
    }
    (model_dir / "built.json").write_text(json.dumps(info, indent=2) + "\n")
    shutil.rmtree(target, ignore_errors=True)
    os.replace(model_dir, target)
    shutil.rmtree(work, ignore_errors=True)
    pk = info["pass_at_k"] or {}
    console.print(
        f"{ref} ready in {seconds:.0f}s: pass@1 {pk.get('1', float('nan')):.3f}, "
        f"pass@{max(pk, key=int) if pk else '?'} {pk[max(pk, key=int)] if pk else float('nan'):.3f}",
        highlight=False,
    )
