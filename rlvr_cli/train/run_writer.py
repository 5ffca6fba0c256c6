"""The trainer's side of the run directory: writing it so that a run loses nothing.

The layout, the file names and the lock are the contract in :mod:`rlvr_cli.run_files`, which every
reader uses too. Checkpoints are written into a temporary directory and renamed into place, so a
directory named ``step_N`` is always complete; a run killed at any moment resumes from the newest one,
after metrics lines and eval files from later steps (and a half-written last line) are dropped.
"""

from __future__ import annotations

import datetime as _dt
import errno
import json
import os
import shutil
import stat
from pathlib import Path

import torch

from rlvr_cli.io import atomic_write_json, atomic_write_jsonl, atomic_write_text
from rlvr_cli.errors import RunFailed, UserError
from rlvr_cli.fingerprints import code_revision, versions
from rlvr_cli import run_files
from rlvr_cli.models import quiet_transformers
from rlvr_cli.run_files import LOCK_NAME, list_checkpoints
from rlvr_cli.trackers import close_trackers, log_to_trackers


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _mount_point(path: Path) -> Path:
    path = Path(os.path.realpath(path))
    while not os.path.ismount(path) and path != path.parent:
        path = path.parent
    return path


def disk_full(error: BaseException, where: Path) -> bool:
    """Whether ``error`` (an OSError, or the RuntimeError/SafetensorError a writer wraps it in) came from a
    full disk: ENOSPC/EDQUOT, the kernel's message, or under 1 MiB left where it was writing."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    if "No space left on device" in str(error) or "os error 28" in str(error):
        return True
    if not isinstance(error, (OSError, RuntimeError)) and type(error).__name__ != "SafetensorError":
        return False  # the writers' own errors only: a bug elsewhere on a nearly full disk is still a bug
    try:
        return shutil.disk_usage(where if where.exists() else where.parent).free < 1 << 20
    except OSError:
        return False


def disk_full_message(root: Path, doing: str) -> str:
    """``no space left on the disk mounted at /data (12 KiB free) while writing ... of runs/x``."""
    mount = _mount_point(root if root.exists() else root.parent)
    try:
        free = f"{shutil.disk_usage(mount).free // 1024} KiB free"
    except OSError:
        free = "free space unknown"
    return (f"no space left on the disk mounted at {mount} ({free}) while {doing} of {root}; free space there, "
            "then continue with --resume (the last complete checkpoint is kept)")


class RunDir:
    """``writer=False`` (every rank but 0 of a distributed run) reads the directory and writes nothing."""

    def __init__(self, root: str | Path, writer: bool = True):
        self.root = Path(root)
        self.writer = writer
        self._deferred: list = []

    # --- a resumed run writes nothing until it starts ------------------------------------------------
    def defer(self, record) -> None:
        """Run ``record()`` just before this directory's first step, eval or checkpoint is written (a
        resumed run records its resume there; a ``running`` status meanwhile is recorded with it): a
        start refused before then, up to the first step's rollouts, leaves the run byte for byte as it was."""
        self._deferred.append(record)

    @property
    def deferred(self) -> bool:
        """Whether the run's start is still unrecorded (nothing written by this process yet)."""
        return bool(self._deferred)

    def _first_write(self) -> None:
        if not self._deferred:
            return
        pending, self._deferred = self._deferred, []
        run_files.record_holder(self.root)  # the lock file names this process from now on
        for record in pending:
            record()

    # --- layout ------------------------------------------------------------------------------------
    @property
    def metrics_path(self) -> Path:
        return self.root / run_files.METRICS

    def eval_path(self, step: int) -> Path:
        return run_files.eval_path(self.root, step)

    def samples_path(self, step: int) -> Path:
        return run_files.samples_path(self.root, step)

    def checkpoint_path(self, step: int) -> Path:
        return run_files.checkpoint_path(self.root, step)

    # --- lifecycle ---------------------------------------------------------------------------------
    def create(self, recipe_yaml: str, info: dict, overwrite_ok: bool = False) -> None:
        """Start a fresh run; refuse to mix into an existing run's files."""
        if not self.writer:
            return
        if self.root.exists() and any(p.name != LOCK_NAME for p in self.root.iterdir()) and not overwrite_ok:
            raise UserError(
                f"{self.root}: run directory already exists; pass --resume to continue it, "
                "or choose another --out"
            )
        self.root.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.root / run_files.RECIPE, recipe_yaml)
        self.write_status("running", started=_now(), **info)

    def write_recipe(self, recipe_yaml: str) -> None:
        """Replace the run's recipe (a run continued to more steps, see session._continuation)."""
        if self.writer:
            self._first_write()
            atomic_write_text(self.root / run_files.RECIPE, recipe_yaml)

    def read_status(self) -> dict:
        """run.json's fields; {} when it is missing or damaged (not UTF-8, not JSON, not an object)."""
        return run_files.read_status(self.root)

    def write_status(self, status: str, **fields) -> None:
        if not self.writer:
            return
        if self._deferred and status in ("failed", "interrupted"):
            return  # the run never started here: it stays as it was (its own status, recipe and steps)
        if self._deferred and status == "running":  # more about a start not yet recorded: recorded with it
            self._deferred.append(lambda: self.write_status(status, **fields))
            return
        self._first_write()
        data = self.read_status()
        data.update(fields)
        data["status"] = status
        data.setdefault("versions", versions())
        data.setdefault("git_commit", code_revision())
        data["updated"] = _now()
        if status in ("finished", "failed"):
            data["ended"] = _now()
            close_trackers(self.root)
        atomic_write_json(self.root / run_files.STATUS, data)

    # --- metrics -----------------------------------------------------------------------------------
    def append_metrics(self, row: dict) -> None:
        """Append one line and make it durable before the step is considered done."""
        if not self.writer:
            return
        self._first_write()
        self.metrics_path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(row, allow_nan=True) + "\n"
        # never through a link nor into a FIFO (rlvr_cli.run_files.check_run_files refused them at the start;
        # this holds if one appears while the run is going)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
        try:
            fd = os.open(self.metrics_path, flags, 0o644)
        except OSError as e:
            raise RunFailed(f"{self.metrics_path}: cannot append ({e.strerror}); a symbolic link or special file "
                            "is never written through") from None
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise RunFailed(f"{self.metrics_path}: not a regular file; rlvr does not write there")
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        log_to_trackers(self.root, row)  # the recipe's optional sinks (rlvr_cli/trackers.py)

    def read_metrics(self) -> list[dict]:
        """The rows of metrics.jsonl, by the one rule every reader follows (:func:`rlvr_cli.run_files.read_metrics`:
        a damaged or half-written line is skipped, a step logged twice keeps its later line)."""
        return run_files.read_metrics(self.root).rows

    def truncate_after(self, step: int) -> None:
        """Forget everything logged after ``step`` (it will be recomputed by the resumed run). Temporary
        checkpoints go first: on a full disk they hold the space that rewriting the metrics needs."""
        if not self.writer:
            return
        self._first_write()
        ck = self.root / run_files.CHECKPOINTS_DIR
        if ck.is_dir():
            for d in ck.glob(".tmp-*"):
                shutil.rmtree(d, ignore_errors=True)
        kept = [r for r in self.read_metrics() if r.get("step", 0) <= step]
        raw = self.metrics_path.read_bytes() if self.metrics_path.is_file() else b""
        if raw.count(b"\n") != len(kept) or not raw.endswith(b"\n") and raw:  # something to drop
            atomic_write_jsonl(self.metrics_path, kept)
        for sub in (run_files.EVAL_DIR, run_files.SAMPLES_DIR):
            d = self.root / sub
            if d.is_dir():
                for f in d.glob("step_*"):
                    try:
                        n = int(f.stem.split("_", 1)[1])
                    except ValueError:
                        continue
                    if n > step:
                        f.unlink()

    # --- checkpoints -------------------------------------------------------------------------------
    def save_checkpoint(self, step: int, model, tokenizer, trainer_state: dict, keep_last: int | None = None,
                        state_dict: dict | None = None) -> Path:
        """Write checkpoints/step_N atomically: a temp dir, fsynced, then renamed into place.

        ``state_dict``: the whole weights when ``model`` holds only shards (FSDP2), else None.
        """
        quiet_transformers()
        final = self.checkpoint_path(step)
        if not self.writer:
            return final
        self._first_write()
        tmp = final.parent / f".tmp-step_{step}-{os.getpid()}"
        if tmp.exists():
            shutil.rmtree(tmp)
        try:
            tmp.mkdir(parents=True)
            model.save_pretrained(tmp, safe_serialization=True, **({"state_dict": state_dict} if state_dict else {}))
            tokenizer.save_pretrained(tmp)
            torch.save(trainer_state, tmp / "trainer_state.pt")
            for f in tmp.iterdir():
                with open(f, "rb") as fh:
                    os.fsync(fh.fileno())
        except BaseException as e:
            full = disk_full(e, tmp.parent)
            shutil.rmtree(tmp, ignore_errors=True)  # a partial checkpoint holds the space the rest needs
            if full:
                raise RunFailed(disk_full_message(self.root, f"writing checkpoint step {step}")) from None
            raise
        if final.exists():
            old = final.parent / f".tmp-old-step_{step}-{os.getpid()}"
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
        if keep_last:
            for _, d in list_checkpoints(self.root)[:-keep_last]:
                # only what rlvr wrote: a real directory (not a link) holding the trainer's own state file
                if not d.is_symlink() and (d / "trainer_state.pt").is_file():
                    shutil.rmtree(d, ignore_errors=True)
        return final

    def latest_checkpoint(self) -> tuple[int, Path] | None:
        cks = list_checkpoints(self.root)
        return cks[-1] if cks else None

    def write_eval(self, step: int, result: dict) -> None:
        if not self.writer:
            return
        self._first_write()
        atomic_write_json(self.eval_path(step), result)

    def write_samples(self, step: int, records: list[dict]) -> None:
        if not self.writer:
            return
        self._first_write()
        atomic_write_jsonl(self.samples_path(step), records)
