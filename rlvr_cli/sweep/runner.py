"""Run a sweep's plan through a backend: skip what is finished, resume what was started, keep going past a
failed run, stop every run resumably on Ctrl-C (or SIGTERM), record what happened in OUT/sweep.json.

The sweep never changes a run it did not start: a run directory that holds another recipe is refused
before anything runs (:func:`rlvr_cli.sweep.state.plan_states`).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from rlvr_cli.errors import UserError
from rlvr_cli.io import atomic_write_json, display_path
from rlvr_cli.sweep.local import Job, LocalBackend, open_log
from rlvr_cli.sweep.spec import Plan, PlannedRun
from rlvr_cli.sweep.state import read_run
from rlvr_cli.sweep.view import SweepView

MIN_FREE_BYTES = 256 << 20
"""Free space the sweep wants on the output's disk before it starts a run (checkpoints, logs); a disk
that fills later fails the run that hit it, which the summary names (it resumes once there is space)."""
POLL_S = 0.5
"""How often the sweep looks at its runs (their end, their metrics.jsonl)."""


@dataclass
class Outcome:
    run: PlannedRun
    state: str
    """What the run directory held at the start (new, finished, resume, extend)."""
    result: str = "not started"
    """skipped (finished before), finished, failed, interrupted (by this sweep's Ctrl-C), not started."""
    detail: str = ""
    seconds: float = 0.0
    step: int = 0
    copied: str = ""
    """How its directory was made from another run's (continuation), as a shell command; empty if not."""


@dataclass
class SweepResult:
    outcomes: list[Outcome]
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.result == "failed"]

    @property
    def complete(self) -> bool:
        return all(o.result in ("skipped", "finished") for o in self.outcomes)


def train_argv(run: PlannedRun, state: str, nproc: int) -> list[str]:
    """`train BASE --out DIR --set ... [--resume] [--nproc N]`: the run's command after `rlvr`."""
    argv = ["train", run.base, "--out", str(run.dir.absolute())]
    for item in run.overrides:
        argv += ["--set", item]
    argv += ["--resume"] if state in ("resume", "extend") else []
    return argv + (["--nproc", str(nproc)] if nproc > 1 else [])


def job_for(plan: Plan, run: PlannedRun, state: str) -> Job:
    threads = run.recipe.threads or 1
    log = plan.out.absolute() / "logs" / f"{run.name}.log"
    return Job(run.name, train_argv(run, state, plan.spec.nproc), log, cpus=threads * plan.spec.nproc,
               gpus=plan.spec.gpus, env={"OMP_NUM_THREADS": str(threads)})


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


HOW = {"new": "new", "resume": "resumed", "extend": "continued to more steps", "copy": "copied, then resumed"}
"""How the view says a run starts, by its state."""


@dataclass
class Script:
    """A command run in one slot beside the sweep's runs (`rlvr sweep --script NAME=CMD`): a pipeline of its
    own, e.g. results/r1_pipeline.sh; its output goes to ``log``."""

    name: str
    command: str
    log: Path
    result: str = "not started"
    detail: str = ""
    seconds: float = 0.0


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
    job = Job(key, [], sc.log.absolute(), cpus=1, command=["bash", "-c", sc.command])
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


def compare_argv(plan: Plan) -> list[str]:
    """The spec's comparison as `rlvr compare`'s arguments (after `rlvr`)."""
    kw = compare_kwargs(plan)
    argv = ["compare", *kw["runs"], "--out", kw["out"], "--smooth", str(kw["smooth"]), "--band", kw["band"]]
    argv += ["--label-by", kw["label_by"]] if kw["label_by"] else []
    return argv + (["--control", kw["control"]] if kw["control"] else [])


def _plan_done(items: list[_Item], i: int) -> bool:
    return all(it.outcome.result != "not started" for it in items if it.plan == i)


