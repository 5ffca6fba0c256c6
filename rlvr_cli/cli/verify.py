"""`rlvr verify`: score a JSONL of samples with a verifier (offline, e.g. for rejection sampling)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from rlvr_cli.cli.common import output_problem, console
from rlvr_cli.errors import UserError

MAX_PROBLEMS_SHOWN = 50


def _missing_reasoning_gym(what: str) -> list[str]:
    """The problem line when reasoning-gym (extra `reasoning-gym`) is not installed, as train and sample say it."""
    import importlib.util

    if importlib.util.find_spec("reasoning_gym") is not None:
        return []
    return [f"{what}: the `reasoning-gym` package is not installed; install it with: pip install 'rlvr-cli[reasoning-gym]'"]


def verify(
    file: str = typer.Argument(..., help="JSONL of samples (as `rlvr sample` writes them, or any JSONL with response and reference fields)."),
    verifier: str | None = typer.Option(None, "--verifier", help="integer, math, countdown or code (default: each line's `verifier` field)."),
    out: str | None = typer.Option(None, "--out", help="Write the scored lines here: each line plus `reward`, `outcome`, `answer`, `detail`."),
    keep: str | None = typer.Option(None, "--keep", help="Write only lines with these outcomes (comma-separated), e.g. `correct` for rejection sampling."),
    response_field: str = typer.Option("response", "--response-field", help="Field that holds the response."),
    reference_field: str = typer.Option("reference", "--reference-field", help="Field that holds the gold answer (or tests, or countdown spec)."),
    marker: str | None = typer.Option(None, "--marker", help="Answer marker (default: the line's task's, `#` for arithmetic and countdown, none for datasets)."),
    extract: str = typer.Option("boxed,gsm8k,last_number", "--extract", help="Answer extraction methods in order, for responses without a marker."),
    timeout: float = typer.Option(5.0, "--timeout", min=0.1, max=600, help="Hard wall-clock limit per check, in seconds (as reward.timeout_s)."),
    workers: int = typer.Option(0, "--workers", min=0, max=256, help="Verifier worker processes (0: one per core, at most 4; at most 256, as reward.workers)."),
) -> None:
    """Score samples and report counts per outcome. Example: rlvr verify samples.jsonl --keep correct --out sft.jsonl"""
    from rlvr_cli.io import atomic_write_jsonl
    from rlvr_cli.rewards import OUTCOMES, VERIFIERS, outcome_counts
    from rlvr_cli.rewards.extract import EXTRACT_METHODS
    from rlvr_cli.rewards.samples import read_samples, score_samples

    problems = []
    if verifier is not None and verifier not in VERIFIERS:
        problems.append(f"--verifier {verifier}: unknown (choose from {', '.join(VERIFIERS)})")
    keep_set = {k.strip() for k in keep.split(",") if k.strip()} if keep else None
    if keep_set is not None and (not keep_set or not keep_set <= set(OUTCOMES)):
        problems.append(f"--keep {keep}: outcomes are {', '.join(OUTCOMES)}")
    if keep_set is not None and out is None:
        problems.append("--keep needs --out (the file to write the kept lines to)")
    methods = [m.strip() for m in extract.split(",") if m.strip()]
    if not methods or any(m not in EXTRACT_METHODS for m in methods):
        problems.append(f"--extract {extract}: methods are {', '.join(EXTRACT_METHODS)}")
    if not Path(file).is_file():
        problems.append(f"{file}: " + ("a directory, not a JSONL file" if Path(file).is_dir() else
                                       "not a regular file" if Path(file).exists() else "no such file"))
    problems += [p for p in [output_problem("--out", out)] if p]
    if verifier == "reasoning_gym":
        problems += _missing_reasoning_gym("--verifier reasoning_gym")
    if problems:
        raise UserError(problems)

    samples, skipped = read_samples(file, verifier, response_field, reference_field, marker)
    for line in skipped[:MAX_PROBLEMS_SHOWN]:
        console.print(f"[yellow]warning:[/yellow] {file}: {line}", highlight=False, soft_wrap=True)
    if len(skipped) > MAX_PROBLEMS_SHOWN:
        console.print(f"[yellow]warning:[/yellow] {file}: ... and {len(skipped) - MAX_PROBLEMS_SHOWN} more skipped lines")
    if not samples:
        raise UserError(f"{file}: no line could be scored" + (f" ({len(skipped)} skipped)" if skipped else " (empty file)"))
    if verifier is None and any(s.verifier == "reasoning_gym" for s in samples):
        if missing := _missing_reasoning_gym(f"{file}: lines with verifier reasoning_gym"):
            raise UserError(missing)

    if any(s.verifier == "code" for s in samples):
        from rlvr_cli.rewards.sandbox import ISOLATED, isolation_level

        level, why = isolation_level()
        colour = "green" if level == ISOLATED else "yellow"
        console.print(f"code sandbox: [{colour}]{level}[/{colour}] ({why})", highlight=False)

    with Progress(TextColumn("verifying"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task("verify", total=len(samples))
        outcomes = score_samples(samples, timeout, workers, methods, progress=lambda n: bar.update(task, completed=n))

    counts = outcome_counts(outcomes)
    table = Table(title=f"{file}: {len(samples)} scored" + (f", {len(skipped)} skipped" if skipped else ""))
    table.add_column("outcome")
    table.add_column("count", justify="right")
    table.add_column("fraction", justify="right")
    for name in OUTCOMES:
        table.add_row(name, str(counts[name]), f"{counts[name] / len(samples):.3f}")
    table.add_section()
    table.add_row("accuracy", f"{counts['correct']}/{len(samples)}", f"{counts['correct'] / len(samples):.3f}")
    console.print(table)

    if out is not None:
        records = []
        for s, o in zip(samples, outcomes):
            if keep_set is None or o.outcome in keep_set:
                records.append({**s.record, "reward": o.reward, "outcome": o.outcome, "answer": o.answer, "detail": o.detail})
        atomic_write_jsonl(out, records)
        console.print(f"wrote {len(records)} lines to {out}", highlight=False)
