"""The overlapped rollout source: a sampler process samples and scores step t+1 while this process trains step t.

``rollout.staleness.overlap``. The sampler process (:mod:`.sampler_process`) holds its own copy of the
policy. After each step the trainer hands it the new trainable tensors, tagged with their version
(:mod:`.policy_versions`: the adapter's only for a LoRA policy); the sampler samples each step with the
version its :class:`~.sampler_process.Plan` names and sends the groups back. At fixed staleness k
(strategy ``wait``) step t is sampled by exactly version max(0, t-1-k), in a process with the
trainer's numerics (dtype, autocast, torch threads, the trainer's ``requires_grad`` flags) and the same
keyed draws, so the run equals the in-process :class:`~.sources.LaggedSource` run bit for bit; with
k >= 1 sampling and training overlap. Bounded staleness lets the sampler take the newest weights it
holds: which version samples a step then depends on timing, so such a run is not reproducible.

Cleanup: the sampler dies with the trainer (see :mod:`.sampler_process`); :meth:`OverlappedSource.close`
(called in the trainer's ``finally``, and at interpreter exit if nothing called it) stops it; a sampler
that dies or fails makes the trainer's next exchange with it fail the run with a message naming it.
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path

import torch

from rlvr_cli.errors import RunFailed, UserError
from rlvr_cli.train.rollouts.policy_versions import trainable_tensors
from rlvr_cli.train.rollouts.collect import Rollouts
from rlvr_cli.train.rollouts.lag import policy_lag
from rlvr_cli.train.rollouts.sampler_process import EXIT_GRACE_S, Plan, SamplerConfig, pack, receive

PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
"""The directory holding this rlvr_cli: the sampler process imports the trainer's own code."""


def _stop(proc: subprocess.Popen, conn) -> None:
    """End the sampler process: close the socket and SIGTERM it, SIGKILL it if it is still there after the grace."""
    try:
        conn.close()
    except OSError:
        pass
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=EXIT_GRACE_S + 1.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def describe_exit(proc: subprocess.Popen) -> str:
    """How the sampler process ended, in words ("was killed by SIGKILL", "exited with status 1")."""
    try:
        code = proc.wait(timeout=2.0)
    except subprocess.TimeoutExpired:
        return "closed its end of the connection"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


class Outbox:
    """Sends this process's messages from a thread, in order, so that a handover never blocks the trainer
    on a sampler that is still starting or busy (its reading thread competes with its sampling)."""

    def __init__(self, conn):
        self.conn, self.failed = conn, False
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._run, name="sampler-outbox", daemon=True).start()

    def put(self, message: tuple) -> None:
        self.queue.put(pack(message))

    def close(self) -> None:
        self.queue.put(None)

    def _run(self) -> None:
        while True:
            data = self.queue.get()
            if data is None:
                return
            try:
                self.conn.send_bytes(data)
            except (OSError, ValueError):  # the sampler is gone, or the connection was closed
                self.failed = True
                return


class OverlappedSource:
    """Rollouts from a sampler process (the :class:`~.sources.RolloutSource` of ``overlap``); see the module docstring."""

    def __init__(self, session, versions: dict[int, dict]):
        """Start the sampler for the steps after ``session.start_step`` and hand it ``versions`` (the
        trainable tensors by version that those steps may need: the current ones, and the older ones a
        resumed run restored)."""
        from multiprocessing.connection import Connection

        self.session, self.plan = session, Plan.of(session.recipe.rollout.staleness)
        self.versions = dict(versions)
        """The versions a resumed run would need (:meth:`state`), the newest the policy's own."""
        self.newest = max(versions)
        self.early: dict[int, tuple] = {}
        ours, theirs = socket.socketpair()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (PACKAGE_ROOT, os.environ.get("PYTHONPATH")) if p)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rlvr_cli.train.rollouts.sampler_process", str(theirs.fileno()), str(os.getpid())],
            pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env,
        )
        theirs.close()
        self.conn = Connection(ours.detach())
        self._finalizer = weakref.finalize(self, _stop, self.proc, self.conn)  # also at interpreter exit
        self.outbox = Outbox(self.conn)
        t0 = time.perf_counter()
        config = SamplerConfig(session.recipe, session.start_step, self.plan, str(session.device),
                               session.autocast_dtype, torch.get_num_threads())
        self._send(("start", config), session.start_step + 1)
        for v in sorted(versions):
            self._send(("weights", v, versions[v]), session.start_step + 1)
        self.send_s = time.perf_counter() - t0
        """Seconds the last handover took in this process (the copy and its pickling; a thread sends it)."""

    @property
    def pid(self) -> int:
        return self.proc.pid

    # --- the exchange --------------------------------------------------------------------------------
    def _lost(self, step: int) -> RunFailed:
        return RunFailed(f"the sampler process (pid {self.proc.pid}) {describe_exit(self.proc)} before it sent "
                         f"step {step}'s batch; the run stopped there: continue it with --resume")

    def _send(self, message: tuple, step: int) -> None:
        if self.outbox.failed:  # the sampler is gone
            raise self._lost(step)
        self.outbox.put(message)

    def _receive(self, step: int) -> tuple:
        try:
            msg = receive(self.conn)
        except (EOFError, OSError):
            raise self._lost(step) from None
        if msg[0] == "error":
            _, kind, lines = msg
            if kind == "user":
                raise UserError(lines)
            raise RunFailed(f"the sampler process (pid {self.proc.pid}) failed at step {step}: {lines[0]} "
                            "(its traceback is above); continue with --resume")
        return msg

    def rollouts(self, step: int) -> Rollouts:
        """Step ``step``'s batch from the sampler (waiting for it if it is not done). Under bounded ``drop``
        a batch older than the bound is dropped (counted in its stats) and the step sampled again."""
        t0 = time.perf_counter()
        self._send(("took", step), step)
        dropped = 0
        while True:
            msg = self.early.pop(step, None) or self._batch(step)
            _, _, version, groups, stats, times = msg
            if policy_lag(step, version) <= self.plan.k:  # always, but under bounded `drop`
                break
            dropped += 1
            self._send(("resample", step), step)
        stats.time_wait_s = time.perf_counter() - t0
        stats.time_handover_s = self.send_s + times["load_s"]
        stats.time_sampler_idle_s = times["idle_s"]
        stats.batches_dropped = dropped
        return Rollouts(groups, stats, version)

    def _batch(self, step: int) -> tuple:
        """The next batch message of ``step``; those of later steps that come first (sent before the sampler
        read a resample request) wait in :attr:`early`."""
        while True:
            msg = self._receive(step)
            if msg[0] != "rollouts":
                continue  # "ready"
            if msg[1] == step:
                return msg
            self.early[msg[1]] = msg

    def policy_updated(self, step: int) -> None:
        """Hand the sampler the policy of version ``step``; keep the versions a resumed run needs."""
        t0 = time.perf_counter()
        self.versions[step] = trainable_tensors(self.session.model)
        self.newest = step
        self._send(("weights", step, self.versions[step]), step + 1)
        for v in [v for v in self.versions if v < self.plan.oldest(step + 1)]:
            del self.versions[v]
        self.send_s = time.perf_counter() - t0

    def state(self) -> dict:
        """The versions the next steps sample with, but the newest (the checkpoint holds the policy itself)."""
        return {"versions": {v: t for v, t in self.versions.items() if v != self.newest}}

    def close(self) -> None:
        """Stop the sampler process (idempotent)."""
        self.outbox.close()
        self._finalizer()
        self.versions.clear()
