"""`rlvr sweep`: train every arm x seed of a spec (locally or on Ray), resumably, then compare them."""

from __future__ import annotations

import re
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from rlvr_cli.cli.common import MAX_THREADS, console, interruptible
from rlvr_cli.errors import RunFailed, UserError

MAX_JOBS = 4096
"""--jobs: runs at once, each a process with its own model; as many as the recipe's torch threads at most."""


def sweep(
    specs: list[str] = typer.Argument(None, help="Sweep spec(s) (YAML): base recipe, arms, seeds, comparison; several share one pool of slots (none: --script items only)."),
    out: str | None = typer.Option(None, "--out", help="Directory of the runs (default: the spec's out, else runs/SPEC_NAME); one spec only."),
    jobs: int | None = typer.Option(None, "--jobs", min=1, max=MAX_JOBS, help="Runs at once (default: local, the cores over each run's threads; ray, all, as the cluster places them)."),
    threads: int | None = typer.Option(None, "--threads", min=1, max=MAX_THREADS, help="Set every run's torch threads (its `threads` field)."),
    overrides: list[str] = typer.Option([], "--set", help="FIELD=VALUE for every run, after the spec's own (repeatable), e.g. steps=10 for a quick pass."),
    backend: str = typer.Option("local", "--backend", help="local (processes on this machine) or ray (a Ray task per run)."),
    address: str | None = typer.Option(None, "--address", help="Ray cluster to join (HOST:PORT, ray://HOST:PORT, auto); default: start Ray here."),
    scripts: list[str] = typer.Option([], "--script", help="NAME=COMMAND: a shell command run in one slot beside the runs (local only; repeatable), output in runs/scripts/NAME.log."),
    no_continue: bool = typer.Option(False, "--no-continue", help="Train every run from step 0 (default: a run whose first steps another planned run computes starts as a copy of that run, continued with --resume)."),
    no_fork_server: bool = typer.Option(False, "--no-fork-server", help="Start every local run as a fresh process (default: forked from a server with torch imported)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the runs (arm, seed, overrides, state) and exit."),
    plan_target: float | None = typer.Option(None, "--plan", metavar="TARGET", min=1e-6, max=1.0, help="Plan before the sweep, training nothing: from pilot runs (the spec's runs trained so far, or --pilot), the seeds per arm, prompts or samples per prompt that detect a pass@1 difference of TARGET with 80% power, and their CPU time (docs/statistics.md)."),
    pilot: list[str] = typer.Option([], "--pilot", help="With --plan: run directories, or folders of them (committed results/NAME/records), to estimate from instead of the spec's own runs (repeatable)."),
) -> None:
    """Train a spec's arms x seeds, skipping finished runs and resuming interrupted ones, then compare them.

    Example: rlvr sweep sweeps/clip.yaml --jobs 2
    """
    from rlvr_cli.sweep.backend import backend_class, check_flags
    from rlvr_cli.sweep.continuation import find_continuations
    from rlvr_cli.sweep.preflight import check_outputs, check_runs
    from rlvr_cli.sweep.runner import Options, run_sweeps
    from rlvr_cli.sweep.spec import load_plan
    from rlvr_cli.sweep.state import plan_states

    interruptible()

    check_flags(backend_class(backend), address, bool(scripts))
    specs = list(specs or [])
    if not specs and not scripts:
        raise UserError("nothing to run: give a sweep spec (YAML) or --script NAME=COMMAND")
    if out is not None and len(specs) > 1:
        raise UserError(f"--out: one spec only (got {len(specs)}); each spec's `out` says where its runs go")
    script_list = _scripts(scripts, Path(out) if out is not None else Path("runs"))
    plans = [load_plan(s, out, threads, overrides) for s in specs]
    _check_distinct(plans)
    check_outputs(plans)
    states = [plan_states(p) for p in plans]
    check_runs(plans, states)
    if plan_target is not None:
        for plan in plans:
            _plan_ahead(plan, plan_target, pilot)
        return
    if pilot:
        raise UserError("--pilot: only with --plan TARGET")
    continues = {} if no_continue else find_continuations([r for p in plans for r in [*p.needs, *p.runs]])
    if dry_run:
        for plan, st in zip(plans, states):
            console.print(_plan_table(plan, st, continues))
        for sc in script_list:
            console.print(f"script {escape(sc.name)}: {escape(sc.command)}", highlight=False, soft_wrap=True)
        return
    options = Options(continuing=not no_continue, fork=not no_fork_server, compare=len(plans) > 1)
    pool = run_sweeps(plans, states, backend, jobs, address, script_list, options)
    failed, outcomes = [], []
    for plan, result in zip(plans, pool.results):
        console.print(_summary_table(result, plan if len(plans) > 1 else None))
        for note in result.notes:
            console.print(f"[yellow]note:[/yellow] {escape(note)}", highlight=False, soft_wrap=True)
        failed += [(plan, o) for o in result.failed]
        outcomes += result.outcomes
    for sc in pool.scripts:
        console.print(f"script {escape(sc.name)}: {sc.result}" + (f" in {sc.seconds:.0f} s" if sc.seconds else "")
                      + (f" ({escape(sc.detail)})" if sc.detail else ""), highlight=False, soft_wrap=True)
    if pool.interrupted:
        console.print("interrupted: run the same command again to resume", highlight=False)
        raise typer.Exit(130)
    bad_scripts = [sc.name for sc in pool.scripts if sc.result != "finished"]
    bad_compares = [plans[i].spec_path for i, (rc, _) in pool.compared.items() if rc != 0]
    if failed or bad_scripts or bad_compares:
        said = []
        if failed:
            names = ", ".join(o.run.name if len(plans) == 1 else str(o.run.dir) for _, o in failed)
            logs = ", ".join(sorted({str(p.out / "logs") for p, _ in failed}))
            said.append(f"{len(failed)} of {len(outcomes)} run(s) failed ({names}); logs in {logs}")
        if bad_scripts:
            said.append(f"script(s) {', '.join(bad_scripts)} failed (logs in runs/scripts)")
        if bad_compares:
            said.append(f"the comparison of {', '.join(map(str, bad_compares))} failed (its logs/compare.log)")
        raise RunFailed("; ".join(said) + "; run the same command again to resume")
    if len(plans) == 1 and plans[0].compare_out is not None:
        _compare(plans[0])


