"""A pool of verifier worker processes with a hard wall-clock limit per check.

Why processes and not threads or signals: a check of model output can hang inside C code (sympy's
big-integer arithmetic, a regex) where no Python-level timeout fires, and math-verify's own timeout
uses ``signal.alarm``, which works only on the main thread of the main interpreter. A process can
always be killed. So each check runs in a worker; the pool gives it a deadline when it hands it out
(worker start-up and imports are not counted), and when the deadline passes it kills the worker's
process group (and a code sandbox the worker announced), reports the check as ``timeout`` and starts a
fresh worker. A worker that dies during a check (a segfault, the kernel's OOM killer) gets its check
reported as ``error``; one that dies while idle is replaced without blaming anything. Every check
gets exactly one outcome, in order: none is lost.

Workers start lazily, on the first check that needs one, and are stopped by ``close()``, at
interpreter exit (``atexit``), or by the kernel when the process that started them dies.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass, field

from rlvr_cli.processes import kill_worker
from rlvr_cli.rewards import outcome as oc
from rlvr_cli.rewards.outcome import Outcome
from rlvr_cli.rewards.registry import get_verifier
from rlvr_cli.rewards.sandbox import kill_sandbox

START_TIMEOUT_S = 120.0
"""How long a worker may take to import and warm up (sympy on a loaded machine) before it is given up."""
MAX_START_FAILURES = 3


def default_workers(workers: int = 0) -> int:
    """``workers`` or, for 0, one per CPU core up to 4."""
    return workers if workers > 0 else max(1, min(4, os.cpu_count() or 1))


@dataclass
class Check:
    """One check to run: a verifier on a response and a reference, with its options and hard limit.
    Message kind ``check``: answered ``{"id", "outcome", "reward", "answer", "detail"}``, an :class:`Outcome`."""

    verifier: str
    response: str
    reference: str
    options: dict = field(default_factory=dict)
    timeout_s: float = 5.0

    def request(self, i: int) -> dict:
        return {"id": i, "kind": "check", "verifier": self.verifier, "response": self.response,
                "reference": self.reference, "options": self.options}

    def reply(self, msg: dict) -> Outcome | None:
        if "outcome" not in msg:
            return None
        return Outcome(msg["outcome"], float(msg["reward"]), msg.get("answer"), msg.get("detail", ""))

    def failed(self, detail: str, timed_out: bool = False, skipped: bool = False) -> Outcome:
        return oc.timeout(f"{self.verifier} {detail}") if timed_out else oc.error(detail)


@dataclass
class CallResult:
    """What a call of a user's reward function came back with: its values, or why there are none."""

    values: list | None
    failure: str = ""
    timed_out: bool = False
    skipped: bool = False
    """Not run: an earlier call of the same batch failed (``VerifierPool.run(stop_after_failure=True)``)."""


@dataclass
class FunctionCall:
    """One call of a user's reward function (``module:function``) on one prompt's group, with its hard
    limit. Message kind ``function``: ``{"id", "kind", "function", "call"}`` (``call``: the keyword
    arguments, pickled, base64: rlvr_cli/rewards/function.py), answered ``{"id", "values": [...]}`` or
    ``{"id", "failure": "one line"}``, a :class:`CallResult`."""

    function: str
    call: str
    timeout_s: float = 5.0

    def request(self, i: int) -> dict:
        return {"id": i, "kind": "function", "function": self.function, "call": self.call}

    def reply(self, msg: dict) -> CallResult | None:
        if "values" in msg:
            return CallResult(msg["values"] if isinstance(msg["values"], list) else None, "" if isinstance(
                msg["values"], list) else "the worker sent no list of values")
        if "failure" in msg:
            return CallResult(None, str(msg["failure"]))
        return None

    def failed(self, detail: str, timed_out: bool = False, skipped: bool = False) -> CallResult:
        return CallResult(None, detail, timed_out, skipped)


