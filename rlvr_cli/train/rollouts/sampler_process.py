"""The sampler process of the overlapped trainer: ``python -m rlvr_cli.train.rollouts.sampler_process FD PARENT_PID``.

Started by :class:`rlvr_cli.train.rollouts.overlap.OverlappedSource` with one end of a socket pair as file
descriptor FD. It holds its own copy of the policy, samples and scores (the verifier pool runs here)
the batches of the steps ahead of the trainer, and sends each back as it is done; the trainer sends
the policy's trainable tensors after every step, tagged with their version
(:mod:`~rlvr_cli.train.rollouts.policy_versions`: the adapter's only for a LoRA policy). Which version samples
which step is the plan's choice (:class:`Plan`): at fixed staleness k exactly version max(0, t-1-k)
for step t, so that the batches are those the trainer's in-process lag samples.

Messages, trainer to sampler: ``("start", SamplerConfig)`` first, then ``("weights", version,
tensors)``, ``("took", step)`` (the trainer asked for that step's batch: the sampler may run further
ahead) and ``("resample", step)`` (a bounded ``drop`` batch was too old); sampler to trainer:
``("ready", pid)``, then per batch ``("rollouts", step, version, groups, stats, times)``, or
``("error", kind, lines)`` once (``kind`` ``user``: bad input, exit 2 in the trainer; ``internal``:
the traceback is printed on stderr, shared with the trainer). They are
pickled by :mod:`pickle` itself (a tensor's bytes are copied into the message), not by
``multiprocessing``'s pickler, whose tensor reduction hands over shared-memory file descriptors that
only a process started by ``multiprocessing`` can receive.

It never outlives the trainer: the kernel sends it SIGTERM when the trainer dies (``PR_SET_PDEATHSIG``,
Linux), a thread reading the socket sends it SIGTERM at end of input (any system: the trainer closed it
or died), and SIGTERM ends it at the next Python instruction (a watchdog ends it 5 s later whatever
it was doing). Once it is leaving (stopped, or done after reporting an error) SIGTERM is ignored, so
that the interpreter's exit runs undisturbed (and silent) under the same watchdog. Ctrl-C is the trainer's to handle: SIGINT is ignored here, and the trainer closes the
sampler on its way out.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass

from rlvr_cli.processes import die_with_parent
from rlvr_cli.train.rollouts.lag import sampling_version

EXIT_GRACE_S = 5.0
"""Seconds between the request to stop (SIGTERM) and the hard exit, if the main thread is stuck in C code."""


@dataclass(frozen=True)
class Plan:
    """Which policy version samples which step (versions: the weights after that many steps).

    ``fixed``: step t uses exactly version max(0, t-1-k) (:func:`~.lag.sampling_version`; k =
    ``rollout.staleness.max``), waiting for it; the batches are the in-process lag's, bit for bit.
    ``bounded``: step t uses the newest version the
    sampler holds once it holds one of at least t-1-k (``wait``), or whatever it holds (``drop``: the
    trainer drops a batch older than that and the step is sampled again); which version depends on
    timing, so such runs are not reproducible.
    """

    mode: str = "fixed"
    k: int = 1
    """``rollout.staleness.max``: the largest lag."""
    strategy: str = "wait"

    @classmethod
    def of(cls, spec) -> Plan:
        """The plan of a recipe's ``rollout.staleness``."""
        return cls(spec.mode, spec.max, spec.strategy)

    def oldest(self, step: int) -> int:
        """The oldest version that may sample ``step`` (the one a fixed plan samples it with)."""
        return sampling_version(step, self.k)

    def version_for(self, step: int, held: list[int]) -> int | None:
        """The version to sample ``step`` with among the ``held`` ones (ascending), or None to wait for another."""
        if not held:
            return None
        if self.mode == "fixed":
            return self.oldest(step) if self.oldest(step) in held else None
        if self.strategy == "wait" and held[-1] < self.oldest(step):
            return None
        return held[-1]

    def ahead(self, step: int, taken: int) -> bool:
        """Whether ``step`` may be sampled while the trainer has taken the batches up to ``taken``: at
        most k batches wait beyond the one in training (one more under ``drop``, which never
        waits for weights)."""
        return step <= taken + self.k + (self.mode == "bounded" and self.strategy == "drop")


