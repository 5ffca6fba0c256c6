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
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from rlvr_cli.errors import UserError
from rlvr_cli.io import atomic_write_json
from rlvr_cli.sweep.local import Job, LocalBackend
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


HOW = {"new": "new", "resume": "resumed", "extend": "continued to more steps"}
"""How the view says a run starts, by its state."""


def _start(plan: Plan, o: Outcome, backend, view: SweepView, step: int) -> Job | None:
    """Start ``o``'s run; a run whose log cannot be written (a full disk, a path that is a file) fails alone."""
    job = job_for(plan, o.run, o.state)
    try:
        backend.start(job)
    except OSError as e:
        o.result, o.detail = "failed", f"cannot write its log {job.log}: {e.strerror or e}"
        view.ended(o.run.name, False, 0.0, o.detail)
        return None
    view.started(o.run.name, step, o.run.recipe.steps, HOW[o.state])
    return job


def _ended(o: Outcome, job: Job, rc: int | None, task_error: str | None, seconds: float, view: SweepView) -> None:
    """Record how ``o``'s run ended: finished only when it exited 0 and its run.json says so."""
    disk = read_run(o.run.dir, with_recipe=False)
    o.seconds, o.step = seconds, disk.step
    view.stepped(o.run.name, disk.step)
    ok = rc == 0 and disk.status == "finished"
    o.result = "finished" if ok else "failed"
    o.detail = "" if ok else _why(job, o.run.dir, rc, task_error)
    view.ended(o.run.name, ok, seconds, o.detail)


def run_plan(plan: Plan, states: dict[str, str], backend, jobs: int) -> SweepResult:
    """Run every run that is not finished, ``jobs`` at a time, through ``backend`` (local or Ray)."""
    outcomes = {r.name: Outcome(r, states[r.name]) for r in plan.runs}
    for o in outcomes.values():
        if o.state == "finished":
            o.result, o.step = "skipped", o.run.recipe.steps
    todo = [o for o in outcomes.values() if o.state != "finished"]
    if todo:
        check_space(plan.out)
    before = {o.run.name: read_run(o.run.dir, with_recipe=False).step for o in todo}
    queue, running = deque(todo), {}  # name -> (outcome, job, start time)
    interrupted = False
    view = SweepView(total_steps=sum(o.run.recipe.steps for o in todo), done_steps=sum(before.values()),
                     runs=len(outcomes), skipped=len(outcomes) - len(todo))
    with _sigterm_as_interrupt(), view:
        try:
            while queue or running:
                while queue and len(running) < jobs:
                    o = queue.popleft()
                    job = _start(plan, o, backend, view, before[o.run.name])
                    if job is not None:
                        running[o.run.name] = (o, job, time.monotonic())
                for name, rc, task_error in backend.poll():
                    o, job, t0 = running.pop(name)
                    _ended(o, job, rc, task_error, time.monotonic() - t0, view)
                for name, (o, _, _) in running.items():
                    view.stepped(name, read_run(o.run.dir, with_recipe=False).step)
                time.sleep(POLL_S)
        except KeyboardInterrupt:
            interrupted = True
            view.note(f"interrupted: stopping {len(running)} run(s); each resumes where it stopped")
            backend.interrupt()
            for o, _, t0 in running.values():
                o.result, o.seconds = "interrupted", time.monotonic() - t0
                o.step = read_run(o.run.dir, with_recipe=False).step
    result = SweepResult(list(outcomes.values()), interrupted)
    _record(plan, result)
    return result


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
        argv = train_argv(o.run, o.state, plan.spec.nproc)
        entry = {"name": o.run.name, "arm": o.run.arm, "seed": o.run.seed, "dir": str(o.run.dir),
                 "command": shlex.join(["rlvr", *argv]), "state": o.state, "result": o.result,
                 "detail": o.detail, "step": o.step, "seconds": round(o.seconds, 1)}
        before = earlier.get(o.run.name, {})
        if o.result == "skipped":
            made = before.get("made_by") or ({k: before.get(k) for k in ("command", "result", "seconds")}
                                             if before.get("result") == "finished" else None)
            if made:
                entry["made_by"] = made
        runs.append(entry)
    try:
        atomic_write_json(plan.out / "sweep.json", {"spec": str(plan.spec_path), "arms": plan.arms,
                                                    "control": plan.control, "interrupted": result.interrupted,
                                                    "runs": runs})
    except OSError as e:
        result.notes.append(f"could not write {plan.out / 'sweep.json'}: {e.strerror or e}")


def open_backend(name: str, address: str | None = None, timeout: float | None = None):
    """The backend called ``name`` (`local` or `ray`); `ray` joins ``address`` or starts Ray here."""
    if name == "local":
        if address is not None:
            raise UserError("--address: only with --backend ray")
        return LocalBackend()
    if name == "ray":
        from rlvr_cli.sweep.ray_backend import CONNECT_TIMEOUT_S, RayBackend

        return RayBackend(address, CONNECT_TIMEOUT_S if timeout is None else timeout)
    raise UserError(f"--backend {name}: expected local or ray")


def default_jobs(plan: Plan, backend: str) -> int:
    """Local: as many runs as this machine's cores hold at their thread counts; Ray: every run (Ray
    queues the tasks its cluster cannot place yet)."""
    if backend == "ray":
        return max(1, len(plan.runs))
    widest = max((job_for(plan, r, "new").cpus for r in plan.runs), default=1)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cores // widest)


def run_sweep(plan: Plan, states: dict[str, str], backend: str = "local", jobs: int | None = None,
              address: str | None = None, timeout: float | None = None) -> SweepResult:
    """Open the backend, run the plan, close the backend (a Ray instance this started is shut down)."""
    b = None if all(s == "finished" for s in states.values()) else open_backend(backend, address, timeout)
    try:
        return run_plan(plan, states, b, jobs or default_jobs(plan, backend))
    finally:
        if b is not None:
            b.close()


def compare_kwargs(plan: Plan) -> dict:
    """The comparison the spec asks for, as `rlvr compare`'s arguments. The control arm is passed as the
    directory of its first run (compare takes a run directory for its variant), which names it whatever
    ``label_by`` makes the labels."""
    c = plan.spec.compare
    control = next((str(r.dir) for r in plan.runs if r.arm == plan.control), None)
    return {"runs": [str(r.dir) for r in plan.runs], "out": str(plan.compare_out), "smooth": c.smooth,
            "band": c.band, "label_by": c.label_by, "control": control}
