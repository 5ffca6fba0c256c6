"""Regenerate everything in results/: train every run of every experiment, then compare them.

    python results/reproduce.py                   # all experiments, 3 seeds, 2 runs in parallel
    python results/reproduce.py --only kl entropy # some experiments
    python results/reproduce.py --dry-run         # print the commands only
    python results/reproduce.py --jobs 1 --threads 2   # one run at a time on 2 threads instead

Each experiment is a set of recipes under recipes/experiments/ (or shipped presets) trained with
seeds 0..S-1 into runs/experiments/<experiment>/<variant>-seed<k>, then
`rlvr compare` of those runs into results/<experiment>/ (figure, summary.md, summary.json), with
the exact commands written to results/<experiment>/commands.md (results/length/ is a sweep spec,
`rlvr sweep results/length/sweep.yaml`, run here as a script in one slot; its run directories and
comparison are where the spec says, whatever --runs and --results). Finished runs are skipped and
interrupted ones resumed, so the script can be stopped and restarted at any time. Runs use
--threads torch threads each (default 1); --jobs of them run side by side (default 2: on 2 cores two
one-thread runs side by side finished sooner than one two-thread run at a time, see docs/speed.md). All experiments share one pool of --jobs slots, fed the R1 pipeline, the
experiments with a prerequisite and those with a run that another run continues first: an experiment
is compared as soon as its own runs finish, and no slot idles while any run is left. Work queued late
(a continued run once its source has finished, an experiment's runs once its prerequisite or model
build is done) starts before the work that has waited since the start, so no such chain is left to
run alone at the end (`tools/replay_schedule.py` replays this scheduler with a logged regeneration's
job times). Per-run output goes to <runs>/<experiment>/<run>.log, a
comparison's to <runs>/<experiment>/compare.log, a script's to <runs>/<script>.log. Training runs
with this checkout's code (`python -m rlvr_cli`, from the repository root; the scripts get an `rlvr`
on PATH that runs it too); commands.md records them as `rlvr ...`. --set overrides every training
run (e.g. `steps=10` for a quick pass), --runs and --results put the run directories and comparisons
elsewhere (the prerequisite runs keep their paths: the recipes that start from them name them; the
R1 pipeline and inference_compute write runs/experiments/r1 and results/r1, results/inference_compute
as always). Training runs are forked from a server that has torch and transformers imported
(tools/forkserver.py: the import time saved on every run, the same numbers); --no-fork-server starts each as a
fresh `python -m rlvr_cli` instead. A run that is another planned run trained further (the same
recipe and seed with more steps: entropy/collapse is remedies/baseline run 150 steps instead of 100)
starts as a copy of that run's finished directory and continues it with `--resume`, which the
trainer allows only where the result is the longer run from step 0 (tested equal); commands.md
records the copy. Likewise a run that resets its reference every N steps (prorl/reset) starts from
step N of the same run without resets (prorl/no_reset, which saves a checkpoint there): a copy without
the later checkpoints, resumed with the resets. --no-continue trains every run from step 0. A
warm-started built-in model that an experiment's runs start from (e.g. builtin:tiny-length) is built by one
job before its runs are queued, so no run holds a slot waiting on the build's lock; the runs' step-0
evaluations of one base model are computed once and reused (the trainer's eval cache,
docs/metrics.md).
"""

from __future__ import annotations

import argparse
import atexit
import heapq
import itertools
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.forkserver import Launcher, available  # noqa: E402
from rlvr_cli.recipe.load import load_recipe  # noqa: E402
from rlvr_cli import rundir  # noqa: E402
RUNS = Path("runs/experiments")
RESULTS = Path("results")


@dataclass
class Experiment:
    name: str
    variants: dict[str, str]
    """variant name -> recipe (path or shipped name)."""
    prerequisites: list[tuple[str, str]] = field(default_factory=list)
    """(recipe, run dir) trained once before the variants (e.g. a warm start they start from)."""
    seeds: int | None = None
    compare_args: list[str] = field(default_factory=list)
    sets: list[str] = field(default_factory=list)
    """--set values for this experiment's runs (before the command line's --set)."""
    builds: list[str] = field(default_factory=list)
    """Warm-started built-in models its runs start from, built by one job before the runs are queued
    (otherwise the first run builds it and every other run that starts meanwhile holds a slot idle,
    waiting on the build's lock)."""


