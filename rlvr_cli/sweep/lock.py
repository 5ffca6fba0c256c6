"""One sweep per output directory: an exclusive ``flock`` on ``OUT/.sweep.lock`` while a sweep runs there.

Two sweeps on one ``--out`` would start the same runs (the second failing on the first's run locks) and
write one sweep.json over the other: the second refuses at once (exit 2), naming the first one's pid.
As with a run directory's lock (:mod:`rlvr_cli.run_files`), the kernel drops a ``flock`` when its last
holder exits, however it ends, so no lock outlives its sweep. The sweep's watcher (:mod:`.watch`) holds
it too: after a kill -9 of the sweep the lock stays held until the watcher has stopped the runs, and a
sweep started meanwhile waits for that (up to ``WAIT_S``) rather than start runs whose directories are
still locked by the old ones.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
from pathlib import Path

from rlvr_cli.console import console
from rlvr_cli.errors import UserError
from rlvr_cli.sweep.backend import GRACE_S

LOCK = ".sweep.lock"
WAIT_S = GRACE_S + 15.0
"""How long a sweep waits for the runs of a killed sweep (its pid gone, its lock held) to stop."""


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _holder(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _open(out: Path) -> int:
    """``OUT/.sweep.lock``, opened (created with ``OUT``) without following a link or blocking on a FIFO."""
    path = out / LOCK
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    except OSError as e:
        raise UserError(f"{path}: cannot open the sweep's lock: {e.strerror}; remove it if it is not a file") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UserError(f"{path}: not a regular file; rlvr sweep locks its output there (remove it)")
    return fd


def _take(out: Path, wait: float) -> int:
    """The lock of ``out``, held; ``UserError`` naming the holder when another sweep holds it."""
    fd = _open(out)
    deadline, said = time.monotonic() + wait, False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                os.close(fd)
                raise UserError(f"{out / LOCK}: cannot lock it: {e.strerror}") from None
        pid = _holder(fd)
        if _alive(pid) or time.monotonic() > deadline:
            os.close(fd)
            who = f"another rlvr sweep (pid {pid})" if _alive(pid) else \
                f"the runs of a stopped sweep (pid {pid}), still stopping after {wait:.0f} s,"
            raise UserError(f"{out}: {who} holds {out / LOCK}: wait for it to finish (or stop it), or choose "
                            "another --out")
        if not said:  # its sweep was killed: its watcher is stopping its runs, then lets go
            console.print(f"waiting for the runs of a stopped sweep (pid {pid}) to stop: they hold {out / LOCK}",
                          highlight=False, soft_wrap=True)
            said = True
        time.sleep(0.5)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError:
        pass  # the pid only names the holder in a message; a full disk is the runs' to report
    return fd


class SweepLock:
    """Holds the lock of each output directory for the ``with`` block; ``fds`` are the descriptors."""

    def __init__(self, outs: list[Path], wait: float = WAIT_S):
        seen: dict[str, Path] = {}
        for out in outs:
            seen.setdefault(os.path.realpath(out), Path(out))
        self.outs = [seen[k] for k in sorted(seen)]  # one order for every sweep: no two wait on each other
        self.wait = wait
        self.fds: tuple[int, ...] = ()

    def __enter__(self) -> SweepLock:
        fds = []
        try:
            for out in self.outs:
                fds.append(_take(out, self.wait))
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        self.fds = tuple(fds)
        return self

    def __exit__(self, *exc) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = ()
