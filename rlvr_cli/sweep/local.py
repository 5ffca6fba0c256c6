"""The local backend: each run one `rlvr train` process on this machine, ``--jobs`` at a time.

By default each run is forked from a server that has torch imported (:mod:`rlvr_cli.sweep.forkserver`:
the same process, log and numbers as a fresh `python -m rlvr_cli`, without paying the imports per run);
``fork=False`` (`--no-fork-server`) starts each as a fresh process.

A run's process starts in a session of its own, so the terminal's Ctrl-C reaches only the sweep, which
then stops every run the same way: SIGINT to the run's process group (the trainer records the run as
``interrupted`` and exits; under `--nproc` torchrun and its ranks get it too), then SIGKILL to what is
still there after a grace period. Either way the run resumes from its last complete checkpoint. A sweep
killed outright (kill -9) cannot do that itself: a watcher process does it instead (:mod:`.watch`).
"""

from __future__ import annotations

import errno
import os
import shlex
import signal
import stat
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from rlvr_cli.sweep.backend import GRACE_S, Backend, Ended, Job, Settings
from rlvr_cli.sweep.watch import Watcher

__all__ = ["GRACE_S", "Job", "LocalBackend", "open_log", "spawn", "stop"]


@contextmanager
def _sigint_unblocked():
    """This thread without SIGINT blocked, so that a process it starts can be stopped as Ctrl-C stops one: a
    child inherits the signal mask, and a Ray worker blocks SIGINT (its run would ignore the stop)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def open_log(log_path: Path, shown: list[str]):
    """The log file, opened for appending under a header line with the command. Raises OSError when it
    cannot be written (a full disk, a bad path, a FIFO or other special file, which is never opened)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = os.stat(log_path).st_mode
    except FileNotFoundError:
        mode = stat.S_IFREG
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):  # a directory: open() itself says "Is a directory"
        raise OSError(errno.EINVAL, "not a regular file")
    log = open(log_path, "a", encoding="utf-8")
    try:
        log.write(f"== {shlex.join(shown)}\n")
        log.flush()
    except BaseException:
        log.close()
        raise
    return log


def spawn(argv: list[str], log_path: Path, env: dict[str, str],
          command: list[str] | None = None) -> tuple[subprocess.Popen, object]:
    """Start `python -m rlvr_cli ARGV` (or ``command``) in its own session, output appended to ``log_path``
    under a header line with the command. Raises OSError when the log cannot be written."""
    log = open_log(log_path, command or ["rlvr", *argv])
    try:
        with _sigint_unblocked():
            proc = subprocess.Popen(command or [sys.executable, "-m", "rlvr_cli", *argv], stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env={**os.environ, **env},
                                    start_new_session=True)
    except BaseException:
        log.close()
        raise
    return proc, log


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)  # the run's own session: its torchrun and ranks too, nothing else
    except (ProcessLookupError, PermissionError):
        pass


class _Spawned:
    """A run started as a fresh process."""

    def __init__(self, job: Job):
        self.proc, self.log = spawn(job.argv, job.log, job.env, job.command)
        self.pid = self.proc.pid

    def poll(self) -> int | None:
        rc = self.proc.poll()
        if rc is not None:
            self.log.close()
        return rc


class _Forked:
    """A run forked from a server (:mod:`rlvr_cli.sweep.forkserver`); the server returns to the idle
    ones when the run ends."""

    def __init__(self, job: Job, server):
        open_log(job.log, ["rlvr", *job.argv]).close()
        self.server = server
        self.pid = server.start(job.argv, str(job.log.absolute()), os.getcwd(), job.env)

    def poll(self) -> int | None:
        return self.server.ended()


def stop(running: list, grace: float = GRACE_S) -> None:
    """SIGINT each run's process group, wait up to ``grace`` seconds for all, then SIGKILL what is left
    (at once on a second Ctrl-C)."""
    left = [r for r in running if _poll(r) is None]
    for r in left:
        _signal_group(r.pid, signal.SIGINT)
    deadline = time.monotonic() + grace
    try:
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = [r for r in left if _poll(r) is None]
    finally:
        for r in left:
            _signal_group(r.pid, signal.SIGKILL)
        for r in left:
            while _poll(r) is None:
                time.sleep(0.05)


def _poll(r) -> int | None:
    if getattr(r, "rc", None) is None:
        try:
            r.rc = r.poll()
        except RuntimeError:  # its fork server died: the run went with it
            r.rc = -signal.SIGKILL
    return r.rc


class LocalBackend(Backend):
    """Runs jobs as child processes of the sweep (forked from servers with ``fork``). A watcher
    (:mod:`rlvr_cli.sweep.watch`) that holds ``hold`` stops them should the sweep be killed."""

    name = "local"
    on_this_machine = True

    def __init__(self, fork: bool = False, hold: tuple[int, ...] = ()):
        from rlvr_cli.sweep import forkserver

        self.fork = fork and forkserver.available()
        self.hold = hold
        self._running: dict[str, object] = {}
        self._idle: list = []
        self._servers: list = []
        self._watcher: Watcher | None = None

    @classmethod
    def default_jobs(cls, cpus: list[int]) -> int:
        """As many runs as this machine's cores hold at the widest run's CPUs."""
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        return max(1, cores // max(cpus, default=1))

    @classmethod
    def open(cls, settings: Settings) -> LocalBackend:
        return cls(fork=settings.fork, hold=settings.hold)

    def _server(self):
        from rlvr_cli.sweep.forkserver import Server

        if self._idle:
            return self._idle.pop()
        with _sigint_unblocked():
            server = Server()
        self._servers.append(server)
        return server

    def _run(self, job: Job):
        if not (self.fork and job.command is None):
            return _Spawned(job)
        server = self._server()
        try:
            return _Forked(job, server)
        except OSError:
            self._idle.append(server)
            raise
        except RuntimeError as e:  # the server died before forking: a fresh process instead
            self._servers.remove(server)
            job.log.parent.mkdir(parents=True, exist_ok=True)
            with open(job.log, "a", encoding="utf-8") as f:
                f.write(f"(fork server: {e}; starting a fresh process)\n")
            return _Spawned(job)

    def start(self, job: Job) -> None:
        if self._watcher is None:
            self._watcher = Watcher(GRACE_S, self.hold)
        r = self._run(job)
        self._running[job.name] = r
        self._watcher.add(r.pid)

    def _release(self, r) -> None:
        """An ended run: no longer watched, and its server back to the idle ones if it is still alive."""
        self._watcher.remove(r.pid)
        if isinstance(r, _Forked) and r.rc is not None and r.server.proc.poll() is None:
            self._idle.append(r.server)

    def poll(self) -> list[Ended]:
        """(name, exit status, None) of every job that ended since the last call."""
        ended = []
        for name, r in list(self._running.items()):
            rc = _poll(r)
            if rc is not None:
                del self._running[name]
                self._release(r)
                ended.append((name, rc, None))
        return ended

    def interrupt(self, grace: float = GRACE_S) -> list[str]:
        """Stop every running job (each stays resumable); returns their names."""
        names = list(self._running)
        stop(list(self._running.values()), grace)
        for r in self._running.values():
            if isinstance(r, _Spawned):
                r.log.close()
            self._release(r)
        self._running.clear()
        return names

    def close(self) -> None:
        self.interrupt()
        for server in self._servers:
            server.close()
        self._servers, self._idle = [], []
        if self._watcher is not None:
            self._watcher.close()
            self._watcher = None