EXPERIMENTS = [
    Experiment(
        "length_free",
        {
            "grpo": "recipes/experiments/length_free/grpo.yaml",
            "dr_grpo": "recipes/experiments/length_free/dr_grpo.yaml",
        },
        prerequisites=[("recipes/experiments/length_free/base.yaml", "runs/experiments/length_free/base")],
    ),
    Experiment(
        "entropy",
        {
            "collapse": "recipes/experiments/entropy/collapse.yaml",
            "clip_higher": "recipes/experiments/entropy/clip_higher.yaml",
            "kl_loss": "recipes/experiments/entropy/kl_loss.yaml",
        },
    ),
    Experiment(
        "kl",
        {
            "drift": "recipes/experiments/kl/drift.yaml",
            "kl_loss": "recipes/experiments/kl/kl_loss.yaml",
            "kl_reward": "recipes/experiments/kl/kl_reward.yaml",
        },
        compare_args=["--smooth", "0"],
    ),
    Experiment(
        "spurious",
        {
            "true": "recipes/experiments/spurious/true_reward.yaml",
            "random": "recipes/experiments/spurious/random_reward.yaml",
            "incorrect": "recipes/experiments/spurious/incorrect_reward.yaml",
            "format_only": "recipes/experiments/spurious/format_reward.yaml",
        },
    ),
    Experiment(
        "variants",
        {name: f"recipes/{name}.yaml" for name in ("grpo", "dr_grpo", "dapo", "gspo", "grpo_kl_in_reward")},
        compare_args=["--label-by", "name"],
        # the shipped presets measure KL every step; here KL is logged, not judged, where it is not in the objective
        sets=["kl.track_every=10"],
    ),
    Experiment(
        "remedies",
        {
            name: f"recipes/experiments/remedies/{name}.yaml"
            for name in ("baseline", "clip_higher", "kl_loss", "entropy_bonus", "top_entropy", "clip_cov", "kl_cov",
                         "pkpo_k4", "passk_adv")
        },
        compare_args=["--label-by", "changed"],
    ),
    Experiment(
        "mismatch",
        {
            name: f"recipes/experiments/mismatch/{name}.yaml"
            for name in ("none", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask",
                         "token_truncate_tight", "sequence_mask_tight")
        },
        compare_args=["--label-by", "changed"],
    ),
    Experiment(
        "prorl",
        {"no_reset": "recipes/experiments/prorl/no_reset.yaml", "reset": "recipes/experiments/prorl/reset.yaml"},
    ),
]


def run_status(run_dir: Path) -> str | None:
    return rundir.read_status(run_dir).get("status")


OVERRIDES: list[str] = []
"""--set values for every training run (with --threads as `threads=N`)."""


def train_command(recipe: str, out: Path, seed: int | None, sets: list[str] = ()) -> list[str]:
    cmd = ["rlvr", "train", recipe, "--out", str(out)]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    for o in [*sets, *OVERRIDES]:
        cmd += ["--set", o]
    return cmd


LAUNCHER: Launcher | None = None
"""Where training runs are forked from (None: each one is a fresh process)."""


def runnable(cmd: list[str]) -> list[str]:
    """`rlvr ...` as this checkout's code: the `rlvr` on PATH may be another installation."""
    return [sys.executable, "-m", "rlvr_cli", *cmd[1:]] if cmd and cmd[0] == "rlvr" else cmd