class _Worker:
    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.fd = proc.stdout.fileno()
        os.set_blocking(self.fd, False)
        self.buffer = b""
        self.ready = False
        self.started = time.monotonic()
        self.job: int | None = None
        self.handed_out = 0.0
        self.deadline = 0.0
        self.sandbox: tuple[int | None, int | None] | None = None

    def read_messages(self) -> list[dict] | None:
        """Complete messages available now; None at end of file (the worker is gone)."""
        try:
            chunk = os.read(self.fd, 1 << 20)
        except BlockingIOError:
            return []
        except OSError:
            return None
        if not chunk:
            return None
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        out = []
        for line in lines:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict):
                out.append(msg)
        return out

    def kill(self) -> None:
        if self.sandbox is not None:
            kill_sandbox(*self.sandbox)
        kill_worker(self.proc)

    def describe_exit(self) -> str:
        try:
            code = self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return "closed its output"
        if code < 0:
            return f"killed by {signal.Signals(-code).name}"
        return f"exit status {code}"


_live_pools: weakref.WeakSet[VerifierPool] = weakref.WeakSet()


@atexit.register
def _close_all_pools() -> None:
    for pool in list(_live_pools):
        pool.close()


class VerifierPool:
    """Worker processes that run checks with a hard time limit each (see the module docstring)."""

    def __init__(self, workers: int = 0, memory_mb: int | None = 4096, preload: tuple[str, ...] = (),
                 code_options: dict | None = None, functions: tuple[str, ...] = ()):
        self.size = default_workers(workers)
        self.memory_mb = memory_mb
        self.preload = tuple(preload)
        self.code_options = dict(code_options or {})
        self.functions = tuple(functions)
        """User reward functions (``module:function``) each worker imports before it says ready."""
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self._closed = False
        self.last_durations: list[float | None] = []
        """Seconds from hand-out to outcome of each check of the last ``run`` (None: never handed out)."""
        _live_pools.add(self)

    # --- workers ----------------------------------------------------------------------------------
    def _spawn(self) -> _Worker:
        cmd = [sys.executable, "-m", "rlvr_cli.rewards.worker", "--preload", ",".join(self.preload),
               "--code-options", json.dumps(self.code_options), "--functions", json.dumps(self.functions)]
        if self.memory_mb:
            cmd += ["--memory-mb", str(self.memory_mb)]
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True, close_fds=True)
        return _Worker(proc)

    def _retire(self, worker: _Worker) -> None:
        worker.kill()
        if worker in self._workers:
            self._workers.remove(worker)

    def close(self) -> None:
        """Stop every worker (they exit on end of input; stragglers are killed)."""
        with self._lock:
            self._closed = True
            for w in self._workers:
                try:
                    w.proc.stdin.close()
                except OSError:
                    pass
            deadline = time.monotonic() + 1.0
            for w in self._workers:
                try:
                    w.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
                w.kill()
            self._workers.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- running checks ----------------------------------------------------------------------------
    def run(self, checks: list[Check | FunctionCall], stop_after_failure: bool = False) -> list[Outcome | CallResult]:
        """One result per job, in order (an Outcome per Check, a CallResult per FunctionCall); never raises
        for anything in the jobs. ``stop_after_failure``: once a FunctionCall fails, the jobs not yet done are
        not run (their results say ``skipped``), so that a failing function is reported after one time
        limit, not one per call."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the verifier pool is closed")
            return self._run(checks, stop_after_failure)

    def _run(self, checks: list[Check | FunctionCall], stop_after_failure: bool = False) -> list[Outcome | CallResult]:
        results: list[Outcome | None] = [None] * len(checks)
        self.last_durations = [None] * len(checks)
        pending = deque(range(len(checks)))
        start_failures = 0
        while pending or any(w.job is not None for w in self._workers):
            # start workers lazily, as many as there is work for
            busy = sum(w.job is not None for w in self._workers)
            while len(self._workers) < min(self.size, busy + len(pending)):
                try:
                    self._workers.append(self._spawn())
                except OSError:
                    start_failures += 1
                    break
            # hand out work to ready, idle workers; the deadline starts now
            for w in list(self._workers):
                if pending and w.ready and w.job is None:
                    i = pending.popleft()
                    if not self._send(w, i, checks[i]):
                        pending.appendleft(i)  # the worker was dead before it got the check: not its fault
                        self._retire(w)
            start_failures += self._wait_and_collect(checks, results)
            if stop_after_failure and any(isinstance(r, CallResult) and r.values is None for r in results):
                self._skip_the_rest(checks, results, pending)
            for w in list(self._workers):
                if not w.ready and time.monotonic() - w.started > START_TIMEOUT_S:
                    self._retire(w)
                    start_failures += 1
            start_failures += self._count_start_failures()
            if start_failures >= MAX_START_FAILURES and not any(w.ready for w in self._workers):
                while pending:
                    i = pending.popleft()
                    results[i] = checks[i].failed("verifier workers cannot start")
        return [r if r is not None else c.failed("lost check") for r, c in zip(results, checks)]

    def _skip_the_rest(self, checks, results, pending: deque) -> None:
        """Results for every job not done: ``skipped``; the workers busy with one are stopped and replaced."""
        while pending:
            i = pending.popleft()
            results[i] = checks[i].failed("skipped", skipped=True)
        for w in list(self._workers):
            if w.job is not None:
                results[w.job] = checks[w.job].failed("skipped", skipped=True)
                w.job = None
                self._retire(w)

    def _send(self, w: _Worker, i: int, check: Check) -> bool:
        data = (json.dumps(check.request(i)) + "\n").encode("ascii")
        w.job, w.sandbox = i, None
        w.handed_out = time.monotonic()
        w.deadline = w.handed_out + check.timeout_s
        try:
            w.proc.stdin.write(data)
            w.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            w.job = None
            return False
        return True

    def _count_start_failures(self) -> int:
        failures = 0
        for w in list(self._workers):
            if not w.ready and w.proc.poll() is not None:
                self._retire(w)
                failures += 1
        return failures

    def _wait_and_collect(self, checks, results) -> int:
        """Wait for messages until the nearest deadline (at most 0.5 s); returns workers that died starting."""
        now = time.monotonic()
        deadlines = [w.deadline for w in self._workers if w.job is not None]
        wait = max(0.0, min(deadlines) - now) if deadlines else 0.5
        fds = {w.fd: w for w in self._workers}
        try:
            readable, _, _ = select.select(list(fds), [], [], min(wait, 0.5))
        except (OSError, ValueError):
            readable = list(fds)
        start_failures = 0
        for fd in readable:
            w = fds[fd]
            messages = w.read_messages()
            if messages is None:  # end of file: the worker died
                start_failures += not w.ready
                if w.job is not None:
                    results[w.job] = checks[w.job].failed(f"verifier worker died ({w.describe_exit()})")
                    self.last_durations[w.job] = time.monotonic() - w.handed_out
                self._retire(w)
                continue
            for msg in messages:
                if msg.get("ready"):
                    w.ready = True
                elif "sandbox" in msg and msg.get("id") == w.job:
                    w.sandbox = tuple(msg["sandbox"])
                elif msg.get("id") == w.job and w.job is not None and (got := checks[w.job].reply(msg)) is not None:
                    results[w.job] = got
                    self.last_durations[w.job] = time.monotonic() - w.handed_out
                    w.job, w.sandbox = None, None
        now = time.monotonic()
        for w in list(self._workers):
            if w.job is not None and now > w.deadline:
                check = checks[w.job]
                results[w.job] = check.failed(f"check exceeded {check.timeout_s:g} s", timed_out=True)
                self.last_durations[w.job] = now - w.handed_out
                w.job = None
                self._retire(w)
        return start_failures


def run_checks(checks: list[Check], pool: VerifierPool | None) -> list[Outcome]:
    """Outcomes of ``checks``: verifiers that are safe in-process run here (bounded by construction),
    the others in ``pool`` (required when there are any). Never raises for anything a model can write."""
    results: list[Outcome | None] = [None] * len(checks)
    remote = []
    for i, c in enumerate(checks):
        verifier = get_verifier(c.verifier)
        # a verifier that is bounded by construction runs whole; another may decide easy cases (no
        # answer, plain numbers) with its linear-time `fast_check` and leave the rest to the pool
        run_here = verifier.check if verifier.IN_PROCESS_SAFE else getattr(verifier, "fast_check", None)
        if run_here is not None:
            try:
                results[i] = run_here(c.response, c.reference, **c.options)
            except Exception as e:  # noqa: BLE001 - a checker bug is an `error` outcome, not a crash
                results[i] = oc.error(f"{type(e).__name__}: {str(e)[:200]}")
        if results[i] is None:
            remote.append(i)
    if remote:
        if pool is None:
            raise ValueError("math and code checks need a VerifierPool (they have no time limit in-process)")
        for i, out in zip(remote, pool.run([checks[i] for i in remote])):
            results[i] = out
    return results  # type: ignore[return-value]
