"""`rlvr compare`: plots, seed bands and a failure-mode diagnosis across runs."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from rlvr_cli.cli.common import MAX_STEPS, check_output, console

MAX_RESAMPLES = 1_000_000
"""--resamples: each resample draws every prompt again (1e15 would hold petabytes of statistics); the
intervals settle within 1e4 (rlvr_cli/compare/paired.py), so 1e6 is a hundred times what is needed."""


def compare(
    runs: list[str] = typer.Argument(
        ..., metavar="RUN_DIR", help="Run directories, or a directory of runs (e.g. runs/).", show_default=False
    ),
    out: str = typer.Option(
        "compare", "--out", help="Output directory for compare.png/.svg, summary.md and summary.json."
    ),
    smooth: int = typer.Option(
        5,
        "--smooth",
        min=0,
        max=MAX_STEPS,
        help=(
            "Centred rolling mean over N steps in the plots (0 or 1 = off). "
            "The diagnosis always uses its own robust smoothing."
        ),
    ),
    band: str = typer.Option("minmax", "--band", help="Band across seeds: minmax (min to max) or std (mean -+ 1 std)."),
    label_by: str | None = typer.Option(
        None,
        "--label-by",
        help=(
            "Label variants by these recipe keys (comma-separated, e.g. kl.placement,clip.eps_high), "
            "or by 'name' (recipe name) or 'dir', or 'changed' (only the axes where a variant differs from "
            "the most common value: one-axis ablations against a control). Default: the recipe axes that "
            "differ between variants."
        ),
    ),
    control: str | None = typer.Option(
        None,
        "--control",
        help=(
            "The arm every other is tested against, paired by prompt (a variant label as printed, or one of "
            "its run directories). Default: the first variant."
        ),
    ),
    resamples: int = typer.Option(
        10_000, "--resamples", min=1, max=MAX_RESAMPLES,
        help="Bootstrap resamples of the paired intervals (at most 1e6: the intervals settle within 1e4)."),
    plan: float | None = typer.Option(
        None, "--plan", metavar="TARGET",
        help=("Plan before the sweep: from these (pilot) runs, the seeds per arm or held-out prompts that detect a "
              "pass@1 difference of TARGET (e.g. 0.05) with 80% power, and their CPU time (docs/statistics.md)."),
    ),
    tensorboard: str | None = typer.Option(
        None, "--tensorboard", help="Also write every run's metrics as TensorBoard event files under this directory."
    ),
) -> None:
    """Compare runs: group seeds into variants, plot them side by side, diagnose failure modes.

    Example: rlvr compare runs/grpo_s0 runs/grpo_s1 runs/dr_grpo_s0 runs/dr_grpo_s1 --out results/length
    """
    from rlvr_cli.compare import compare_runs

    check_output("--out", out, directory=True)
    result = compare_runs(runs, Path(out), smooth=smooth, band=band, label_by=label_by, control=control,
                          n_resamples=resamples, plan_target=plan)
    if tensorboard is not None:
        from rlvr_cli.trackers import write_tensorboard

        dirs = write_tensorboard([r for v in result.variants for r in v.runs], tensorboard)
        console.print(f"tensorboard: {len(dirs)} run(s) in {tensorboard} (tensorboard --logdir {tensorboard})", highlight=False)
    summary = result.summary
    table = Table(title=f"rlvr compare: {len(summary['runs'])} run(s), {len(summary['variants'])} variant(s)")
    table.add_column("variant", overflow="fold", ratio=3)
    table.add_column("seeds", justify="right")
    table.add_column("step", justify="right")
    table.add_column("pass@1", justify="right")
    ks = {v["k"] for v in summary["variants"] if v["k"] is not None}
    same_k = len(ks) == 1
    table.add_column(f"pass@{ks.pop()}" if same_k else "pass@k", justify="right")
    many = len(summary["variants"]) > 1
    if many:
        table.add_column(f"vs {escape(summary['control'])}", overflow="fold", ratio=2)
    table.add_column("vs base", overflow="fold", ratio=2)
    table.add_column("diagnosis", overflow="fold", ratio=2)
    for v in summary["variants"]:
        f = v["final"]
        table.add_row(
            escape(v["label"]),  # labels such as reward.terms=[task*1] are not markup
            str(len(v["runs"])),
            "/".join(str(s) for s in sorted(set(v["last_steps"]))),
            _mean(f["pass@1"]),
            _mean(f["pass@k"]) + (f" (k={v['k']})" if v["k"] and not same_k else ""),
            *([_against_cell(v["against_control"])] if many else []),
            _against_cell(v.get("against_base"), "-"),
            _diagnosis_cell(v["diagnosis"]),
        )
    console.print(table)
    if plan is not None:
        _print_plan(summary, plan)
    for s in summary["skipped"]:
        console.print(
            f"[yellow]skipped[/yellow] {escape(s['path'])}: {escape(s['reason'])}", highlight=False, soft_wrap=True
        )
    noted = sum(len(r["warnings"]) for r in summary["runs"]) + len(summary["warnings"])
    if noted:
        console.print(f"{noted} warning(s): see {Path(out) / 'summary.md'}", highlight=False)
    console.print(f"wrote {', '.join(str(p) for p in result.files)}", highlight=False, soft_wrap=True)


def _mean(sp: dict) -> str:
    """Mean across seeds, with the std when there are several."""
    if not sp["n"]:
        return "-"
    return f"{sp['mean']:.3f}" + (f"±{sp['std']:.3f}" if sp["std"] is not None else "")


def _against_cell(a: dict | None, missing: str = "control") -> str:
    """The verdict against the control (or the base) with the pass@1 difference, ``missing`` without one
    (`control` for the control itself)."""
    if a is None:
        return missing
    if a["refused"] is not None:
        return "[yellow]not paired[/yellow]" if missing == "control" else missing
    d = a["pass@1"]
    colour = {"better": "green", "worse": "red"}.get(a["verdict"])
    short = a["verdict"].replace(" at this budget", "")  # the rule and the budget are in summary.md
    word = f"[{colour}]{short}[/{colour}]" if colour else short
    if d["p"] is None:
        return f"{word} {d['mean']:+.3f} (no test) @{a['step']}"
    return f"{word} {d['mean']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}] MDE {d['mde']:.3f} @{a['step']}"


def _diagnosis_cell(diagnosis: dict) -> str:
    """One line per failure mode seen: `KL explosion 1/2 from 32` (red), `possible ...` (yellow)."""
    from rlvr_cli.compare.diagnose import TITLES

    lines = []
    for mode, d in diagnosis.items():
        n = d["detected"] + d["possible"] + d["none"] + d["n/a"]
        steps = ",".join(str(s) for s in d["onset_steps"])
        since = f" from {steps}" if steps else ""
        if d["detected"]:
            lines.append(f"[red]{TITLES[mode]} {d['detected']}/{n}{since}[/red]")
        elif d["possible"]:
            lines.append(f"[yellow]possible {TITLES[mode]} {d['possible']}/{n}{since}[/yellow]")
    return "\n".join(lines) or "-"


def _print_plan(summary: dict, target: float) -> None:
    """One line per arm: what detects |difference| >= target with 80% power, and its CPU time."""
    console.print(f"plan for a pass@1 difference of {target:g} (80% power, the per-arm level of this comparison):",
                  highlight=False)
    for v in summary["variants"]:
        a = v["against_control"]
        p = (a or {}).get("plan")
        if p is None:
            continue
        if p["note"] and p["seeds_per_arm"] is None and p["prompts"] is None:
            console.print(f"  {escape(v['label'])}: {escape(p['note'])}", highlight=False)
            continue
        hours = lambda s: "?" if s is None else f"{s / 3600:.1f} CPU-h"  # noqa: E731
        seeds = (f"{p['seeds_per_arm']} seeds per arm ({hours(p['cpu_seconds_seeds'])})" if p["seeds_per_arm"]
                 else "no seed count up to 4096")
        prompts = (f"{p['prompts']} prompts at the same seeds ({hours(p['cpu_seconds_prompts'])})" if p["prompts"]
                   else "no prompt count up to 4096")
        at_n = p.get("mde_at_n") or {}
        more_n = (f"; model MDE at n={'/'.join(at_n)}: {'/'.join(f'{m:.3f}' for m in at_n.values())}"
                  if at_n else "")
        console.print(f"  {escape(v['label'])}: MDE now {p['mde_now']:.3f}; {seeds}; or {prompts}{more_n}",
                      highlight=False)