@dataclass(frozen=True)
class SamplerConfig:
    """What the sampler process needs besides the weights: the run's recipe and numerics, where to start."""

    recipe: object
    start_step: int
    plan: Plan
    device: str
    autocast_dtype: object
    """The trainer session's autocast dtype (a torch.dtype or None): the sampling pass runs under the same."""
    threads: int


@dataclass
class SamplerSession:
    """What :func:`rlvr_cli.train.rollouts.collect.collect_rollouts` reads of a trainer session, in the sampler
    (:class:`~rlvr_cli.train.rollouts.collect.RolloutSession`)."""

    recipe: object
    model: object
    tokenizer: object
    autocast_dtype: object

    def full_params(self):
        return nullcontext()


def pack(message: tuple) -> bytes:
    """One message (a tuple whose first item names it), as it travels."""
    return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


def send(conn, message: tuple) -> None:
    """Send one message on a ``multiprocessing`` connection."""
    conn.send_bytes(pack(message))


def receive(conn) -> tuple:
    """The next message on ``conn`` (blocking); ``EOFError`` when the other end is closed or gone."""
    return pickle.loads(conn.recv_bytes())


class Inbox:
    """The trainer's messages, read by a thread as they come (so a large handover never blocks the
    trainer while this process samples): the weights held by version, the last step taken, a resample."""

    def __init__(self, conn):
        self.conn = conn
        self.cond = threading.Condition()
        self.config: SamplerConfig | None = None
        self.weights: dict[int, dict] = {}
        self.taken = 0
        self.resample: int | None = None
        threading.Thread(target=self._read, name="sampler-inbox", daemon=True).start()

    def _read(self) -> None:
        try:
            while True:
                msg = receive(self.conn)
                with self.cond:
                    if msg[0] == "start":
                        self.config = msg[1]
                        self.taken = self.config.start_step
                    elif msg[0] == "weights":
                        self.weights[msg[1]] = msg[2]
                    elif msg[0] == "took":
                        self.taken = max(self.taken, msg[1])
                    elif msg[0] == "resample":
                        self.resample = msg[1]
                    self.cond.notify_all()
        except (EOFError, OSError):
            pass
        _stop_soon()  # the trainer closed the socket or is gone

    def wait_config(self) -> SamplerConfig:
        with self.cond:
            while self.config is None:
                self.cond.wait(1.0)
            return self.config

    def version_for(self, step: int, plan: Plan) -> tuple[int, dict] | None:
        """Block until ``plan`` lets ``step`` be sampled; returns the version and its weights (and forgets
        the versions older than it: no later step needs them), or None when the trainer asks for a
        step again (:meth:`resampled`)."""
        with self.cond:
            while self.resample is None:
                if plan.ahead(step, self.taken):
                    v = plan.version_for(step, sorted(self.weights))
                    if v is not None:
                        for old in [u for u in self.weights if u < v]:
                            del self.weights[old]
                        return v, self.weights[v]
                self.cond.wait(1.0)
            return None

    def resampled(self, block: bool) -> int | None:
        """The step the trainer dropped and asks for again, or None (``block``: wait for such a request)."""
        with self.cond:
            while block and self.resample is None:
                self.cond.wait(1.0)
            step, self.resample = self.resample, None
            return step


def _stop_soon() -> None:
    """SIGTERM to this process (the main thread exits at its next instruction), and a hard exit later."""
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(EXIT_GRACE_S)
    os._exit(1)


def _on_sigterm(signum, frame) -> None:
    _leaving()  # once
    raise SystemExit(0)


