"""`rlvr train`: run a recipe (RL or SFT) into a run directory."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from rlvr_cli.cli.common import console
from rlvr_cli.errors import RunFailed, UserError
from rlvr_cli.recipe.load import load_recipe


def _launch(recipe: str, run_dir: Path, sets: list[str], resume: bool, seed: int | None, nproc: int) -> int:
    """Run this command on ``nproc`` processes of this machine under torchrun; returns its exit status."""
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           "-m", "rlvr_cli", "train", recipe, "--out", str(run_dir)]
    for s in sets:
        cmd += ["--set", s]
    cmd += (["--resume"] if resume else []) + (["--seed", str(seed)] if seed is not None else [])
    return subprocess.run(cmd, check=False).returncode


def _record_lost_rank0(run_dir: Path, nproc: int, code: int) -> None:
    """After torchrun failed: a run.json still `running` means rank 0 died before it could write why
    (killed, out of memory); every rank is gone now, so the launcher records the failure for it."""
    from rlvr_cli.train import lock
    from rlvr_cli.train.rundir import RunDir

    run = RunDir(run_dir)
    if run.read_status().get("status") != "running":
        return
    try:
        lock.acquire(run_dir)  # free once every rank is gone; held means another trainer took the run over
    except UserError:
        return
    try:
        if run.read_status().get("status") != "running":  # another trainer came and went meanwhile
            return
        run.write_status("failed", error=f"a process of the {nproc} under torchrun ended without recording why "
                                         f"(torchrun exit status {code}: rank 0 was killed or crashed); "
                                         "continue with --resume")
    finally:
        lock.release(run_dir, every_hold=True)


def _eval_files(run_dir: Path) -> list[dict]:
    files = []
    for f in (run_dir / "eval").glob("step_*.json"):
        try:
            files.append(json.loads(f.read_text(encoding="utf-8")))
        except (OSError, json.JSONDecodeError):
            continue
    return sorted(files, key=lambda e: e.get("step", 0))


def closing_table(run_dir: Path) -> Table | None:
    """Base (step 0) against the last evaluation: pass@1, pass@k at the largest k, maj@k, length."""
    evals = _eval_files(run_dir)
    if not evals:
        return None
    first, last = evals[0], evals[-1]
    kmax = max(first["pass_at_k"], key=int)
    single = len(evals) == 1
    title = f"evaluation at step {last['step']}" if single else f"base (step {first['step']}) -> step {last['step']}"
    table = Table(title=title)
    table.add_column("metric")
    if not single:
        table.add_column(f"step {first['step']}", justify="right")
    table.add_column(f"step {last['step']}", justify="right")
    if not single:
        table.add_column("change", justify="right")
    rows = [("pass@1", "1", "pass_at_k"), (f"pass@{kmax}", kmax, "pass_at_k"), (f"maj@{kmax}", kmax, "maj_at_k")]
    for label, k, key in rows:
        a, b = first.get(key, {}).get(k), last.get(key, {}).get(k)
        if a is not None and b is not None:
            table.add_row(*((label, f"{b:.3f}") if single else (label, f"{a:.3f}", f"{b:.3f}", f"{b - a:+.3f}")))
    for key in ("len_mean", "len_correct", "len_incorrect"):
        a, b = first.get(key), last.get(key)
        if a is not None and b is not None:
            table.add_row(*((key, f"{b:.1f}") if single else (key, f"{a:.1f}", f"{b:.1f}", f"{b - a:+.1f}")))
    return table


def train(
    recipe: str = typer.Argument(..., help="Recipe file or shipped recipe name."),
    out: str | None = typer.Option(None, "--out", help="Run directory (default: OUTPUT_DIR/NAME, or OUTPUT_DIR/NAME-seedN with --seed)."),
    set_: list[str] = typer.Option([], "--set", help="Override a field: --set optim.lr=3e-4 (repeatable)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run directory from its last complete checkpoint "
                                "(with a larger steps: train a finished run further; with a kl.ref_reset_every of N where the run "
                                "had none: continue a run of at most N steps as the run with resets)."),
    seed: int | None = typer.Option(None, "--seed", help="Override the recipe's seed."),
    nproc: int = typer.Option(1, "--nproc", min=1, help="Processes to train on (starts torchrun; see README \"Scaling out\")."),
) -> None:
    """Train with a recipe (RL or SFT); writes recipe.yaml, run.json, metrics.jsonl, eval/, checkpoints/.

    Example: rlvr train recipes/dr_grpo.yaml --set optim.lr=3e-4 --seed 1
    """
    import os
    from contextlib import nullcontext

    from rlvr_cli import dist
    from rlvr_cli.train.preflight import check_start, starting_run
    from rlvr_cli.train.session import default_run_dir
    from rlvr_cli.trackers import check_trackers

    overrides = list(set_) + ([f"seed={seed}"] if seed is not None else [])
    r = load_recipe(recipe, overrides)
    if nproc > 1 and dist.launched_by_torchrun():
        raise UserError("--nproc: already running under torchrun (it sets the processes); drop --nproc")
    if nproc > 1:
        dist.check_settings(r, nproc)
    from rlvr_cli.warm_start import ensure_built

    ensure_built(r.model.name, r.model.reference)
    check_trackers(r.trackers)  # a missing tracker package is exit 2 before any work
    run_dir = Path(out) if out else default_run_dir(r, seed)
    if nproc > 1:
        check_start(r, run_dir, resume)  # nothing written: rank 0 of the launched processes creates and locks
        code = _launch(recipe, run_dir, set_, resume, seed, nproc)
        if code:
            _record_lost_rank0(run_dir, nproc, code)
            raise RunFailed(f"{nproc} processes under torchrun: exit status {code} (see the ranks' messages above); "
                            "continue with --resume")
        return  # rank 0 printed the closing table
    # checked before anything is written, locked while it runs; under torchrun by rank 0, the rank that writes
    first = int(os.environ.get("RANK", "0")) == 0
    with starting_run(r, run_dir, resume) if first else nullcontext():
        if r.algorithm == "sft":
            from rlvr_cli.train.sft import train_sft

            train_sft(r, run_dir, resume=resume)
        else:
            from rlvr_cli.train.rl import train_rl

            with dist.terminated_as_failure():
                train_rl(r, run_dir, resume=resume)
                main = dist.is_main()
            if not main:  # under torchrun only rank 0 prints the closing table
                return
    table = closing_table(run_dir)
    if table is not None:
        console.print(table)
    console.print(f"run directory: {run_dir}", highlight=False, soft_wrap=True)