def _builds(plans: list[Plan], states: list[dict[str, str]]) -> dict[str, Script]:
    """A build job for every warm-started built-in model that runs to be trained start from and that is
    neither shipped nor cached yet: built once, in a slot, before its runs start (else the first run builds
    it and each other run that starts meanwhile holds a slot waiting on the build's lock)."""
    from rlvr_cli.models.builtin import needs_training

    out = {}
    for plan, st in zip(plans, states):
        for r in [*plan.needs, *plan.runs]:
            ref = r.recipe.model.name
            if st[r.name] == "finished" or ref in out or not needs_training(ref):
                continue
            code = f"from rlvr_cli.warm_start import ensure_built; ensure_built({ref!r})"
            out[ref] = Script(f"build-{ref.split(':', 1)[1]}", f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}",
                              plan.out / "logs" / f"build-{ref.split(':', 1)[1]}.log")
    return out


def run_plans(plans: list[Plan], states: list[dict[str, str]], backend, jobs: int, scripts: list[Script] = (),
              continuations: dict | None = None, compare: bool = False, build: bool = False) -> PoolResult:
    """Run every plan's unfinished runs (and the scripts) through one pool of ``jobs`` slots of ``backend``.

    The scripts are queued first (each a serial pipeline, the longest chains), then each plan's `needs`
    and runs in order. A run waits for the runs in its ``after`` (its plan's `needs`) and, when it starts
    from another run (``continuations``: run dir -> continuation.Start), for that run; work that has
    waited for another goes ahead of the work queued since the start, so that no such chain is left to
    run alone at the end. A run whose prerequisite failed fails without starting. With ``compare``,
    each plan is compared (`rlvr compare`, outside the slots) as soon as its own runs have all finished.
    With ``build``, each warm-started built-in model the runs start from is built first, by one job
    (:func:`_builds`).
    """
    continuations = continuations or {}
    items: list[_Item] = []
    results = []
    single = len(plans) == 1
    for sc in scripts:
        items.append(_Item(f"script {sc.name}", [], script=sc))
    built = _builds(plans, states) if build else {}
    for ref, sc in built.items():
        items.append(_Item(f"build {ref}", [], script=sc, marker=Path(f"build:{ref}")))
    for i, (plan, st) in enumerate(zip(plans, states)):
        outs = []
        for r in [*plan.needs, *plan.runs]:
            o = Outcome(r, st[r.name])
            outs.append(o)
            if o.state == "finished":
                o.result, o.step = "skipped", r.recipe.steps
                continue
            start = continuations.get(r.dir) if o.state == "new" else None
            after = [*r.after, *([start.src] if start is not None else [])]
            after += [Path(f"build:{r.recipe.model.name}")] if r.recipe.model.name in built else []
            items.append(_Item(r.name if single else str(r.dir), after, i, o, start=start))
        results.append(SweepResult(outs))
    finished = {o.run.dir for res in results for o in res.outcomes if o.result == "skipped"}
    failed: set[Path] = set()
    if any(it.outcome is not None for it in items):
        for plan in plans:
            check_space(plan.out)
    before = {it.key: read_run(it.outcome.run.dir, with_recipe=False).step for it in items if it.outcome}
    pending, running = list(items), {}  # key -> (item, job, start time)
    comparing: dict[int, tuple[subprocess.Popen, Path, object]] = {}
    pool = PoolResult(results, list(scripts))
    todo = [it for it in items if it.outcome]
    jobs_alone = sum(it.script is not None for it in items)  # scripts and builds: one "step" each
    view = SweepView(total_steps=sum(it.outcome.run.recipe.steps for it in todo) + jobs_alone,
                     done_steps=sum(before.values()), runs=sum(len(r.outcomes) for r in results) + jobs_alone,
                     skipped=sum(len(r.outcomes) for r in results) - len(todo))

    def settle() -> None:
        """Fail what waits on a run that failed; compare each plan whose runs have all ended."""
        changed = True
        while changed:
            changed = False
            for it in list(pending):
                bad = next((d for d in it.after if d in failed), None)
                if bad is not None:
                    pending.remove(it)
                    it.outcome.result, it.outcome.detail = "failed", f"not started: it starts after {bad}, which did not finish"
                    failed.add(it.outcome.run.dir)
                    view.ended(it.key, False, 0.0, it.outcome.detail)
                    changed = True
        if compare:
            for i, plan in enumerate(plans):
                if i in comparing or i in pool.compared or plan.compare_out is None or not _plan_done(items, i):
                    continue
                if not results[i].complete:
                    results[i].notes.append(f"not compared: {len(results[i].failed)} run(s) failed")
                    pool.compared[i] = (-1, Path())
                    continue
                log = plan.out / "logs" / "compare.log"
                try:
                    f = open_log(log, ["rlvr", *compare_argv(plan)])
                except OSError as e:
                    results[i].notes.append(f"not compared: cannot write {log}: {e.strerror or e}")
                    pool.compared[i] = (-1, log)
                    continue
                proc = subprocess.Popen([sys.executable, "-m", "rlvr_cli", *compare_argv(plan)], stdout=f,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                comparing[i] = (proc, log, f)
                view.note(f"\\[compare] {plan.spec_path} -> {plan.compare_out}")
        for i, (proc, log, f) in list(comparing.items()):
            if proc.poll() is not None:
                f.close()
                pool.compared[i] = (proc.returncode, log)
                del comparing[i]
                if proc.returncode != 0:
                    results[i].notes.append(f"its comparison failed (exit status {proc.returncode}); log: {log}")

    with _sigterm_as_interrupt(), view:
        try:
            settle()
            while pending or running or comparing:
                while len(running) < jobs:
                    ready = [it for it in pending if all(d in finished for d in it.after)]
                    if not ready:
                        break
                    # what waited on another run (a prerequisite, the run it continues) first; a model build is no such wait
                    it = next((x for x in ready if any(not str(d).startswith("build:") for d in x.after)), ready[0])
                    pending.remove(it)
                    if it.script is not None:
                        job = _start_script(it.script, it.key, backend, view)
                    else:
                        job = _start_run(plans[it.plan], it, backend, view, before[it.key])
                        if job is None:
                            failed.add(it.outcome.run.dir)
                    if job is not None:
                        running[it.key] = (it, job, time.monotonic())
                for key, rc, task_error in backend.poll() if running else ():
                    it, job, t0 = running.pop(key)
                    ok = _ended(it, job, rc, task_error, time.monotonic() - t0, view)
                    if it.outcome is not None or it.marker is not None:
                        (finished if ok else failed).add(it.marker or it.outcome.run.dir)
                for key, (it, _, _) in running.items():
                    if it.outcome is not None:
                        view.stepped(key, read_run(it.outcome.run.dir, with_recipe=False).step)
                settle()
                if pending and not running and not comparing and not any(
                        all(d in finished for d in it.after) for it in pending):
                    for it in pending:  # waits on a run this pool does not train: cannot start
                        it.outcome.result = "failed"
                        it.outcome.detail = f"not started: it waits on {', '.join(map(str, it.after))}"
                        view.ended(it.key, False, 0.0, it.outcome.detail)
                    pending.clear()
                time.sleep(POLL_S)
        except KeyboardInterrupt:
            pool.interrupted = True
            view.note(f"interrupted: stopping {len(running)} run(s); each resumes where it stopped")
            backend.interrupt()
            for it, _, t0 in running.values():
                if it.outcome is not None:
                    o = it.outcome
                    o.result, o.seconds = "interrupted", time.monotonic() - t0
                    o.step = read_run(o.run.dir, with_recipe=False).step
                else:
                    it.script.result, it.script.seconds = "interrupted", time.monotonic() - t0
            for proc, _, f in comparing.values():
                proc.wait()
                f.close()
    for i, (plan, res) in enumerate(zip(plans, results)):
        res.interrupted = pool.interrupted
        _record(plan, res)
    return pool


def run_plan(plan: Plan, states: dict[str, str], backend, jobs: int, continuations: dict | None = None) -> SweepResult:
    """Run every run of one plan that is not finished, ``jobs`` at a time, through ``backend`` (local or Ray)."""
    return run_plans([plan], [states], backend, jobs, continuations=continuations).results[0]


def _earlier_records(path: Path) -> dict[str, dict]:
    """The runs of an earlier sweep.json at ``path`` by name ({} when there is none or it is unreadable)."""
    try:
        runs = json.loads(path.read_text(encoding="utf-8")).get("runs", [])
        return {r["name"]: r for r in runs if isinstance(r, dict) and isinstance(r.get("name"), str)}
    except (OSError, ValueError, AttributeError):
        return {}


def _record(plan: Plan, result: SweepResult) -> None:
    """OUT/sweep.json: the spec, and each run's command and outcome (what a `commands.md` would say). A run
    skipped as finished keeps what an earlier sweep.json said of how it was made (`made_by`: its
    command, result and seconds), so re-running a finished sweep does not erase its timings."""
    earlier = _earlier_records(plan.out / "sweep.json")
    runs = []
    for o in result.outcomes:
        argv = [display_path(a) if os.path.isabs(a) else a for a in train_argv(o.run, o.state, plan.spec.nproc)]
        entry = {"name": o.run.name, "arm": o.run.arm, "seed": o.run.seed, "dir": display_path(o.run.dir),
                 "command": shlex.join(["rlvr", *argv]), "state": o.state, "result": o.result,
                 "detail": o.detail, "step": o.step, "seconds": round(o.seconds, 1)}
        if o.copied:
            entry["copied"] = o.copied
        before = earlier.get(o.run.name, {})
        if o.result == "skipped":
            made = before.get("made_by") or ({k: before.get(k) for k in ("command", "result", "seconds")}
                                             if before.get("result") == "finished" else None)
            if made:
                entry["made_by"] = made
        runs.append(entry)
    try:
        atomic_write_json(plan.out / "sweep.json", {"spec": display_path(plan.spec_path), "arms": plan.arms,
                                                    "control": plan.control, "interrupted": result.interrupted,
                                                    "runs": runs})
    except OSError as e:
        result.notes.append(f"could not write {plan.out / 'sweep.json'}: {e.strerror or e}")


def open_backend(name: str, address: str | None = None, timeout: float | None = None, fork: bool = True):
    """The backend called ``name`` (`local`, its runs forked from a warm server unless not ``fork``, or
    `ray`); `ray` joins ``address`` or starts Ray here."""
    if name == "local":
        if address is not None:
            raise UserError("--address: only with --backend ray")
        return LocalBackend(fork=fork)
    if name == "ray":
        from rlvr_cli.sweep.ray_backend import CONNECT_TIMEOUT_S, RayBackend

        return RayBackend(address, CONNECT_TIMEOUT_S if timeout is None else timeout)
    raise UserError(f"--backend {name}: expected local or ray")


def default_jobs(plans: Plan | list[Plan], backend: str) -> int:
    """Local: as many runs as this machine's cores hold at their thread counts; Ray: every run (Ray
    queues the tasks its cluster cannot place yet)."""
    plans = [plans] if isinstance(plans, Plan) else plans
    if backend == "ray":
        return max(1, sum(len(p.runs) + len(p.needs) for p in plans))
    widest = max((job_for(p, r, "new").cpus for p in plans for r in [*p.needs, *p.runs]), default=1)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cores // widest)


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
    """Open the backend, run the plans (and scripts) through one pool, close the backend (a Ray instance
    this started is shut down)."""
    from rlvr_cli.sweep.continuation import find_continuations

    options = options or Options()
    idle = all(s == "finished" for st in states for s in st.values()) and not scripts
    b = None if idle else open_backend(backend, address, options.timeout, options.fork)
    runs = [r for p in plans for r in [*p.needs, *p.runs]]
    try:
        return run_plans(plans, states, b, jobs or default_jobs(plans, backend), scripts,
                         find_continuations(runs) if options.continuing else None, options.compare,
                         build=backend == "local")
    finally:
        if b is not None:
            b.close()


def run_sweep(plan: Plan, states: dict[str, str], backend: str = "local", jobs: int | None = None,
              address: str | None = None, options: Options | None = None) -> SweepResult:
    """:func:`run_sweeps` of one plan, compared by the caller."""
    return run_sweeps([plan], [states], backend, jobs, address, options=options).results[0]


def compare_kwargs(plan: Plan) -> dict:
    """The comparison the spec asks for, as `rlvr compare`'s arguments. The control arm is passed as the
    directory of its first run (compare takes a run directory for its variant), which names it whatever
    ``label_by`` makes the labels."""
    c = plan.spec.compare
    control = next((str(r.dir) for r in plan.runs if r.arm == plan.control), None)
    return {"runs": [str(r.dir) for r in plan.runs], "out": str(plan.compare_out), "smooth": c.smooth,
            "band": c.band, "label_by": c.label_by, "control": control}