def _scripts(items: list[str], root: Path) -> list:
    """`--script NAME=COMMAND` items, each logged to ROOT/scripts/NAME.log (ROOT: --out, else runs/)."""
    from rlvr_cli.sweep.commands import Script

    found = []
    for item in items:
        name, sep, command = item.partition("=")
        if not sep or not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", name) or not command.strip():
            raise UserError(f"--script {item!r}: expected NAME=COMMAND (NAME letters, digits, . _ -)")
        if any(s.name == name for s in found):
            raise UserError(f"--script {name}: given twice")
        found.append(Script(name, command, root / "scripts" / f"{name}.log"))
    return found


def _check_distinct(plans) -> None:
    """Two specs of one invocation may not plan the same run directory (each would train it), nor share
    one `out` (each would write its sweep.json there)."""
    seen: dict = {}
    for plan in plans:
        for r in [*plan.needs, *plan.runs]:
            d = r.dir.absolute()
            if d in seen and seen[d] is not plan:
                raise UserError(f"{plan.spec_path}: run {r.dir} is also planned by {seen[d].spec_path}; "
                                "give one of them another `out`")
            seen[d] = plan
    outs: dict = {}
    for plan in plans:
        other = outs.setdefault(plan.out.absolute(), plan)
        if other is not plan:
            raise UserError(f"{plan.spec_path}: out {plan.out} is also the out of {other.spec_path} (each writes "
                            "its sweep.json there); give one of them another `out`")


def _plan_table(plan, states: dict[str, str], continues: dict | None = None) -> Table:
    table = Table(title=f"rlvr sweep {plan.spec_path}: {len(plan.runs)} run(s) of {len(plan.arms)} arm(s) "
                        f"from {plan.runs[0].base if plan.runs else plan.spec.base} into {plan.out}")
    for col in ("arm", "seed", "run", "overrides", "state"):
        table.add_column(col, overflow="fold", justify="right" if col == "seed" else "left")
    continues = continues or {}
    for r in [*plan.needs, *plan.runs]:
        control = " (control)" if r.arm == plan.control and plan.compare_out is not None else ""
        state = states[r.name]
        start = continues.get(r.dir) if state == "new" else None
        if start is not None:
            state += f" (from step {start.at} of {start.src})"
        elif r.after:
            state += f" (after {', '.join(map(str, r.after))})"
        table.add_row(escape(r.arm + control), str(r.seed), escape(r.name if r.arm != "needs" else str(r.dir)),
                      escape(" ".join(r.arm_overrides) or "-"), escape(state))
    return table


