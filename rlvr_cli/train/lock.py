"""One trainer per run directory: an exclusive ``flock`` on ``RUN/.lock``, held for the run's lifetime.

Why ``flock`` and not a pid file: the kernel drops the lock when the holder's descriptor closes, on
any exit (a return, an exception, ``kill -9``, a crash), so a lock can never outlive its holder and
no stale-lock guessing is needed. The file keeps the holder's pid only to name it in the message of
a second trainer, which exits 2 instead of appending the same steps to ``metrics.jsonl`` twice. The
file is never removed (removing a locked file lets a third process lock a new inode of the same name).

Within one process the lock is re-entrant (the CLI holds it around the run and the session takes it
again); it is released when the last holder lets go (:func:`release`, or the garbage collection of
the object it was taken for) and, for ``rlvr train``, when the run returns or raises.
"""

from __future__ import annotations

import errno
import fcntl
import os
import weakref
from pathlib import Path

from rlvr_cli.errors import UserError

LOCK_NAME = ".lock"

_held: dict[str, list] = {}
"""Run directories this process holds: realpath -> [descriptor, number of holders]."""


def _key(run_dir: Path) -> str:
    return os.path.realpath(run_dir)


def holder_pid(run_dir: str | Path) -> int | None:
    """The pid written by the lock's last holder (it may have exited since)."""
    try:
        text = (Path(run_dir) / LOCK_NAME).read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def acquire(run_dir: str | Path, owner: object | None = None) -> None:
    """Take the run directory's lock (creating the directory), or raise ``UserError`` naming the pid
    of the process that holds it. With ``owner``, the hold ends when ``owner`` is garbage-collected."""
    run_dir = Path(run_dir)
    key = _key(run_dir)
    if key in _held:
        _held[key][1] += 1
    else:
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise UserError(f"{run_dir}: cannot create the run directory's lock file: {e.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise UserError(f"{run_dir}/{LOCK_NAME}: cannot lock the run directory: {e.strerror}") from None
            pid = holder_pid(run_dir)
            who = f"process {pid}" if pid else "another process"
            raise UserError(
                f"{run_dir}: in use by {who}, which holds {run_dir / LOCK_NAME}; wait for it to finish "
                "(or stop it) before training into this directory again"
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass  # the pid only names the holder in a message; a full disk is the run's to report
        _held[key] = [fd, 1]
    if owner is not None:
        weakref.finalize(owner, release, run_dir)


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
