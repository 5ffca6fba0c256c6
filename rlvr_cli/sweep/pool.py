"""One pool of ``--jobs`` slots for every plan's unfinished runs and the scripts: what starts when, how
each ended, what waits on what, and each plan's comparison once its runs have ended.

The loop of :func:`run_plans` reads as its steps: start what is ready, collect what ended, settle what
that decides (fail what waits on a failed run, compare a plan whose runs have all ended), fail what can
never start. Ctrl-C (or SIGTERM) stops every running job resumably; OUT/sweep.json records the end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from rlvr_cli.sweep.backend import Job
from rlvr_cli.sweep.commands import Script, compare_argv, job_for
from rlvr_cli.sweep.local import open_log
from rlvr_cli.sweep.record import Outcome, SweepResult, write_record
from rlvr_cli.sweep.spec import Plan
from rlvr_cli.sweep.state import read_run
from rlvr_cli.sweep.view import SweepView

POLL_S = 0.5
"""How often the sweep looks at its runs (their end, their metrics.jsonl)."""
HOW = {"new": "new", "resume": "resumed", "extend": "continued to more steps", "copy": "copied, then resumed"}
"""How the view says a run starts, by its state."""


@dataclass
class _Item:
    """One unit of the pool: a planned run (``outcome``) or a script; waits for the runs in ``after``."""

    key: str
    after: list[Path]
    plan: int = -1
    outcome: Outcome | None = None
    script: Script | None = None
    start: object = None
    """Where a new run starts from another (a continuation.Start), or None."""
    marker: Path | None = None
    """What the runs waiting on this script wait for (a model build's ``build:REF``), or None."""


@dataclass
class PoolResult:
    results: list[SweepResult]
    """Per plan, in order."""
    scripts: list[Script] = field(default_factory=list)
    compared: dict[int, tuple[int, Path]] = field(default_factory=dict)
    """Per plan compared in the pool: (exit status of its `rlvr compare`, its log)."""
    interrupted: bool = False


def _why(job: Job, run_dir: Path, rc: int | None, task_error: str | None) -> str:
    """The run's own last word: the CLI's error line in its log, else run.json's error, else the log's last line."""
    if task_error:
        return task_error
    if rc == 0:  # it ended well where it ran, yet this machine does not see it finished
        return (f"exit status 0, but {run_dir}/run.json here does not say finished: with Ray, --out must be "
                "a path every node sees")
    try:
        with open(job.log, "rb") as f:
            f.seek(max(0, os.path.getsize(job.log) - 16384))
            lines = [ln.strip() for ln in f.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        lines = []
    said = [ln for ln in lines if ln.startswith(("error:", "run failed:", "internal error:"))]
    disk = read_run(run_dir, with_recipe=False)
    text = said[-1] if said else disk.error or (lines[-1] if lines else "")
    return f"exit status {rc}: {text}" if text else f"exit status {rc}"


@contextmanager
def _sigterm_as_interrupt():
    """SIGTERM to the sweep (a job scheduler's stop) stops the runs as Ctrl-C does."""
    def raise_interrupt(signum, frame):
        raise KeyboardInterrupt

    try:
        old = signal.signal(signal.SIGTERM, raise_interrupt)
    except ValueError:  # not the main thread: leave SIGTERM alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def run_plans(plans: list[Plan], states: list[dict[str, str]], backend, jobs: int, scripts: list[Script] = (),
              continuations: dict | None = None, compare: bool = False,
              builds: dict[str, Script] | None = None) -> PoolResult:
    """Run every plan's unfinished runs (and the scripts) through one pool of ``jobs`` slots of ``backend``.

    The scripts are queued first (each a serial pipeline, the longest chains), then each plan's `needs`
    and runs in order. A run waits for the runs in its ``after`` (its plan's `needs`) and, when it starts
    from another run (``continuations``: run dir -> continuation.Start), for that run; work that has
    waited for another goes ahead of the work queued since the start, so that no such chain is left to
    run alone at the end. A run whose prerequisite failed fails without starting. With ``compare``,
    each plan is compared (`rlvr compare`, outside the slots) as soon as its own runs have all finished.
    ``builds`` (model reference -> its build script, :func:`rlvr_cli.sweep.builds.model_builds`) are
    run first, each before the runs that load its model.
    """
    pool = _Pool(plans, backend, jobs, compare)
    pool.queue(states, list(scripts), builds or {}, continuations or {})
    with _sigterm_as_interrupt(), pool.view:
        try:
            pool.settle()
            while pool.pending or pool.running or pool.comparing:
                pool.start_ready()
                pool.collect_ended()
                pool.settle()
                pool.fail_stuck()
                time.sleep(POLL_S)
        except KeyboardInterrupt:
            pool.interrupt()
    for plan, res in zip(plans, pool.result.results):
        res.interrupted = pool.result.interrupted
        write_record(plan, res)
    return pool.result


class _Pool:
    """The pool while it runs: queued items, running jobs (key -> item, job, start time), comparisons."""

    def __init__(self, plans: list[Plan], backend, jobs: int, compare: bool):
        self.plans, self.backend, self.jobs, self.compare = plans, backend, jobs, compare
        self.items: list[_Item] = []
        self.pending: list[_Item] = []
        self.running: dict[str, tuple[_Item, Job, float]] = {}
        self.comparing: dict[int, tuple[subprocess.Popen, Path, object]] = {}
        self.finished: set[Path] = set()
        self.failed: set[Path] = set()
        self.result = PoolResult([])
        self.before: dict[str, int] = {}
        self.view: SweepView | None = None

    # --- what the pool holds ---------------------------------------------------------------------------
    def queue(self, states: list[dict[str, str]], scripts: list[Script], builds: dict[str, Script],
              continuations: dict) -> None:
        """The items in their order (scripts, builds, then each plan's needs and runs); a finished run is
        skipped (its outcome said so) and counts as finished for what waits on it."""
        single = len(self.plans) == 1
        self.items = [_Item(f"script {sc.name}", [], script=sc) for sc in scripts]
        self.items += [_Item(f"build {ref}", [], script=sc, marker=Path(f"build:{ref}")) for ref, sc in builds.items()]
        for i, (plan, st) in enumerate(zip(self.plans, states)):
            outs = []
            for r in [*plan.needs, *plan.runs]:
                o = Outcome(r, st[r.name])
                outs.append(o)
                if o.state == "finished":
                    o.result, o.step = "skipped", r.recipe.steps
                    self.finished.add(r.dir)
                    continue
                start = continuations.get(r.dir) if o.state == "new" else None
                after = [*r.after, *([start.src] if start is not None else [])]
                after += [Path(f"build:{r.recipe.model.name}")] if r.recipe.model.name in builds else []
                self.items.append(_Item(r.name if single else str(r.dir), after, i, o, start=start))
            self.result.results.append(SweepResult(outs))
        self.result.scripts = scripts
        self.pending = list(self.items)
        self.before = {it.key: read_run(it.outcome.run.dir, with_recipe=False).step for it in self.items if it.outcome}
        todo = [it for it in self.items if it.outcome]
        alone = sum(it.script is not None for it in self.items)  # scripts and builds: one "step" each
        planned = sum(len(r.outcomes) for r in self.result.results)
        self.view = SweepView(total_steps=sum(it.outcome.run.recipe.steps for it in todo) + alone,
                              done_steps=sum(self.before.values()), runs=planned + alone, skipped=planned - len(todo))

    def _ready(self) -> list[_Item]:
        return [it for it in self.pending if all(d in self.finished for d in it.after)]

    def _plan_done(self, i: int) -> bool:
        return all(it.outcome.result != "not started" for it in self.items if it.plan == i)

    # --- the steps of the loop ---------------------------------------------------------------------------
    def start_ready(self) -> None:
        """Fill the free slots; what waited on another run (a prerequisite, the run it continues) first,
        a model build being no such wait."""
        while len(self.running) < self.jobs:
            ready = self._ready()
            if not ready:
                break
            it = next((x for x in ready if any(not str(d).startswith("build:") for d in x.after)), ready[0])
            self.pending.remove(it)
            if it.script is not None:
                job = _start_script(it.script, it.key, self.backend, self.view)
            else:
                job = _start_run(self.plans[it.plan], it, self.backend, self.view, self.before[it.key])
                if job is None:
                    self.failed.add(it.outcome.run.dir)
            if job is not None:
                self.running[it.key] = (it, job, time.monotonic())

    def collect_ended(self) -> None:
        """Record the jobs that ended; show the steps (and reward) of those still running."""
        for key, rc, task_error in self.backend.poll() if self.running else ():
            it, job, t0 = self.running.pop(key)
            ok = _ended(it, job, rc, task_error, time.monotonic() - t0, self.view)
            if it.outcome is not None or it.marker is not None:
                (self.finished if ok else self.failed).add(it.marker or it.outcome.run.dir)
        for key, (it, _, _) in self.running.items():
            if it.outcome is not None:
                disk = read_run(it.outcome.run.dir, with_recipe=False)
                self.view.running(key, disk.step, disk.reward)

    def settle(self) -> None:
        """Fail what waits on a run that failed; compare each plan whose runs have all ended."""
        self._fail_dependents()
        if self.compare:
            for i in range(len(self.plans)):
                self._compare_when_done(i)
        for i, (proc, log, f) in list(self.comparing.items()):
            if proc.poll() is not None:
                f.close()
                self.result.compared[i] = (proc.returncode, log)
                del self.comparing[i]
                if proc.returncode != 0:
                    self.result.results[i].notes.append(f"its comparison failed (exit status {proc.returncode}); log: {log}")

    def _fail_dependents(self) -> None:
        changed = True
        while changed:
            changed = False
            for it in list(self.pending):
                bad = next((d for d in it.after if d in self.failed), None)
                if bad is not None:
                    self.pending.remove(it)
                    it.outcome.result, it.outcome.detail = "failed", f"not started: it starts after {bad}, which did not finish"
                    self.failed.add(it.outcome.run.dir)
                    self.view.ended(it.key, False, 0.0, it.outcome.detail)
                    changed = True

    def _compare_when_done(self, i: int) -> None:
        """Start plan ``i``'s `rlvr compare` (outside the slots) once its runs have all ended, if all finished."""
        plan, res = self.plans[i], self.result.results[i]
        if i in self.comparing or i in self.result.compared or plan.compare_out is None or not self._plan_done(i):
            return
        if not res.complete:
            res.notes.append(f"not compared: {len(res.failed)} run(s) failed")
            self.result.compared[i] = (-1, Path())
            return
        log = plan.out / "logs" / "compare.log"
        try:
            f = open_log(log, ["rlvr", *compare_argv(plan)])
        except OSError as e:
            res.notes.append(f"not compared: cannot write {log}: {e.strerror or e}")
            self.result.compared[i] = (-1, log)
            return
        proc = subprocess.Popen([sys.executable, "-m", "rlvr_cli", *compare_argv(plan)], stdout=f,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.comparing[i] = (proc, log, f)
        self.view.note(f"\\[compare] {plan.spec_path} -> {plan.compare_out}")

    def fail_stuck(self) -> None:
        """Nothing runs and nothing waiting can start: what waits on a run this pool does not train fails."""
        if self.pending and not self.running and not self.comparing and not self._ready():
            for it in self.pending:
                it.outcome.result = "failed"
                it.outcome.detail = f"not started: it waits on {', '.join(map(str, it.after))}"
                self.view.ended(it.key, False, 0.0, it.outcome.detail)
            self.pending.clear()

    def interrupt(self) -> None:
        """Ctrl-C: stop every running job resumably and say where each stopped; let comparisons finish."""
        self.result.interrupted = True
        self.view.note(f"interrupted: stopping {len(self.running)} run(s); each resumes where it stopped")
        self.backend.interrupt()
        for it, _, t0 in self.running.values():
            if it.outcome is not None:
                o = it.outcome
                o.result, o.seconds = "interrupted", time.monotonic() - t0
                o.step = read_run(o.run.dir, with_recipe=False).step
            else:
                it.script.result, it.script.seconds = "interrupted", time.monotonic() - t0
        for proc, _, f in self.comparing.values():
            proc.wait()
            f.close()


def _start_run(plan: Plan, item: _Item, backend, view: SweepView, step: int) -> Job | None:
    """Start a planned run (first copying the run it continues, when it starts from one); a run whose copy
    or log cannot be written (a full disk, a path that is a file) fails alone."""
    from rlvr_cli.sweep.continuation import copy_command, copy_run

    o = item.outcome
    how = o.state
    if item.start is not None and o.state == "new":
        try:
            copy_run(item.start.src, o.run.dir, item.start.at)
        except OSError as e:
            o.result, o.detail = "failed", f"cannot copy {item.start.src} to start from it: {e.strerror or e}"
            view.ended(item.key, False, 0.0, o.detail)
            return None
        o.copied = f"{copy_command(item.start, o.run.dir)}  # steps 1-{item.start.at}; --resume trains the rest"
        o.state, how, step = "resume", "copy", item.start.at
    job = job_for(plan, o.run, o.state)
    job.name = item.key
    try:
        backend.start(job)
    except OSError as e:
        o.result, o.detail = "failed", f"cannot write its log {job.log}: {e.strerror or e}"
        view.ended(item.key, False, 0.0, o.detail)
        return None
    view.started(item.key, step, o.run.recipe.steps, HOW[how])
    return job


def _start_script(sc: Script, key: str, backend, view: SweepView) -> Job | None:
    job = sc.job(key)
    try:
        backend.start(job)
    except OSError as e:
        sc.result, sc.detail = "failed", f"cannot write its log {job.log}: {e.strerror or e}"
        view.ended(key, False, 0.0, sc.detail)
        return None
    view.started(key, 0, 1, "script")
    return job


def _ended(item: _Item, job: Job, rc: int | None, task_error: str | None, seconds: float, view: SweepView) -> bool:
    """Record how ``item`` ended; a run is finished only when it exited 0 and its run.json says so."""
    if item.script is not None:
        sc = item.script
        sc.seconds, sc.result = seconds, "finished" if rc == 0 else "failed"
        sc.detail = "" if rc == 0 else f"exit status {rc}; its log: {sc.log}"
        view.stepped(item.key, 1)
        view.ended(item.key, rc == 0, seconds, sc.detail)
        return rc == 0
    o = item.outcome
    disk = read_run(o.run.dir, with_recipe=False)
    o.seconds, o.step = seconds, disk.step
    view.stepped(item.key, disk.step)
    ok = rc == 0 and disk.status == "finished"
    o.result = "finished" if ok else "failed"
    o.detail = "" if ok else _why(job, o.run.dir, rc, task_error)
    view.ended(item.key, ok, seconds, o.detail)
    return ok