def _summary_table(result, plan=None) -> Table:
    table = Table(title=f"rlvr sweep{' ' + str(plan.spec_path) if plan is not None else ''}: " + ", ".join(
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


def _plan_ahead(plan, target: float, pilot: list[str]) -> None:
    """`rlvr sweep SPEC --plan TARGET`: compare the pilot runs (the spec's runs that have evaluated, or the
    --pilot folders) into a scratch folder with compare's plan, print it, and price the spec as written
    and as planned from the pilot's mean run time. Trains nothing."""
    import tempfile

    from rlvr_cli.cli.compare import _print_plan
    from rlvr_cli.compare import compare_runs
    from rlvr_cli.sweep.runner import compare_kwargs

    kw = compare_kwargs(plan)
    if pilot:
        runs = _pilot_runs(pilot)  # the spec's control arm by its run directories' names (ARM-seedK), if there
        control = next((d for d in runs if Path(d).name.rsplit("-seed", 1)[0] == plan.control), None)
    else:
        runs = [d for d in kw["runs"] if any((Path(d) / "eval").glob("*.json"))]
        control = kw["control"] if kw["control"] in runs else None
        if not runs:
            raise UserError(f"{plan.spec_path}: --plan needs pilot runs and none of the spec's {len(kw['runs'])} "
                            f"run(s) has evaluated yet: train a pilot first (this spec with `seeds: 2`, run by `rlvr sweep`) "
                            "or name one with --pilot (a folder of runs, or committed records)")
    with tempfile.TemporaryDirectory(prefix="rlvr-plan-") as scratch:
        result = compare_runs(runs, Path(scratch), smooth=kw["smooth"], band=kw["band"], label_by=kw["label_by"],
                              control=control, n_resamples=1000, plan_target=target)
    summary = result.summary
    if len(summary["variants"]) < 2:
        raise UserError(f"{plan.spec_path}: the pilot has {len(summary['variants'])} variant(s); a plan needs the "
                        "control and at least one arm with evaluated runs")
    console.print(f"pilot: {len(summary['runs'])} run(s) of {len(summary['variants'])} variant(s), control "
                  f"{escape(summary['control'])}", highlight=False)
    _print_plan(summary, target)
    seconds = [r.seconds for v in result.variants for r in v.runs if r.seconds]
    run_s = sum(seconds) / len(seconds) if seconds else None
    seeds_each = len(plan.runs) // max(1, len(plan.arms))
    plans = [(v["against_control"] or {}).get("plan") or {} for v in summary["variants"]]
    need = max((p["seeds_per_arm"] for p in plans if p.get("seeds_per_arm")), default=None)
    price = lambda runs: "?" if run_s is None else f"{runs * run_s / 3600:.1f} CPU-h"  # noqa: E731
    line = (f"the spec as written: {len(plan.runs)} run(s) ({seeds_each} seed(s) x {len(plan.arms)} arm(s)), "
            f"{price(len(plan.runs))}")
    if need:
        line += f"; every arm at {need} seeds: {need * len(plan.arms)} runs, {price(need * len(plan.arms))}"
    console.print(line + (f" (pilot mean {run_s:.0f} s per run)" if run_s else ""), highlight=False)


def _pilot_runs(paths: list[str]) -> list[str]:
    """--pilot PATH...: each a run directory (it has run.json) or a folder of them (one level down)."""
    found = []
    for p in map(Path, paths):
        if (p / "run.json").is_file():
            found.append(str(p))
        elif p.is_dir():
            found += sorted(str(d) for d in p.iterdir() if (d / "run.json").is_file())
        else:
            raise UserError(f"--pilot {p}: not a run directory (one with run.json) nor a folder of them"
                            if p.exists() else f"--pilot {p}: no such directory")
    if not found:
        raise UserError(f"--pilot {' '.join(paths)}: no run directory (one with run.json) there")
    return found


def _compare(plan) -> None:
    """`rlvr compare` of every run into the spec's comparison directory (its table printed as usual)."""
    from rlvr_cli.cli.compare import compare
    from rlvr_cli.compare.paired import N_RESAMPLES
    from rlvr_cli.sweep.runner import compare_kwargs

    compare(**compare_kwargs(plan), resamples=N_RESAMPLES, plan=None, tensorboard=None)
