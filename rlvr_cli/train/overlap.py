"""The overlapped rollout source: a sampler process samples and scores step t+1 while this process trains step t.

The sampler process (:mod:`.sampler_process`) holds its own copy of the policy. After each step the
trainer hands it the new weights, tagged with their version (:mod:`.handover`; the adapter's tensors
only for a LoRA policy); the sampler samples each step with the version its :class:`~.sampler_process.Plan`
names and sends the groups back. At fixed staleness k with the ``wait`` strategy step t is sampled by
exactly version max(0, t-1-k), in a process with the trainer's numerics (dtype, autocast, torch
threads) and the same keyed draws, so the run equals the in-process lagged run bit for bit; with k >= 1
sampling and training overlap. Bounded staleness lets the sampler take the newest weights it holds:
faster to react, but which version samples a step depends on timing, so such a run is not reproducible.

Cleanup: the sampler dies with the trainer (see :mod:`.sampler_process`); :meth:`OverlappedSource.close`
(called in the trainer's ``finally``, and at interpreter exit if nothing called it) stops it; a sampler
that dies or fails makes the trainer's next exchange with it fail the run with a message naming it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import weakref
from pathlib import Path

import torch

from rlvr_cli.errors import RunFailed, UserError
from rlvr_cli.train.handover import policy_weights, receive, send
from rlvr_cli.train.sampler_process import EXIT_GRACE_S, Plan, SamplerConfig

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


class OverlappedSource:
    """Rollouts from a sampler process (the :class:`~.sources.RolloutSource` of ``overlap``); see the module docstring."""

    def __init__(self, recipe, session, plan: Plan, versions: dict[int, dict]):
        """Start the sampler for the steps after ``session.start_step`` and hand it ``versions`` (the
        weights by version that those steps may need: the current ones, and older ones a resumed
        run restored)."""
        from multiprocessing.connection import Connection

        self.recipe, self.session, self.plan = recipe, session, plan
        self.kept: dict[int, dict] = dict(versions)
        """The versions a resumed run would need (:meth:`state`)."""
        self.dropped = 0
        self.times: dict[str, float] = {}
        """Seconds of the last exchange: ``wait_s`` (trainer waiting for a batch), ``handover_s`` (weights
        copied, pickled and sent), and the sampler's ``wait_weights_s`` and ``load_weights_s``."""
        ours, theirs = socket.socketpair()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (PACKAGE_ROOT, os.environ.get("PYTHONPATH")) if p)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rlvr_cli.train.sampler_process", str(theirs.fileno()), str(os.getpid())],
            pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env,
        )
        theirs.close()
        self.conn = Connection(ours.detach())
        self._finalizer = weakref.finalize(self, _stop, self.proc, self.conn)  # also at interpreter exit
        config = SamplerConfig(recipe, session.start_step, plan, str(session.device), session.autocast_dtype,
                               torch.get_num_threads())
        self._send(("start", config), session.start_step + 1)
        for v in sorted(versions):
            self._send(("weights", v, versions[v]), session.start_step + 1)

    @property
    def pid(self) -> int:
        return self.proc.pid

    # --- the exchange --------------------------------------------------------------------------------
    def _lost(self, step: int) -> RunFailed:
        return RunFailed(f"the sampler process (pid {self.proc.pid}) {describe_exit(self.proc)} before it sent "
                         f"step {step}'s batch; the run stopped there: continue it with --resume")

    def _send(self, message: tuple, step: int) -> None:
        try:
            send(self.conn, message)
        except OSError:  # BrokenPipeError, ConnectionResetError: the sampler is gone
            raise self._lost(step) from None

    def _receive(self, step: int) -> tuple:
        try:
            msg = receive(self.conn)
        except (EOFError, OSError):
            raise self._lost(step) from None
        if msg[0] == "error":
            _, kind, lines = msg
            if kind == "user":
                raise UserError(lines)
            raise RunFailed(f"the sampler process (pid {self.proc.pid}) failed at step {step}: {lines[0]}; "
                            f"continue with --resume\n{lines[1] if len(lines) > 1 else ''}".rstrip())
        return msg

    def next_batch(self, step: int) -> tuple[int, list, object]:
        """(version, groups, rollout stats) of ``step``'s batch; a bounded-``drop`` batch older than the
        bound is dropped (counted in :attr:`dropped`) and the step sampled again."""
        t0 = time.perf_counter()
        self._send(("took", step), step)
        while True:
            msg = self._receive(step)
            if msg[0] != "rollouts":
                continue  # "ready"
            _, s, version, groups, stats, times = msg
            if s != step:  # sampled before the sampler read a resample request: superseded
                continue
            if self.plan.mode == "bounded" and step - 1 - version > self.plan.staleness:
                self.dropped += 1
                self._send(("resample", step), step)
                continue
            self.times = {"wait_s": time.perf_counter() - t0, "handover_s": self.times.get("handover_s", 0.0), **times}
            return version, groups, stats

    def policy_updated(self, step: int) -> None:
        """Hand the sampler the weights after ``step`` (version ``step``); keep those a resume would need."""
        t0 = time.perf_counter()
        weights = policy_weights(self.session.model)
        self._send(("weights", step, weights), step + 1)
        self.kept[step] = weights
        for v in [v for v in self.kept if v < self.plan.oldest(step + 1)]:
            del self.kept[v]
        self.times["handover_s"] = time.perf_counter() - t0

    def close(self) -> None:
        """Stop the sampler process (idempotent)."""
        self._finalizer()