def _leaving() -> None:
    """This process is on its way out: a later SIGTERM (the trainer's, the kernel's, the inbox's) must not
    raise SystemExit inside the interpreter's exit (an atexit callback, e.g. torch's or the reward pool's,
    would print "Exception ignored in atexit callback"), so it is ignored, and a watchdog ends the process
    :data:`EXIT_GRACE_S` later if the exit hangs."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    threading.Thread(target=_hard_exit_later, daemon=True, name="sampler-exit-watchdog").start()


def _hard_exit_later() -> None:
    time.sleep(EXIT_GRACE_S)
    os._exit(1)


def _policy(cfg: SamplerConfig):
    """The policy as the trainer's session builds it (the weights come from the trainer)."""
    from rlvr_cli.models import load_model
    from rlvr_cli.train.reference import with_adapter

    r = cfg.recipe
    model, tokenizer, _ = load_model(r.model.name, cfg.device, r.model.dtype)
    if r.model.lora is not None:
        model = with_adapter(model, r)
    model.eval()  # requires_grad stays as the trainer has it: a frozen weight takes other kernels (other last bits)
    return model, tokenizer


def serve(cfg: SamplerConfig, inbox: Inbox, conn) -> None:
    """Sample, score and send every step's batch from ``cfg.start_step + 1`` on, as the plan allows."""
    import torch

    from rlvr_cli.rewards import Scorer
    from rlvr_cli.tasks import build_task
    from rlvr_cli.train.rollouts.policy_versions import load_tensors
    from rlvr_cli.train.rollouts.collect import collect_rollouts

    torch.set_num_threads(cfg.threads)
    r = cfg.recipe
    model, tokenizer = _policy(cfg)
    task = build_task(r.task)
    scorer = Scorer(r.reward, task, seed=r.seed)
    session = SamplerSession(r, model, tokenizer, cfg.autocast_dtype)
    send(conn, ("ready", os.getpid()))
    loaded = None
    step = cfg.start_step + 1  # the next step in order; a dropped step is sampled again first
    try:
        while True:
            redo = inbox.resampled(block=step > r.steps)
            target = step if redo is None else redo
            t0 = time.perf_counter()
            got = inbox.version_for(target, cfg.plan)
            if got is None:  # a resample request came while waiting: serve it first
                continue
            version, weights = got
            t1 = time.perf_counter()
            if version != loaded:
                load_tensors(model, weights)
                loaded = version
            t2 = time.perf_counter()
            groups, stats = collect_rollouts(session, task, scorer, target)
            send(conn, ("rollouts", target, version, groups, stats, {"idle_s": t1 - t0, "load_s": t2 - t1}))
            step += redo is None
    finally:  # SIGTERM (the trainer closed the socket, stopped this process or died)
        scorer.close()


def _report(conn, message: tuple) -> None:
    try:
        send(conn, message)
    except OSError:  # the trainer is gone: nobody to tell
        pass


def main(argv: list[str] | None = None) -> None:
    import warnings
    from multiprocessing.connection import Connection

    fd, parent = (int(x) for x in (argv if argv is not None else sys.argv[1:]))
    die_with_parent(signal.SIGTERM, parent)  # _on_sigterm ends it; elsewhere the inbox's end of input does
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)
    warnings.simplefilter("ignore")  # loading the policy warns as it did in the trainer: said once is enough
    conn = Connection(fd)
    import torch  # noqa: F401 - before the inbox's thread unpickles tensors: two threads importing torch at once break it

    from rlvr_cli.errors import UserError

    inbox = Inbox(conn)

    try:
        serve(inbox.wait_config(), inbox, conn)
    except UserError as e:
        _report(conn, ("error", "user", e.problems))
    except Exception as e:  # noqa: BLE001 - reported to the trainer, which fails the run with it
        import traceback

        traceback.print_exc()  # on the trainer's stderr (inherited), for the bug report
        _report(conn, ("error", "internal", [f"{type(e).__name__}: {e}"]))
    finally:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN:  # not already leaving by SIGTERM
            _leaving()


if __name__ == "__main__":
    main()
