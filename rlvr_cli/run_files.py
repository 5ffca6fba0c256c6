"""The run directory's contract (docs/design.md §3): its file names, its lock, what counts as one, and
the one reader of ``metrics.jsonl`` (:func:`read_metrics`).

The trainer writes it (:mod:`rlvr_cli.train.run_writer`) and every reader (``compare``, ``evaluation``,
``models``, ``trackers``, the warm start, ``results/reproduce.py``) finds its files by these names,
so the layout is spelled once::

    runs/NAME/
      recipe.yaml          fully resolved recipe (written first)
      run.json             status (running/finished/failed), versions, seed, times, git commit
      metrics.jsonl        one JSON object per step, appended, flushed and fsynced each step
      eval/step_N.json     evaluation results (step 0 = the initial model)
      samples/step_N.jsonl a few prompts with responses, rewards and advantages, for reading
      checkpoints/step_N/  Hugging Face model + tokenizer + trainer_state.pt (complete when it holds config.json)
      .lock                locked (flock) by the trainer while it runs; holds its pid

One trainer per run directory: an exclusive ``flock`` on ``RUN/.lock``, held for the run's lifetime.
Why ``flock`` and not a pid file: the kernel drops the lock when the holder's descriptor closes, on
any exit (a return, an exception, ``kill -9``, a crash), so a lock can never outlive its holder and
no stale-lock guessing is needed. The file keeps the holder's pid only to name it in the message of
a second trainer, which exits 2 instead of appending the same steps to ``metrics.jsonl`` twice. The
file is never removed (removing a locked file lets a third process lock a new inode of the same name).
Within one process the lock is re-entrant (the CLI holds it around the run and the session takes it
again); it is released when the last holder lets go (:func:`release`, or the garbage collection of
the object it was taken for) and, for ``rlvr train``, when the run returns or raises.

This module sits low (standard library and :mod:`rlvr_cli.errors` only): anything may import it.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import stat
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from rlvr_cli.errors import UserError

RECIPE = "recipe.yaml"
STATUS = "run.json"
METRICS = "metrics.jsonl"
EVAL_DIR = "eval"
SAMPLES_DIR = "samples"
CHECKPOINTS_DIR = "checkpoints"
LOCK_NAME = ".lock"

RUN_MARKERS = (RECIPE, METRICS, STATUS, CHECKPOINTS_DIR)
"""A directory holding any of these is a run directory (possibly a broken or unfinished one): the
trainer writes the recipe and the status before anything else, and nothing else writes them."""

STEP_DIR = re.compile(r"^step_(\d+)$")
"""The name of a checkpoint directory, ``step_N``."""
EVAL_FILE = re.compile(r"^step_(\d+)\.json$")
"""The name of an evaluation file, ``step_N.json``."""


def is_run_dir(path: str | Path) -> bool:
    """Whether ``path`` is a directory that holds any of :data:`RUN_MARKERS` (False where the operating
    system will not let us look)."""
    return os.path.isdir(path) and any(os.path.exists(os.path.join(path, m)) for m in RUN_MARKERS)


def eval_path(root: str | Path, step: int) -> Path:
    return Path(root) / EVAL_DIR / f"step_{step}.json"


def samples_path(root: str | Path, step: int) -> Path:
    return Path(root) / SAMPLES_DIR / f"step_{step}.jsonl"


def checkpoint_path(root: str | Path, step: int) -> Path:
    return Path(root) / CHECKPOINTS_DIR / f"step_{step}"


def list_checkpoints(root: str | Path) -> list[tuple[int, Path]]:
    """Complete checkpoints of a run, oldest first (temporary directories of unfinished writes are skipped)."""
    ck = Path(root) / CHECKPOINTS_DIR
    if not ck.is_dir():
        return []
    found = []
    for d in ck.iterdir():
        m = STEP_DIR.match(d.name)
        if m and d.is_dir() and (d / "config.json").is_file():
            found.append((int(m.group(1)), d))
    return sorted(found)


def eval_files(root: str | Path) -> list[tuple[int, Path]]:
    """``(step, eval/step_N.json)`` of a run, by step (files of other names are not evaluations)."""
    d = Path(root) / EVAL_DIR
    if not d.is_dir():
        return []
    return sorted((int(m.group(1)), p) for p in d.glob("step_*.json") if (m := EVAL_FILE.match(p.name)))


# --- metrics.jsonl: the one reader ------------------------------------------------------------------
def metrics_row(line: str) -> dict | str:
    """One line of ``metrics.jsonl`` as a step's row, or why it is not one (the rule: :func:`read_metrics`)."""
    try:
        row = json.loads(line)
    except RecursionError:
        return "nested too deeply"
    except ValueError as e:  # not JSON, or an integer of more digits than Python converts
        return f"not valid JSON ({getattr(e, 'msg', None) or ' '.join(str(e).split())[:80]})"
    if not isinstance(row, dict):
        return "not a JSON object"
    step = row.get("step")
    if not isinstance(step, int) or isinstance(step, bool):
        return "no integer 'step'"
    return row