def run_one(cmd: list[str], out: Path, dry: bool, log: list[str]) -> bool:
    """Train one run unless it is finished; resume it when it was started before."""
    log.append(shlex.join(cmd))
    status = run_status(out)
    if status == "finished":
        print(f"[skip] {out} (finished)", flush=True)
        return True
    if dry:
        print(shlex.join(cmd))
        return True
    full = cmd + (["--resume"] if (out / rundir.RECIPE).is_file() and "--resume" not in cmd else [])
    t0 = time.time()
    print(f"[start] {shlex.join(full)}", flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    log_path = out.parent / f"{out.name}.log"
    if LAUNCHER is not None:
        try:
            rc = LAUNCHER.run(full[1:], log_path, ROOT)
        except RuntimeError as e:  # the server itself died (the run can be resumed)
            print(f"[FAILED] {out}: {e}", flush=True)
            return False
    else:
        with open(log_path, "w") as f:
            rc = subprocess.run(runnable(full), cwd=ROOT, stdout=f, stderr=subprocess.STDOUT).returncode
    print(f"[{'done' if rc == 0 else f'FAILED rc={rc}'}] {out} in {time.time() - t0:.0f}s", flush=True)
    return rc == 0


def build_one(model: str, experiment: str, dry: bool) -> bool:
    """Build (and cache) a warm-started built-in model in its own process; a no-op when it is cached.
    Not in commands.md: a run builds its model itself when the cache lacks it."""
    code = f"from rlvr_cli.warm_start import ensure_built; ensure_built({model!r})"
    if dry:
        print(shlex.join([sys.executable, "-c", code]))
        return True
    t0 = time.time()
    print(f"[start] build {model}", flush=True)
    log = ROOT / RUNS / experiment / f"build-{model.split(':', 1)[-1]}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as f:
        rc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, stdout=f, stderr=subprocess.STDOUT).returncode
    print(f"[{'done' if rc == 0 else f'FAILED rc={rc}'}] build {model} in {time.time() - t0:.0f}s (log: {log})",
          flush=True)
    return rc == 0


def _length_free(recipe: str, seed: int, sets: list[str] = ()) -> tuple[str, str, int, object]:
    """What a run computes apart from its length and its name: (key, the key without the ProRL reset
    cadence, steps, recipe)."""
    ref = str(ROOT / recipe) if (ROOT / recipe).is_file() else recipe
    r = load_recipe(ref, [*sets, *OVERRIDES, f"seed={seed}"])
    d = r.model_dump(mode="json")
    for k in ("steps", "name", "description", "output_dir"):
        d.pop(k, None)
    key = json.dumps(d, sort_keys=True)
    d["kl"] = {**d["kl"], "ref_reset_every": None}
    return key, json.dumps(d, sort_keys=True), r.steps, r


def _checkpoint_steps(r) -> list[int]:
    every = r.checkpoint.every
    return sorted({*(range(every, r.steps + 1, every) if every > 0 else ()), r.steps})


class Start(NamedTuple):
    """Where a planned run starts: step ``at`` of run ``src``, whose checkpoints ``later`` come after it."""
    src: Path
    at: int
    later: tuple[str, ...] = ()


def find_continuations(experiments: list[Experiment], seeds: int) -> dict[Path, Start]:
    """Runs whose first steps another planned run computes: run dir -> where it starts (``Start``).

    - A run that is another trained further (the same recipe and seed apart from `steps` and name)
      starts from the shorter run's last step: remedies/baseline (100 steps) is entropy/collapse (150).
    - A run that resets its reference every N steps (ProRL) starts from step N of the same run without
      resets, which saves a checkpoint there: no reset falls inside the first N steps (the one at N is
      made on resuming): prorl/reset's first 100 steps are prorl/no_reset's.

    The run is then the other run's finished directory, with the checkpoints after that step removed,
    continued with `rlvr train --resume` (the trainer checks the same conditions and refuses otherwise:
    train/session.py `_continuation`). Used only where the run's evaluations would be the same (that step
    is one of its eval steps) and, where the step counts differ, the lr schedule is constant.
    """
    planned = {}
    for exp in experiments:
        for s in range(exp.seeds or seeds):
            for variant, recipe in exp.variants.items():
                try:
                    planned[RUNS / exp.name / f"{variant}-seed{s}"] = _length_free(recipe, s, exp.sets)
                except Exception:  # noqa: BLE001 (the run itself reports what is wrong with its recipe)
                    continue
    out: dict[Path, Start] = {}
    for run, (key, base, steps, r) in planned.items():
        every = r.kl.ref_reset_every
        starts = []  # (step it starts from, source)
        for other, (k, kb, st, ro) in planned.items():
            if other == run:
                continue
            if k == key and (st, str(other)) < (steps, str(run)):
                starts.append((st, other))
            elif (every and kb == base and k != key and ro.kl.ref_reset_every is None and every < steps
                  and every in _checkpoint_steps(ro)):
                starts.append((every, other))
        starts = [(at, o) for at, o in starts
                  if (at == steps or (r.eval.every > 0 and at % r.eval.every == 0))
                  and (planned[o][2] == steps or r.optim.schedule == "constant")]
        if starts:
            at, other = max(starts, key=lambda x: (x[0], str(x[1])))
            out[run] = Start(other, at, tuple(f"step_{c}" for c in _checkpoint_steps(planned[other][3]) if c > at))
    return out


