"""Runs whose first steps another planned run computes, and how a run starts from them.

Two cases, found among every run of one `rlvr sweep` invocation (all its specs):

- A run that is another trained further (the same recipe and seed apart from `steps` and name) starts
  from the shorter run's last step: results/entropy's 150-step collapse arm is results/remedies' 100-step
  baseline run on.
- A run that resets its reference every N steps (ProRL) starts from step N of the same run without resets,
  which saves a checkpoint there (no reset falls inside the first N steps; the one at N is made on
  resuming): results/prorl's reset arm is its no-reset arm up to step 100.

The run is then the other run's finished directory, without the checkpoints after that step, continued
with `rlvr train --resume`, which checks the same conditions and refuses otherwise
(``train/session.py::_continuation``). Used only where the run's evaluations are the same (that step is
one of its eval steps) and, where the step counts differ, the lr schedule is constant. `rlvr sweep
--no-continue` trains every run from step 0 instead.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import NamedTuple

from rlvr_cli import run_files
from rlvr_cli.recipe.schema import Recipe
from rlvr_cli.sweep.spec import PlannedRun

COPIED = "copied"
"""run.json's status of a copy not yet continued: the next sweep resumes it rather than skip it."""


class Start(NamedTuple):
    """Where a planned run starts: step ``at`` of run ``src``, whose checkpoints ``later`` are left out."""

    src: Path
    at: int
    later: tuple[str, ...] = ()


def _keys(recipe: Recipe) -> tuple[str, str]:
    """What a run computes apart from its length and its name: (key, the key without the reset cadence)."""
    d = recipe.model_dump(mode="json")
    for k in ("steps", "name", "description", "output_dir"):
        d.pop(k, None)
    key = json.dumps(d, sort_keys=True)
    d["kl"] = {**d["kl"], "ref_reset_every": None}
    return key, json.dumps(d, sort_keys=True)


def checkpoint_steps(recipe: Recipe) -> list[int]:
    """The steps a run of ``recipe`` saves a checkpoint at (its last step always)."""
    every = recipe.checkpoint.every
    return sorted({*(range(every, recipe.steps + 1, every) if every > 0 else ()), recipe.steps})


def find_continuations(runs: list[PlannedRun]) -> dict[Path, Start]:
    """Run directory -> where it starts (:class:`Start`), for every run that can start from another."""
    planned = {r.dir: (*_keys(r.recipe), r.recipe) for r in runs}
    out: dict[Path, Start] = {}
    for run, (key, base, r) in planned.items():
        every, steps = r.kl.ref_reset_every, r.steps
        starts = []  # (the step it starts from, the source)
        for other, (k, kb, ro) in planned.items():
            if other == run:
                continue
            if k == key and (ro.steps, str(other)) < (steps, str(run)):
                starts.append((ro.steps, other))
            elif (every and kb == base and k != key and ro.kl.ref_reset_every is None and every < steps
                  and every in checkpoint_steps(ro)):
                starts.append((every, other))
        starts = [(at, o) for at, o in starts
                  if (at == steps or (r.eval.every > 0 and at % r.eval.every == 0))
                  and (planned[o][2].steps == steps or r.optim.schedule == "constant")]
        if starts:
            at, other = max(starts, key=lambda x: (x[0], str(x[1])))
            later = tuple(f"step_{c}" for c in checkpoint_steps(planned[other][2]) if c > at)
            out[run] = Start(other, at, later)
    return out


def copy_command(start: Start, dst: Path) -> str:
    """The shell equivalent of :func:`copy_run`, for the record."""
    import shlex

    from rlvr_cli.io import display_path

    cmd = f"cp -r {shlex.quote(display_path(start.src))} {shlex.quote(display_path(dst))}"
    if start.later:
        cmd += " && rm -r " + " ".join(shlex.quote(display_path(dst / run_files.CHECKPOINTS_DIR / c)) for c in start.later)
    return cmd


def copy_run(src: Path, dst: Path, at: int | None = None) -> None:
    """``src``'s run directory as ``dst`` (without its lock), atomically: a temporary sibling, then renamed.
    Its status is `copied` until the continued run starts. With ``at``, the checkpoints after step ``at``
    are left out (`--resume` then forgets the steps logged after it)."""
    tmp = dst.parent / f".tmp-{dst.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    dst.parent.mkdir(parents=True, exist_ok=True)
    ckpts = src / run_files.CHECKPOINTS_DIR

    def later(d: str, names: list[str]) -> list[str]:
        drop = [run_files.LOCK_NAME]
        if at is not None and Path(d) == ckpts:
            drop += [n for n in names if n.startswith("step_") and n[5:].isdigit() and int(n[5:]) > at]
        return drop

    shutil.copytree(src, tmp, ignore=later)
    status = json.loads((tmp / run_files.STATUS).read_text(encoding="utf-8"))
    (tmp / run_files.STATUS).write_text(json.dumps({**status, "status": COPIED, "copied_from": str(src),
                                                 "copied_at_step": at}, indent=2), encoding="utf-8")
    os.rename(tmp, dst)
