"""Run sweeps: check the output's disk, lock each output directory, open the backend, run every plan
through one pool of slots (:mod:`.pool`), close the backend.

Finished runs are skipped, started ones resumed, a failed run does not stop the others, Ctrl-C (or
SIGTERM) stops every run resumably, and OUT/sweep.json records what happened. The sweep never changes a
run it did not start: a run directory that holds another recipe is refused before anything runs
(:func:`rlvr_cli.sweep.state.plan_states`), as is any path the sweep could not write
(:mod:`rlvr_cli.sweep.preflight`).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from rlvr_cli.errors import UserError
from rlvr_cli.sweep.backend import Backend, Settings, backend_class, check_flags
from rlvr_cli.sweep.builds import model_builds
from rlvr_cli.sweep.commands import Script, compare_argv, compare_kwargs, job_for, train_argv
from rlvr_cli.sweep.lock import SweepLock
from rlvr_cli.sweep.pool import PoolResult, run_plans
from rlvr_cli.sweep.record import Outcome, SweepResult
from rlvr_cli.sweep.spec import Plan

__all__ = ["MIN_FREE_BYTES", "Options", "Outcome", "PoolResult", "Script", "SweepResult", "check_space",
           "compare_argv", "compare_kwargs", "free_bytes", "job_for", "open_backend", "run_plans", "run_sweep",
           "run_sweeps", "train_argv"]

MIN_FREE_BYTES = 256 << 20
"""Free space the sweep wants on the output's disk before it starts a run (checkpoints, logs); a disk
that fills later fails the run that hit it, which the summary names (it resumes once there is space)."""


def free_bytes(path: Path) -> int:
    """Free space of the disk ``path`` is (or would be) on."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free


def check_space(out: Path) -> None:
    """Refuse to start on a disk with less than MIN_FREE_BYTES free, naming the path and what is free."""
    try:
        free = free_bytes(out.absolute())
    except OSError as e:
        raise UserError(f"--out {out}: cannot see its disk ({e.strerror or e})") from None
    if free < MIN_FREE_BYTES:
        raise UserError(f"--out {out}: only {free >> 20} MiB free on its disk; a sweep needs at least "
                        f"{MIN_FREE_BYTES >> 20} MiB to start (runs write checkpoints); free space, "
                        "or choose another --out")


def open_backend(name: str, address: str | None = None, timeout: float | None = None, fork: bool = True) -> Backend:
    """The backend called ``name``, checked (`ray`: an address that does not answer is refused) and opened."""
    kind = backend_class(name)
    check_flags(kind, address, scripts=False)
    settings = Settings(address, timeout, fork)
    kind.check(settings)
    return kind.open(settings)


@dataclass
class Options:
    """How :func:`run_sweeps` runs its plans (the `rlvr sweep` flags)."""

    continuing: bool = True
    """Start a run that another planned run's steps begin from them (sweep/continuation.py)."""
    fork: bool = True
    """Local runs forked from a warm server (sweep/forkserver.py), else fresh processes."""
    compare: bool = False
    """Compare each plan in the pool as soon as its runs have finished (else the caller compares)."""
    timeout: float | None = None
    """Seconds to wait for a Ray address to answer (default ray_backend.CONNECT_TIMEOUT_S)."""


def run_sweeps(plans: list[Plan], states: list[dict[str, str]], backend: str = "local", jobs: int | None = None,
               address: str | None = None, scripts: list[Script] = (), options: Options | None = None) -> PoolResult:
    """Check what the backend can check and the output's disk, lock every plan's output directory
    (:mod:`.lock`), then open the backend, run the plans (and scripts) through one pool and close it
    (a Ray instance this started is shut down). Nothing is written before the lock is held."""
    from rlvr_cli.sweep.continuation import find_continuations

    options = options or Options()
    kind = backend_class(backend)
    check_flags(kind, address, bool(scripts))
    settings = Settings(address, options.timeout, options.fork)
    work = any(s != "finished" for st in states for s in st.values())
    if work or scripts:
        kind.check(settings)
    if work:
        for plan in plans:
            check_space(plan.out)
    runs = [r for p in plans for r in [*p.needs, *p.runs]]
    with SweepLock([p.out for p in plans]) as lock:
        b = kind.open(replace(settings, hold=lock.fds)) if work or scripts else None
        try:
            return run_plans(plans, states, b, jobs or kind.default_jobs([job_for(p, r, "new").cpus for p in plans
                                                                          for r in [*p.needs, *p.runs]]),
                             scripts, find_continuations(runs) if options.continuing else None, options.compare,
                             model_builds(plans, states) if kind.on_this_machine else None)
        finally:
            if b is not None:
                b.close()


def run_sweep(plan: Plan, states: dict[str, str], backend: str = "local", jobs: int | None = None,
              address: str | None = None, options: Options | None = None) -> SweepResult:
    """:func:`run_sweeps` of one plan, compared by the caller."""
    return run_sweeps([plan], [states], backend, jobs, address, options=options).results[0]
