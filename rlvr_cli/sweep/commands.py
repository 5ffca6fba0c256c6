"""What a sweep runs: each run's `rlvr train` command and job, a `--script`, the `rlvr compare` of a plan."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rlvr_cli.sweep.backend import Job
from rlvr_cli.sweep.spec import Plan, PlannedRun


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

    def job(self, key: str) -> Job:
        return Job(key, [], self.log.absolute(), cpus=1, command=["bash", "-c", self.command])


def compare_kwargs(plan: Plan) -> dict:
    """The comparison the spec asks for, as `rlvr compare`'s arguments. The control arm is passed as the
    directory of its first run (compare takes a run directory for its variant), which names it whatever
    ``label_by`` makes the labels."""
    c = plan.spec.compare
    control = next((str(r.dir) for r in plan.runs if r.arm == plan.control), None)
    return {"runs": [str(r.dir) for r in plan.runs], "out": str(plan.compare_out), "smooth": c.smooth,
            "band": c.band, "label_by": c.label_by, "control": control}


def compare_argv(plan: Plan) -> list[str]:
    """The spec's comparison as `rlvr compare`'s arguments (after `rlvr`)."""
    kw = compare_kwargs(plan)
    argv = ["compare", *kw["runs"], "--out", kw["out"], "--smooth", str(kw["smooth"]), "--band", kw["band"]]
    argv += ["--label-by", kw["label_by"]] if kw["label_by"] else []
    return argv + (["--control", kw["control"]] if kw["control"] else [])
