"""`rlvr train`: run a recipe (RL or SFT) into a run directory."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from rlvr_cli.cli.common import console, interruptible
from rlvr_cli.recipe.load import load_recipe

MAX_NPROC = 256
"""--nproc: processes of this one machine (torchrun --standalone), each with its own copy of the model and
its sockets to every other; beyond a few hundred they only contend (rollout.prompts_per_step also bounds it)."""


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
    nproc: int = typer.Option(1, "--nproc", min=1, max=MAX_NPROC, help="Processes to train on (starts torchrun; see docs/runs.md \"Scaling out\")."),
) -> None:
    """Train with a recipe (RL or SFT); writes recipe.yaml, run.json, metrics.jsonl, eval/, checkpoints/.

    Example: rlvr train recipes/dr_grpo.yaml --set optim.lr=3e-4 --seed 1
    """
    import sys

    from rlvr_cli.errors import RunFailed, UserError
    from rlvr_cli.train.launch import check_launch, record_rank_failure, run_training

    interruptible()
    from rlvr_cli.train.session import default_run_dir
    from rlvr_cli.warm_start import ensure_built

    try:
        overrides = list(set_) + ([f"seed={seed}"] if seed is not None else [])
        r = load_recipe(recipe, overrides)
        check_launch(r, nproc)
        ensure_built(r.model.name, r.model.reference)
        run_dir = Path(out) if out else default_run_dir(r, seed)
        argv = ["train", recipe, "--out", str(run_dir), *(x for s in set_ for x in ("--set", s))]
        argv += (["--resume"] if resume else []) + (["--seed", str(seed)] if seed is not None else [])
        if not run_training(r, run_dir, resume, nproc, argv):
            return  # the launcher of N processes: rank 0 printed the closing table
    except (UserError, RunFailed) as e:
        if record_rank_failure(e):  # a rank under --nproc: its launcher says it, once for every rank
            sys.exit(2 if isinstance(e, UserError) else 1)
        raise
    table = closing_table(run_dir)
    if table is not None:
        console.print(table)
    console.print(f"run directory: {run_dir}", highlight=False, soft_wrap=True)