@dataclass
class MetricsLog:
    """What :func:`read_metrics` found: one row per step, and a line for each line it did not use."""

    rows: list[dict] = field(default_factory=list)
    """One row per logged step (the metrics table's), in the order the steps were first logged."""
    problems: list[str] = field(default_factory=list)
    """``metrics.jsonl line N: why; skipped`` for every line that is not a step's row."""


def read_metrics(root: str | Path) -> MetricsLog:
    """The rows of a run's ``metrics.jsonl`` (one per step), by the one rule every reader follows:

    - a line is a step's row when it is a JSON object with an integer ``step`` (bytes that are not
      UTF-8 read as U+FFFD); any other line (a torn write, a hand edit, a line nested too deeply) is
      skipped and named in :attr:`MetricsLog.problems`;
    - the last line may lack its newline (a write in progress, or cut by a crash): it counts when it
      is a whole row, and is named as an incomplete last line otherwise;
    - a step logged twice keeps its later line (the resumed run's, after a crash before truncation).

    Empty when there is no ``metrics.jsonl``; ``OSError`` when there is one that cannot be read.
    """
    path = Path(root) / METRICS
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return MetricsLog()
    lines = text.split("\n")
    last = lines.pop()  # "" when the file ends with a newline
    by_step: dict[int, dict] = {}
    log = MetricsLog()
    numbered = [(n, line, True) for n, line in enumerate(lines, start=1)] + ([(len(lines) + 1, last, False)] if last.strip() else [])
    for n, line, whole in numbered:
        if not line.strip():
            continue
        row = metrics_row(line)
        if isinstance(row, str):
            why = row if whole else "incomplete last line (a run in progress or cut short)"
            log.problems.append(f"{METRICS} line {n}: {why}; skipped")
            continue
        if row["step"] in by_step:
            log.problems.append(f"{METRICS} line {n}: step {row['step']} logged again; kept this later line")
        by_step[row["step"]] = row
    log.rows = list(by_step.values())
    return log


def last_metrics_row(root: str | Path) -> dict:
    """The last row of ``metrics.jsonl`` ({} when none), by :func:`read_metrics`'s rule, read from the
    file's end backwards (a growing file is not read whole to know where it is)."""
    try:
        with open(Path(root) / METRICS, "rb") as f:
            size = f.seek(0, 2)
            window = 1 << 16
            while True:
                f.seek(max(0, size - window))
                lines = f.read().split(b"\n")
                for line in reversed(lines[1:] if size > window else lines):  # the first may be cut
                    row = metrics_row(line.decode("utf-8", errors="replace")) if line.strip() else None
                    if isinstance(row, dict):
                        return row
                if window >= size:
                    return {}
                window *= 16
    except OSError:
        return {}


