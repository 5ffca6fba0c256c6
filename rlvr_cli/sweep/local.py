"""The local backend: each run one `python -m rlvr_cli train` process on this machine, ``--jobs`` at a time.

A run's process starts in a session of its own, so the terminal's Ctrl-C reaches only the sweep, which
then stops every run the same way: SIGINT to the run's process group (the trainer records the run as
``interrupted`` and exits; under `--nproc` torchrun and its ranks get it too), then SIGKILL to what is
still there after a grace period. Either way the run resumes from its last complete checkpoint.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

GRACE_S = 30.0
"""How long an interrupted run may take to record itself before its processes are killed."""


@dataclass
class Job:
    """One run's `rlvr train` invocation and what it asks of the machine."""

    name: str
    argv: list[str]
    """The arguments after `python -m rlvr_cli` (`train BASE --out DIR --set ...`)."""
    log: Path
    cpus: int
    gpus: float = 0
    env: dict[str, str] = field(default_factory=dict)
    """Added to the environment of the run's process (its thread count)."""


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


def spawn(argv: list[str], log_path: Path, env: dict[str, str]) -> tuple[subprocess.Popen, object]:
    """Start `python -m rlvr_cli ARGV` in its own session, output appended to ``log_path`` under a header
    line with the command. Raises OSError when the log cannot be written (a full disk, a bad path)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "a", encoding="utf-8")
    try:
        log.write(f"== {shlex.join(['rlvr', *argv])}\n")
        log.flush()
        with _sigint_unblocked():
            proc = subprocess.Popen([sys.executable, "-m", "rlvr_cli", *argv], stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env={**os.environ, **env}, start_new_session=True)
    except BaseException:
        log.close()
        raise
    return proc, log


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)  # the run's own session: its torchrun and ranks too, nothing else
    except (ProcessLookupError, PermissionError):
        pass


def stop(procs: list[subprocess.Popen], grace: float = GRACE_S) -> None:
    """SIGINT each process group, wait up to ``grace`` seconds for all, then SIGKILL what is left (at
    once on a second Ctrl-C)."""
    for p in procs:
        if p.poll() is None:
            _signal_group(p, signal.SIGINT)
    deadline = time.monotonic() + grace
    try:
        for p in procs:
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(p, signal.SIGKILL)
    finally:
        for p in procs:
            if p.poll() is None:
                _signal_group(p, signal.SIGKILL)
                p.wait()


class LocalBackend:
    """Runs jobs as child processes of the sweep."""

    name = "local"

    def __init__(self):
        self._running: dict[str, tuple[subprocess.Popen, object]] = {}

    def start(self, job: Job) -> None:
        self._running[job.name] = spawn(job.argv, job.log, job.env)

    def poll(self) -> list[tuple[str, int | None, str | None]]:
        """(name, exit status, None) of every job that ended since the last call."""
        ended = []
        for name, (proc, log) in list(self._running.items()):
            rc = proc.poll()
            if rc is not None:
                log.close()
                del self._running[name]
                ended.append((name, rc, None))
        return ended

    def interrupt(self, grace: float = GRACE_S) -> list[str]:
        """Stop every running job (each stays resumable); returns their names."""
        names = list(self._running)
        stop([p for p, _ in self._running.values()], grace)
        for proc, log in self._running.values():
            log.close()
        self._running.clear()
        return names

    def close(self) -> None:
        self.interrupt()