CONTINUES: dict[Path, Start] = {}
"""This invocation's continuations (find_continuations)."""
COMMANDS: dict[Path, list[str]] = {}
"""Every planned run's training command, by run directory."""
_SUBMITTED: dict[Path, tuple[Future, list[str]]] = {}
_SUBMIT_LOCK = threading.RLock()


def copy_run(src: Path, dst: Path, at: int | None = None) -> None:
    """``src``'s run directory as ``dst`` (without its lock), atomically: a temp sibling, then renamed; its
    status is `copied` until the continued run starts (so a restarted script resumes it, not skips it).
    With ``at``, the checkpoints after step ``at`` are left out (`--resume` then forgets the steps logged
    after it)."""
    tmp = dst.parent / f".tmp-{dst.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    dst.parent.mkdir(parents=True, exist_ok=True)
    later = sorted(p.name for p in (src / rundir.CHECKPOINTS_DIR).glob("step_*")
                   if at is not None and p.name.split("_", 1)[1].isdigit() and int(p.name.split("_", 1)[1]) > at)
    shutil.copytree(src, tmp, ignore=lambda d, names: [rundir.LOCK_NAME] + (later if Path(d) == src / rundir.CHECKPOINTS_DIR else []))
    status = json.loads((tmp / rundir.STATUS).read_text())  # not finished: the copy is still to be trained further
    (tmp / rundir.STATUS).write_text(json.dumps({**status, "status": "copied", "copied_from": str(src),
                                              "copied_at_step": at}, indent=2))
    os.rename(tmp, dst)


def continue_one(cmd: list[str], out: Path, start: Start, dry: bool, log: list[str]) -> bool:
    """Train ``out`` from step ``start.at`` of run ``start.src``: a copy of its finished directory without
    its later checkpoints, then `--resume`."""
    src, at = start.src, start.at
    if run_status(out) is None and not (out / rundir.RECIPE).is_file():
        if not dry and run_status(src) != "finished":
            print(f"[FAILED] {out}: it starts from {src}, which did not finish", flush=True)
            return False
        copy = f"cp -r {shlex.quote(str(src))} {shlex.quote(str(out))}"
        if start.later:
            copy += " && rm -r " + " ".join(shlex.quote(str(out / rundir.CHECKPOINTS_DIR / c)) for c in start.later)
        log.append(f"{copy}  # steps 1-{at} of this run; --resume below trains the rest")
        if dry:
            print(log[-1])
        else:
            copy_run(src, out, at)
    return run_one(cmd + ["--resume"], out, dry, log)


def _relay(fut: Future, done: Future) -> None:
    if done.exception() is not None:
        fut.set_exception(done.exception())
    else:
        fut.set_result(done.result())