def read_status(root: str | Path) -> dict:
    """run.json's fields; {} when it is missing or damaged (not UTF-8, not JSON, not an object)."""
    try:
        data = json.loads((Path(root) / STATUS).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


# --- the lock --------------------------------------------------------------------------------------
_held: dict[str, list] = {}
"""Run directories this process holds: realpath -> [descriptor, number of holders]."""


def _key(run_dir: Path) -> str:
    return os.path.realpath(run_dir)


def holder_pid(run_dir: str | Path) -> int | None:
    """The pid written by the lock's last holder (it may have exited since); None when there is no
    lock file or it is not a regular file (it is never read through a link, nor opened blocking)."""
    try:
        fd = os.open(Path(run_dir) / LOCK_NAME, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        text = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip() if stat.S_ISREG(os.fstat(fd).st_mode) else ""
    except OSError:
        text = ""
    finally:
        os.close(fd)
    return int(text) if text.isdigit() else None


_KINDS = {RECIPE: stat.S_ISREG, STATUS: stat.S_ISREG, METRICS: stat.S_ISREG,
          EVAL_DIR: stat.S_ISDIR, SAMPLES_DIR: stat.S_ISDIR, CHECKPOINTS_DIR: stat.S_ISDIR}
"""What each of the trainer's names must be when it exists (a symbolic link is never one of them)."""


def check_run_files(run_dir: str | Path) -> None:
    """Refuse (``UserError``, exit 2, naming the path) a run directory whose files the trainer would write
    or delete through: a symbolic link or a special file in place of ``run.json``, ``metrics.jsonl``,
    ``recipe.yaml``, ``eval/``, ``samples/``, ``checkpoints/`` or a ``checkpoints/step_N``. The trainer
    appends to, rewrites and prunes these; through a link it would change files outside the run."""
    run_dir = Path(run_dir)
    for name, is_kind in _KINDS.items():
        path = run_dir / name
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        except OSError as e:
            raise UserError(f"{path}: cannot inspect: {e.strerror}") from None
        if stat.S_ISLNK(st.st_mode):
            raise UserError(f"{path}: is a symbolic link; rlvr does not write through it (remove it)")
        if not is_kind(st.st_mode):
            want = "directory" if is_kind is stat.S_ISDIR else "regular file"
            raise UserError(f"{path}: not a {want}; rlvr does not write there (remove it)")
    ck = run_dir / CHECKPOINTS_DIR
    if ck.is_dir():
        for d in ck.iterdir():
            if STEP_DIR.match(d.name) and d.is_symlink():
                raise UserError(f"{d}: is a symbolic link; rlvr does not write through it (remove it)")


def _open_lock_file(run_dir: Path) -> int:
    """Open (creating) ``RUN/.lock`` without following a link or blocking on a FIFO; refuse anything but
    a regular file with one name (a hard link is another file's data) with ``UserError`` naming it."""
    path = run_dir / LOCK_NAME
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UserError(f"{path}: is a symbolic link; rlvr does not write through it (remove it)") from None
        if e.errno in (errno.ENXIO, errno.EISDIR, errno.ENODEV, errno.EOPNOTSUPP):
            raise UserError(f"{path}: not a regular file; rlvr does not write there (remove it)") from None
        raise UserError(f"{run_dir}: cannot create the run directory's lock file: {e.strerror}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        what = "not a regular file" if not stat.S_ISREG(st.st_mode) else "a hard link to another file"
        raise UserError(f"{path}: {what}; rlvr does not write there (remove it)")
    return fd


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process
    return True


def acquire(run_dir: str | Path, owner: object | None = None, doing: str = "training into this directory again",
            record_pid: bool = True) -> None:
    """Take the run directory's lock (creating the directory), or raise ``UserError`` naming the pid
    of the process that holds it and what waits (``doing``). With ``owner``, the hold ends when ``owner``
    is garbage-collected. ``record_pid=False`` leaves the lock file's bytes as they are until
    :func:`record_holder` (a resume refused before it writes leaves the run byte for byte).
    The run's files are checked (:func:`check_run_files`) once the lock is held."""
    run_dir = Path(run_dir)
    key = _key(run_dir)
    if key in _held:
        _held[key][1] += 1
    else:
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"{run_dir}: cannot create the run directory: {e.strerror}") from None
        fd = _open_lock_file(run_dir)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            try:
                text = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
            except OSError:
                text = ""
            os.close(fd)
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise UserError(f"{run_dir}/{LOCK_NAME}: cannot lock the run directory: {e.strerror}") from None
            # a resume records its pid only once it writes: until then the file names the last holder
            who = f"process {text}" if text.isdigit() and _alive(int(text)) else "another process"
            raise UserError(
                f"{run_dir}: in use by {who}, which holds {run_dir / LOCK_NAME}; wait for it to finish "
                f"(or stop it) before {doing}"
            ) from None
        try:
            check_run_files(run_dir)
        except UserError:
            os.close(fd)
            raise
        _held[key] = [fd, 1]
        if record_pid:
            record_holder(run_dir)
    if owner is not None:
        weakref.finalize(owner, release, run_dir)


def record_holder(run_dir: str | Path) -> None:
    """Write this process's pid into the lock file of a run directory it holds (else nothing)."""
    entry = _held.get(_key(Path(run_dir)))
    if entry is None:
        return
    pid = f"{os.getpid()}\n".encode()
    try:
        if os.pread(entry[0], 32, 0) != pid:
            os.ftruncate(entry[0], 0)
            os.pwrite(entry[0], pid, 0)
    except OSError:
        pass  # the pid only names the holder in a message; a full disk is the run's to report


def release(run_dir: str | Path, every_hold: bool = False) -> None:
    """Let go of one hold (or, with ``every_hold``, of all this process has: the run is over); the
    lock is dropped when none is left."""
    key = _key(Path(run_dir))
    entry = _held.get(key)
    if entry is None:
        return
    entry[1] = 0 if every_hold else entry[1] - 1
    if entry[1] <= 0:
        del _held[key]
        os.close(entry[0])
