"""Stops a sweep's runs when the sweep dies without stopping them itself (kill -9, the OOM killer).

Ctrl-C and SIGTERM reach the sweep, which stops its runs resumably (:func:`rlvr_cli.sweep.local.stop`).
A sweep killed outright cannot, and its runs, each in a session of its own, would go on training
detached, holding their run directories' locks. So the sweep starts this watcher
(``python -m rlvr_cli.sweep.watch GRACE``) in a session of its own and tells it on its stdin each run's
process group as the run starts (``+PGID``) and ends (``-PGID``), and ``done`` once it has stopped them
itself. Its stdin closing before ``done`` means the sweep died: it stops every group still listed as the
sweep would (SIGINT: each run records itself interrupted and resumes from its last checkpoint; SIGKILL
after ``GRACE`` seconds), then exits. It inherits the sweep's locks (``OUT/.sweep.lock``) and holds them
until then, so a sweep started again meanwhile waits for the old runs to stop rather than fail on their
run locks. A Ray task watches its own run the same way (the task's worker killed: the run stops).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def _send(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:  # a forked run an instant before its setsid: its group is still the server's
        try:
            os.kill(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    except PermissionError:
        pass


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except OSError:
        return False
    return True


def stop_groups(groups: set[int], grace: float) -> None:
    """SIGINT every process group, wait up to ``grace`` seconds for them to end, SIGKILL what is left."""
    for g in groups:
        _send(g, signal.SIGINT)
    deadline = time.monotonic() + grace
    while groups and time.monotonic() < deadline:
        time.sleep(0.2)
        groups = {g for g in groups if _alive(g)}
    for g in groups:
        _send(g, signal.SIGKILL)


def serve(lines, grace: float) -> None:
    """Follow ``lines`` (``+PGID``, ``-PGID``, ``done``); at their end without ``done``, stop the groups."""
    groups: set[int] = set()
    for line in lines:
        line = line.strip()
        if line == "done":
            return
        if line[:1] in ("+", "-") and line[1:].isdigit():
            (groups.add if line[0] == "+" else groups.discard)(int(line[1:]))
    stop_groups(groups, grace)


class Watcher:
    """The watching process, from the side of whoever starts the runs (the sweep, or a Ray task)."""

    def __init__(self, grace: float, hold: tuple[int, ...] = ()):
        self.proc = subprocess.Popen([sys.executable, "-m", "rlvr_cli.sweep.watch", str(grace)],
                                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, pass_fds=hold,
                                     start_new_session=True)

    def _say(self, line: str) -> None:
        try:
            self.proc.stdin.write(f"{line}\n".encode())
            self.proc.stdin.flush()
        except OSError:  # the watcher is gone: nothing to tell
            pass

    def add(self, pgid: int) -> None:
        self._say(f"+{pgid}")

    def remove(self, pgid: int) -> None:
        self._say(f"-{pgid}")

    def close(self) -> None:
        """The runs were stopped (or ended): the watcher exits without stopping anything."""
        self._say("done")
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        self.proc.wait()


if __name__ == "__main__":
    serve(sys.stdin, float(sys.argv[1]))