def _after(before: Future, fut: Future, submit, fn) -> None:
    """Queue ``fn`` once ``before`` has ended, ahead of the work queued before (``urgent``), and resolve
    ``fut`` with its outcome; whatever goes wrong (a pool already shut down after another experiment
    failed) ends ``fut`` too, so no waiter hangs."""
    def start(_: Future) -> None:
        try:
            submit(fn, urgent=True).add_done_callback(lambda done: _relay(fut, done))
        except BaseException as e:  # noqa: BLE001
            fut.set_exception(e)

    before.add_done_callback(start)


def submit_run(submit, out: Path, dry: bool, urgent: bool = False) -> tuple[Future, list[str]]:
    """Queue planned run ``out`` once (a run that another continues is asked for by both experiments),
    ahead of the work queued before it if ``urgent``; a continued run enters the queue, urgent, when the
    run it continues has ended. Returns (future, its log)."""
    with _SUBMIT_LOCK:
        if out in _SUBMITTED:
            return _SUBMITTED[out]
        cmd, log, start = COMMANDS[out], [], CONTINUES.get(out)
        if start is None:
            fut = submit(lambda: run_one(cmd, out, dry, log), urgent=urgent)
        else:
            fut = Future()
            _after(submit_run(submit, start.src, dry, urgent)[0], fut, submit,
                   lambda: continue_one(cmd, out, start, dry, log))
        _SUBMITTED[out] = (fut, log)
        return fut, log


class Slots:
    """``jobs`` slots that take the most urgent queued work first, then the oldest.

    Work queued with ``urgent`` (a continued run, queued only when the run it continues has finished;
    an experiment's runs, queued only when its prerequisite or model build is done) starts before
    everything that has waited since the start: otherwise it starts behind every run queued before
    it, and the last of it (in regeneration 4, prorl/reset, ~90 s per run) is what the other slot
    waits for at the end. Each ``submit`` hands the executor one `_next`, which runs whatever is most
    urgent when a slot frees, so every queued item runs exactly once; an executor that is shut down
    refuses the work as it would have (RuntimeError).
    """

    def __init__(self, pool: ThreadPoolExecutor):
        self.pool, self.lock, self.order = pool, threading.Lock(), itertools.count()
        self.queue: list[tuple[int, int, object, Future]] = []

    def submit(self, fn, urgent: bool = False) -> Future:
        fut: Future = Future()
        item = (0 if urgent else 1, next(self.order), fn, fut)
        with self.lock:
            heapq.heappush(self.queue, item)
            try:
                self.pool.submit(self._next)
            except BaseException:
                self.queue.remove(item)
                heapq.heapify(self.queue)
                raise
        return fut

    def _next(self) -> None:
        with self.lock:
            _, _, fn, fut = heapq.heappop(self.queue)
        if not fut.set_running_or_notify_cancel():
            return
        try:
            fut.set_result(fn())
        except BaseException as e:  # noqa: BLE001 (the waiter re-raises it)
            fut.set_exception(e)


def run_experiment(exp: Experiment, seeds: int, submit, dry: bool, ready=lambda: None) -> None:
    """Train an experiment's prerequisites (in order), then all its runs, then compare them.

    ``submit(fn)`` runs ``fn`` in a slot of the shared pool and returns a future (or runs it at once in
    a dry run); this function only waits, so several experiments can be in flight at the same time.
    ``ready()`` is called before each wait: everything that can be queued so far has been.
    """
    commands: list[str] = []
    for model in exp.builds:
        f = submit(lambda m=model: build_one(m, exp.name, dry))
        ready()
        f.result()
    for recipe, out in exp.prerequisites:
        f = submit(lambda r=recipe, o=out: run_one(train_command(r, Path(o), None), Path(o), dry, commands))
        ready()
        f.result()
    runs = [RUNS / exp.name / f"{variant}-seed{s}" for s in range(exp.seeds or seeds) for variant in exp.variants]
    # runs queued after a build or a prerequisite go ahead of the work queued meanwhile (Slots)
    late = bool(exp.builds or exp.prerequisites)
    queued = [submit_run(submit, out, dry, urgent=late) for out in runs]
    ready()
    for f, _ in queued:
        f.result()
    commands += [c for _, log in queued for c in log]
    out = RESULTS / exp.name
    compare = ["rlvr", "compare", *[str(r) for r in runs], "--out", str(out), *exp.compare_args]
    commands.append(shlex.join(compare))
    if dry:
        print(shlex.join(compare))
        return
    (ROOT / RUNS / exp.name).mkdir(parents=True, exist_ok=True)
    with open(ROOT / RUNS / exp.name / "compare.log", "w") as f:  # experiments finish interleaved: no tables here
        rc = subprocess.run(runnable(compare), cwd=ROOT, stdout=f, stderr=subprocess.STDOUT).returncode
    print(f"[{'compared' if rc == 0 else f'compare FAILED rc={rc}'}] {exp.name} -> {out} "
          f"(log: {RUNS / exp.name / 'compare.log'})", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "commands.md").write_text(
        f"# {exp.name}: the commands that produced this directory\n\n"
        "Run from the repository root (`python results/reproduce.py --only "
        f"{exp.name}` runs them all, skipping finished runs).\n\n```bash\n" + "\n".join(commands) + "\n```\n"
    )


