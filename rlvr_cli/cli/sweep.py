"""`rlvr sweep`: train every arm x seed of a spec (locally or on Ray), resumably, then compare them."""

from __future__ import annotations


import typer
from rich.markup import escape
from rich.table import Table

from rlvr_cli.cli.common import console, interruptible
from rlvr_cli.errors import RunFailed, UserError


def sweep(
    spec: str = typer.Argument(..., help="Sweep spec (YAML): base recipe, arms, seeds, comparison."),
    out: str | None = typer.Option(None, "--out", help="Directory of the runs (default: the spec's out, else runs/SPEC_NAME)."),
    jobs: int | None = typer.Option(None, "--jobs", min=1, help="Runs at once (default: local, the cores over each run's threads; ray, all, as the cluster places them)."),
    threads: int | None = typer.Option(None, "--threads", min=1, help="Set every run's torch threads (its `threads` field)."),
    backend: str = typer.Option("local", "--backend", help="local (processes on this machine) or ray (a Ray task per run)."),
    address: str | None = typer.Option(None, "--address", help="Ray cluster to join (HOST:PORT, ray://HOST:PORT, auto); default: start Ray here."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the runs (arm, seed, overrides, state) and exit."),
) -> None:
    """Train a spec's arms x seeds, skipping finished runs and resuming interrupted ones, then compare them.

    Example: rlvr sweep sweeps/clip.yaml --jobs 2
    """
    from rlvr_cli.sweep.runner import run_sweep
    from rlvr_cli.sweep.spec import load_plan
    from rlvr_cli.sweep.state import plan_states

    interruptible()

    if backend not in ("local", "ray"):
        raise UserError(f"--backend {backend}: expected local or ray")
    if address is not None and backend != "ray":
        raise UserError("--address: only with --backend ray")
    plan = load_plan(spec, out, threads)
    states = plan_states(plan)
    if dry_run:
        console.print(_plan_table(plan, states))
        return
    result = run_sweep(plan, states, backend, jobs, address)
    console.print(_summary_table(result))
    for note in result.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}", highlight=False, soft_wrap=True)
    if result.interrupted:
        console.print("interrupted: run the same command again to resume", highlight=False)
        raise typer.Exit(130)
    if result.failed:
        names = ", ".join(o.run.name for o in result.failed)
        raise RunFailed(f"{len(result.failed)} of {len(result.outcomes)} run(s) failed ({names}); logs in "
                        f"{plan.out / 'logs'}; run the same command again to resume them")
    if plan.compare_out is not None:
        _compare(plan)


def _plan_table(plan, states: dict[str, str]) -> Table:
    table = Table(title=f"rlvr sweep {plan.spec_path}: {len(plan.runs)} run(s) of {len(plan.arms)} arm(s) "
                        f"from {plan.runs[0].base if plan.runs else plan.spec.base} into {plan.out}")
    for col in ("arm", "seed", "run", "overrides", "state"):
        table.add_column(col, overflow="fold", justify="right" if col == "seed" else "left")
    for r in plan.runs:
        control = " (control)" if r.arm == plan.control and plan.compare_out is not None else ""
        table.add_row(escape(r.arm + control), str(r.seed), escape(r.name), escape(" ".join(r.arm_overrides) or "-"),
                      states[r.name])
    return table


def _summary_table(result) -> Table:
    table = Table(title="rlvr sweep: " + ", ".join(
        f"{sum(o.result == k for o in result.outcomes)} {k}"
        for k in ("finished", "skipped", "failed", "interrupted", "not started")
        if any(o.result == k for o in result.outcomes)))
    for col in ("run", "was", "result", "step", "time", "detail"):
        table.add_column(col, overflow="fold", justify="right" if col in ("step", "time") else "left")
    colour = {"failed": "red", "interrupted": "yellow"}
    for o in result.outcomes:
        res = f"[{colour[o.result]}]{o.result}[/{colour[o.result]}]" if o.result in colour else o.result
        table.add_row(escape(o.run.name), o.state, res, f"{o.step}/{o.run.recipe.steps}",
                      f"{o.seconds:.0f} s" if o.seconds else "-", escape(o.detail))
    return table


def _compare(plan) -> None:
    """`rlvr compare` of every run into the spec's comparison directory (its table printed as usual)."""
    from rlvr_cli.cli.compare import compare
    from rlvr_cli.compare.paired import N_RESAMPLES
    from rlvr_cli.sweep.runner import compare_kwargs

    compare(**compare_kwargs(plan), resamples=N_RESAMPLES, tensorboard=None)
