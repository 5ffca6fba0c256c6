"""What each planned run's directory already holds, and so what the sweep does with it.

- ``new``: no run there yet: train it.
- ``finished``: trained with this recipe to its steps: skip it.
- ``extend``: finished with fewer steps than the spec now asks: continue it with `--resume` (the
  trainer allows that only where the longer run computes the same first steps, and refuses otherwise).
- ``resume``: started and not finished (interrupted, failed, killed), or a copy of another run to be
  continued (sweep/continuation.py): continue it with `--resume`.

A run directory whose saved recipe differs from the newly resolved one in anything that changes what
is computed is a conflict: the sweep refuses before anything runs, naming the arm, rather than mix two
recipes under one name. So is a run's path that `rlvr train` would refuse once the sweep got to it: a
file there, a directory of other files and no run, a link or special file among the run's files.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from rlvr_cli import run_files
from rlvr_cli.errors import UserError
from rlvr_cli.sweep.spec import Plan, PlannedRun

IGNORED = ("name", "description", "distributed")
"""Fields a run may change when resumed (the trainer's own rule: they change no computed number)."""
IGNORED_WHEN_FINISHED = ("threads", "output_dir")
"""Fields that cannot change a finished run: nothing more is computed for it."""


@dataclass
class OnDisk:
    status: str | None
    """run.json's status (running, finished, failed, interrupted, ...), None without a run.json."""
    step: int
    """The last step in metrics.jsonl (0 when none)."""
    recipe: dict | None
    """The saved recipe.yaml; None when there is none (no run started there)."""
    error: str | None
    """run.json's error message, if any."""
    reward: float | None = None
    """The last logged step's mean reward (metrics.jsonl's ``reward_mean``), None when not a number."""


def read_run(run_dir: Path, with_recipe: bool = True) -> OnDisk:
    """Read the trainer's run-directory files through :mod:`rlvr_cli.run_files` (the contract that names
    them): status, last logged step and saved recipe. A damaged file reads as absent; an unreadable
    saved recipe reads as ``{}`` (a run is there, its recipe unknown)."""
    status = run_files.read_status(run_dir)
    recipe = None
    if with_recipe and (run_dir / run_files.RECIPE).is_file():
        try:
            recipe = yaml.safe_load((run_dir / run_files.RECIPE).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
            recipe = {}
        recipe = recipe if isinstance(recipe, dict) else {}
    error = status.get("error")
    row = run_files.last_metrics_row(run_dir)
    reward = row.get("reward_mean")
    finite = isinstance(reward, (int, float)) and not isinstance(reward, bool) and math.isfinite(reward)
    return OnDisk(status.get("status"), row.get("step", 0), recipe, error if isinstance(error, str) else None,
                  float(reward) if finite else None)


def _differences(saved, new, prefix: str = "") -> list[str]:
    """`field: saved -> new` for every leaf where the two recipes differ."""
    if isinstance(saved, dict) and isinstance(new, dict):
        return [d for k in sorted(set(saved) | set(new), key=str)
                for d in _differences(saved.get(k), new.get(k), f"{prefix}{k}.")]
    return [] if saved == new else [f"{prefix[:-1]}: {saved!r} -> {new!r}"]


def run_state(run: PlannedRun, disk: OnDisk) -> tuple[str, list[str]]:
    """(state, the differences that make it a conflict: empty unless state is ``conflict``)."""
    if disk.recipe is None:
        return "new", []
    if disk.status == "copied":  # another run's steps, to be continued (sweep/continuation.py): the trainer checks
        return "resume", []
    if not disk.recipe:
        return "conflict", [f"{run.dir}/recipe.yaml: cannot be read as a recipe"]
    finished = disk.status == "finished"
    ignore = IGNORED + (IGNORED_WHEN_FINISHED if finished else ())
    new = run.recipe.model_dump(mode="json")
    saved_steps, new_steps = disk.recipe.get("steps"), new["steps"]
    strip = lambda d: {k: v for k, v in d.items() if k not in (*ignore, "steps")}  # noqa: E731
    diffs = _differences(strip(disk.recipe), strip(new))
    if finished and isinstance(saved_steps, int) and new_steps < saved_steps:
        diffs.append(f"steps: {saved_steps!r} -> {new_steps!r} (a finished run cannot be shortened)")
    if diffs:
        return "conflict", diffs
    if not finished:
        return "resume", []
    return ("finished", []) if new_steps == saved_steps else ("extend", [])


def plan_states(plan: Plan) -> dict[str, str]:
    """Every run's state by run name; raises UserError naming the arm of every run a changed spec
    would change (nothing has run yet)."""
    states, problems = {}, []
    for run in [*plan.needs, *plan.runs]:
        unusable = _unusable(run.dir)
        if unusable:
            problems.append(f"{plan.where(run.arm)}: {unusable}")
            states[run.name] = "new"
            continue
        state, diffs = run_state(run, read_run(run.dir))
        if state == "new" and _other_files(run.dir):
            problems.append(f"{plan.where(run.arm)}: {run.dir} holds files but no run (no {run_files.RECIPE}), and "
                            "`rlvr train` does not write into it; move them away, or choose another --out")
        if state == "conflict":
            shown = "; ".join(diffs[:3]) + (f"; and {len(diffs) - 3} more" if len(diffs) > 3 else "")
            problems.append(f"{plan.where(run.arm)}: {run.dir} holds a run trained with a different recipe "
                            f"({shown}); restore the spec, or choose another --out")
        states[run.name] = state
    if problems:
        raise UserError(problems)
    return states


def _other_files(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds anything but the run lock (an unreadable directory counts as holding some)."""
    try:
        return any(p.name != run_files.LOCK_NAME for p in run_dir.iterdir())
    except FileNotFoundError:
        return False
    except OSError:
        return True


def _unusable(run_dir: Path) -> str | None:
    """Why ``run_dir`` cannot hold the run (read before it is: a FIFO there would block the reading)."""
    if not os.path.lexists(run_dir) or run_dir.is_dir():
        try:
            run_files.check_run_files(run_dir)
        except UserError as e:
            return e.problems[0]
        return None
    return f"{run_dir}: is a file, not a run directory; remove it, or choose another --out"