def checkout_env() -> dict:
    """The environment for a script that calls `rlvr`: PATH starts with a shim that runs this checkout's code."""
    shim = Path(tempfile.mkdtemp(prefix="rlvr-reproduce-bin-"))
    atexit.register(shutil.rmtree, shim, True)
    exe = shim / "rlvr"
    exe.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m rlvr_cli "$@"\n')
    exe.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = f"{shim}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{env['PYTHONPATH']}" if env.get("PYTHONPATH") else str(ROOT)
    return env


def run_script(name: str, cmd: list[str], dry: bool) -> None:
    """A results script (its own pipeline of `rlvr` commands) in one slot, with this checkout's `rlvr`."""
    if dry:
        print(shlex.join(cmd))
        return
    t0 = time.time()
    print(f"[start] {name}: {shlex.join(cmd)}", flush=True)
    (ROOT / RUNS).mkdir(parents=True, exist_ok=True)
    with open(ROOT / RUNS / f"{name}.log", "w") as f:
        rc = subprocess.run(cmd, cwd=ROOT, env=checkout_env(), stdout=f, stderr=subprocess.STDOUT).returncode
    print(f"[{'done' if rc == 0 else f'FAILED rc={rc}'}] {name} in {time.time() - t0:.0f}s", flush=True)


SCRIPTS = {
    "r1": ["bash", "results/r1_pipeline.sh"],
    # a sweep spec (issue 33 moves every experiment to one); in one slot, so its runs go one at a time
    "length": [sys.executable, "-m", "rlvr_cli", "sweep", "results/length/sweep.yaml", "--jobs", "1"],
    "inference_compute": [sys.executable, "results/inference_compute.py"],
}
"""Results made by their own scripts (a serial pipeline each): one pool slot each."""
LONG_SCRIPTS = ("r1", "length")
"""Scripts that are the longest serial chains: queued first."""


def schedule(experiments: list[Experiment], scripts: list[str], continues: dict[Path, Start] | None = None) -> list:
    """The order work enters the pool: the longest serial chains first (the R1 pipeline, then experiments
    whose runs wait for a prerequisite or a model build, then those with a run that another run
    continues, e.g. prorl/no_reset -> prorl/reset), so that no core idles at the end waiting on one chain."""
    feeding = {start.src.parent for start in (continues or {}).values()}  # experiments' run directories

    def chained(e: Experiment) -> bool:
        return bool(e.prerequisites or e.builds) or RUNS / e.name in feeding

    waits = [e for e in experiments if e.prerequisites or e.builds]
    feeds = [e for e in experiments if chained(e) and e not in waits]
    return ([("script", s) for s in scripts if s in LONG_SCRIPTS] + [("experiment", e) for e in waits + feeds]
            + [("script", s) for s in scripts if s not in LONG_SCRIPTS]
            + [("experiment", e) for e in experiments if not chained(e)])


def _released(event: threading.Event, fn, *args):
    """``fn(*args)``, setting ``event`` however it ends (an error before its first wait must not hang the queue)."""
    try:
        return fn(*args)
    finally:
        event.set()


