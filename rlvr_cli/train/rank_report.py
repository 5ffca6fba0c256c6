"""What `rlvr train --nproc N` says when its processes fail: one line naming the rank that failed first,
not torchrun's report.

When a rank dies (killed, out of memory), the others fail in the collective they were waiting on, with
gloo's message (a C++ source path, "Connection reset by peer ... GLHF!"), torchrun stops them with
SIGTERM and then prints its own log lines and a Python traceback around a "Root Cause" table. Each of
those is true and none is the answer. So under the launcher a rank records what stopped it (a
``UserError``, exit 2, or a ``RunFailed``) in a private directory instead of printing it, the launcher
holds back torchrun's own log lines and report as they stream past, and when torchrun fails it prints
one line: the failure of the rank torchrun names as the root cause, or, when that rank could say
nothing (a signal), which rank was killed by what. torchrun's output comes out only when nothing else
explains the failure (or with ``RLVR_DEBUG=1``).
"""

from __future__ import annotations

import json
import os
import re
import signal
from dataclasses import dataclass
from pathlib import Path

RANK_ERRORS_ENV = "RLVR_RANK_ERRORS"
"""Directory (made by the launcher, mode 0700) where a rank under ``--nproc`` leaves what stopped it."""

TRACEBACK = b"Traceback (most recent call last)"
TORCHRUN_LOG = re.compile(rb"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S*torch/distributed/")
"""A line of torchrun's own logging (glog format, from torch/distributed/elastic)."""


def record(kind: str, rank: int, problems: list[str]) -> bool:
    """Under the launcher: leave this rank's failure (``kind`` "user" for a UserError, "failed" for a
    RunFailed) for it to report; whether it was recorded (False outside the launcher)."""
    where = os.environ.get(RANK_ERRORS_ENV)
    if not where:
        return False
    from rlvr_cli.io import atomic_write_json

    try:
        atomic_write_json(Path(where) / f"rank{rank}.json", {"rank": rank, "kind": kind, "problems": problems})
    except OSError:
        return False  # the launcher then reports torchrun's failure as before
    return True


def recorded(where: Path) -> dict[str, list[tuple[int, list[str]]]]:
    """The ranks' recorded failures by kind ("user", "failed"), lowest rank first."""
    found: dict[str, list[tuple[int, list[str]]]] = {"user": [], "failed": []}
    for f in where.glob("rank*.json"):
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
            found[data.get("kind", "user")].append((int(data["rank"]), [str(x) for x in data["problems"]]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return {kind: sorted(items) for kind, items in found.items()}


class HeldOutput:
    """torchrun's stderr as it streams: every line passes to ``out`` except torchrun's own log lines and
    everything from its first ``Traceback`` on, which are held (:attr:`held`)."""

    def __init__(self, out):
        self.out, self.partial, self.held, self.holding = out, b"", bytearray(), False

    def feed(self, chunk: bytes) -> None:
        *lines, self.partial = (self.partial + chunk).split(b"\n")
        for line in lines:
            self._line(line + b"\n")
        self.out.flush()

    def _line(self, line: bytes) -> None:
        if not self.holding and TRACEBACK in line:
            self.holding = True
        if self.holding or TORCHRUN_LOG.match(line):
            self.held += line
        else:
            self.out.write(line)

    def close(self) -> None:
        if self.partial:
            self._line(self.partial)
            self.partial = b""
        self.out.flush()


@dataclass(frozen=True)
class RootCause:
    rank: int
    exitcode: int
    pid: int | None


def root_cause(report: str) -> RootCause | None:
    """The first failure torchrun's report names ("Root Cause (first observed failure)"), or None."""
    at = report.find("Root Cause")
    if at < 0:
        return None
    part = report[at:]
    rank = re.search(r"rank\s*:\s*(\d+)", part)
    code = re.search(r"exitcode\s*:\s*(-?\d+)(?:\s*\(pid:\s*(\d+)\))?", part)
    if not rank or not code:
        return None
    return RootCause(int(rank.group(1)), int(code.group(1)), int(code.group(2)) if code.group(2) else None)


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def failure_line(nproc: int, code: int, report: str, failed: list[tuple[int, list[str]]]) -> str | None:
    """The one line that says why ``nproc`` processes under torchrun failed (exit status ``code``), from
    torchrun's held ``report`` and the ranks' recorded failures; None when neither says."""
    cause = root_cause(report)
    by_rank = {rank: " ".join(lines) for rank, lines in failed}
    if cause is not None and cause.rank in by_rank:
        return by_rank[cause.rank]
    if cause is not None and cause.exitcode < 0:
        pid = f", pid {cause.pid}" if cause.pid else ""
        return (f"rank {cause.rank} of {nproc} was killed by {_signal_name(cause.exitcode)}{pid}; the other ranks "
                "stopped at the collective they were waiting on; continue with --resume")
    if cause is not None:
        return (f"rank {cause.rank} of {nproc} failed first (exit status {cause.exitcode}; its own message, if any, "
                "is above); the other ranks stopped; continue with --resume")
    firsthand = [m for rank, m in sorted(by_rank.items()) if "stopped by torchrun" not in m]
    return (firsthand or list(by_rank.values()) or [None])[0]
