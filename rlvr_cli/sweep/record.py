"""What happened to each planned run, and OUT/sweep.json, the record of it: the spec, and each run's
command and outcome (what a `commands.md` would say).

sweep.json is rewritten (atomically) at the end of every sweep into the same ``--out``. A file of that
name which is not such a record (the user's own, a FIFO, a link) is refused before anything runs
(:func:`check_record`): the sweep never overwrites what it did not write.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
from dataclasses import dataclass, field
from pathlib import Path

from rlvr_cli.errors import UserError
from rlvr_cli.io import atomic_write_json, display_path
from rlvr_cli.sweep.commands import train_argv
from rlvr_cli.sweep.spec import Plan, PlannedRun

RECORD = "sweep.json"
MAX_RECORD_BYTES = 64 << 20
"""A sweep.json larger than this is not one the sweep wrote (a thousand runs make well under 1 MiB)."""


@dataclass
class Outcome:
    run: PlannedRun
    state: str
    """What the run directory held at the start (new, finished, resume, extend)."""
    result: str = "not started"
    """skipped (finished before), finished, failed, interrupted (by this sweep's Ctrl-C), not started."""
    detail: str = ""
    seconds: float = 0.0
    step: int = 0
    copied: str = ""
    """How its directory was made from another run's (continuation), as a shell command; empty if not."""


@dataclass
class SweepResult:
    outcomes: list[Outcome]
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.result == "failed"]

    @property
    def complete(self) -> bool:
        return all(o.result in ("skipped", "finished") for o in self.outcomes)


_NOT_JSON = object()


def _read(path: Path) -> object:
    """The JSON in ``path``: None when there is no such file, ``_NOT_JSON`` when it holds none (or is too
    large to be a record). Raises UserError for a link or a special file (never opened: a FIFO blocks)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise UserError(f"{path}: cannot inspect: {e.strerror}") from None
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
        what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
        raise UserError(f"{path}: {what}; rlvr sweep writes its record there and does not replace it (remove it)")
    if st.st_size > MAX_RECORD_BYTES:
        return _NOT_JSON
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return _NOT_JSON


def _is_record(data: object) -> bool:
    return isinstance(data, dict) and isinstance(data.get("runs"), list)


def check_record(out: Path) -> None:
    """Refuse (``UserError``) an ``OUT/sweep.json`` that this sweep would overwrite and did not write."""
    data = _read(out / RECORD)
    if data is not None and not _is_record(data):
        raise UserError(f"{out / RECORD}: not a record of rlvr sweep (no JSON object with a `runs` list), and the sweep "
                        "would overwrite it; move it away, or choose another --out")


def _earlier_records(path: Path) -> dict[str, dict]:
    """The runs of an earlier sweep.json at ``path`` by name ({} when there is none or it is not one)."""
    try:
        data = _read(path)
    except UserError:
        return {}
    runs = data.get("runs", []) if _is_record(data) else []
    return {r["name"]: r for r in runs if isinstance(r, dict) and isinstance(r.get("name"), str)}


def write_record(plan: Plan, result: SweepResult) -> None:
    """OUT/sweep.json. A run skipped as finished keeps what an earlier sweep.json said of how it was made
    (`made_by`: its command, result and seconds), so re-running a finished sweep does not erase its
    timings. A record that cannot be written is a note of the result, not an error."""
    earlier = _earlier_records(plan.out / RECORD)
    runs = []
    for o in result.outcomes:
        argv = [display_path(a) if os.path.isabs(a) else a for a in train_argv(o.run, o.state, plan.spec.nproc)]
        entry = {"name": o.run.name, "arm": o.run.arm, "seed": o.run.seed, "dir": display_path(o.run.dir),
                 "command": shlex.join(["rlvr", *argv]), "state": o.state, "result": o.result,
                 "detail": o.detail, "step": o.step, "seconds": round(o.seconds, 1)}
        if o.copied:
            entry["copied"] = o.copied
        before = earlier.get(o.run.name, {})
        if o.result == "skipped":
            made = before.get("made_by") or ({k: before.get(k) for k in ("command", "result", "seconds")}
                                             if before.get("result") == "finished" else None)
            if made:
                entry["made_by"] = made
        runs.append(entry)
    try:
        atomic_write_json(plan.out / RECORD, {"spec": display_path(plan.spec_path), "arms": plan.arms,
                                              "control": plan.control, "interrupted": result.interrupted,
                                              "runs": runs})
    except OSError as e:
        result.notes.append(f"could not write {plan.out / RECORD}: {e.strerror or e}")