def reproduce(experiments: list[Experiment], scripts: list[str], seeds: int, jobs: int, dry: bool,
              continuing: bool = True) -> None:
    """Everything through one pool of ``jobs`` slots: every experiment's runs and every script are in flight
    together, so a slot never idles while any work is left (an experiment at a time would leave one
    core idle for its last run, and during each prerequisite and each script). With ``continuing``, a
    run that is another planned run trained further continues that run (find_continuations). A dry run
    prints the commands in order instead."""
    COMMANDS.clear(), CONTINUES.clear(), _SUBMITTED.clear()
    for exp in experiments:
        for s in range(exp.seeds or seeds):
            for variant, recipe in exp.variants.items():
                out = RUNS / exp.name / f"{variant}-seed{s}"
                COMMANDS[out] = train_command(recipe, out, s, exp.sets)
    if continuing:
        CONTINUES.update(find_continuations(experiments, seeds))
    work = schedule(experiments, scripts, CONTINUES)
    if dry:
        done = Future()
        done.set_result(None)

        def inline(fn, urgent: bool = False):
            fn()
            return done

        for kind, item in work:
            if kind == "experiment":
                print(f"== {item.name}", flush=True)
                run_experiment(item, seeds, inline, True)
            else:
                print(f"== {item}", flush=True)
                run_script(item, SCRIPTS[item], True)
        return
    with ThreadPoolExecutor(max_workers=jobs) as pool, ThreadPoolExecutor(max_workers=len(work)) as waiters:
        slots, pending = Slots(pool), []
        for kind, item in work:  # first in, first out apart from urgent work: queue in the order of `work`
            if kind == "experiment":
                queued = threading.Event()
                pending.append(waiters.submit(_released, queued, run_experiment, item, seeds, slots.submit, False,
                                              queued.set))
                queued.wait()
            else:
                pending.append(slots.submit(lambda name=item: run_script(name, SCRIPTS[name], False)))
        for f in pending:
            f.result()


def main() -> None:
    global RUNS, RESULTS, LAUNCHER
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", help="experiment names (default: all)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2, help="training runs side by side (default 2)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per run (default 1)")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="override a field of every training run (repeatable)")
    ap.add_argument("--runs", default=str(RUNS), help=f"run directories (default {RUNS})")
    ap.add_argument("--results", default=str(RESULTS), help=f"comparison outputs (default {RESULTS})")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--no-continue", action="store_true",
                    help="train every run from step 0 (default: a run that is another planned run trained further, "
                         "the same recipe and seed with more steps, continues that run's finished directory)")
    ap.add_argument("--no-fork-server", action="store_true",
                    help="start every training run as a fresh process (default: forked from a warm server)")
    args = ap.parse_args()
    RUNS, RESULTS = Path(args.runs), Path(args.results)
    OVERRIDES[:] = [f"threads={args.threads}", *args.set] if args.threads != 1 else list(args.set)
    t0 = time.time()
    names = {e.name for e in EXPERIMENTS} | set(SCRIPTS)
    unknown = set(args.only or []) - names
    if unknown:
        sys.exit(f"unknown experiment(s) {sorted(unknown)}; choose from {sorted(names)}")
    experiments = [e for e in EXPERIMENTS if not args.only or e.name in args.only]
    scripts = [name for name in SCRIPTS if not args.only or name in args.only]
    forked = not args.dry_run and not args.no_fork_server and available()
    LAUNCHER = Launcher() if forked else None
    try:
        reproduce(experiments, scripts, args.seeds, args.jobs, args.dry_run, continuing=not args.no_continue)
    finally:
        if LAUNCHER is not None:
            LAUNCHER.close()
    if not args.dry_run:
        print(f"== wall time {time.time() - t0:.0f} s (--jobs {args.jobs}, --threads {args.threads}, "
              f"{'forked from a warm server' if forked else 'a fresh process each'})", flush=True)


if __name__ == "__main__":
    main()
