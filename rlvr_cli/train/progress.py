"""A Rich progress bar for training steps, with the step's headline numbers beside it."""

from __future__ import annotations

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from rlvr_cli.console import console


def step_progress(description: str, show: bool = True) -> Progress:
    """The bar; ``show=False`` (the ranks but 0 of a distributed run) draws nothing."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[status]}"),
        console=console,
        transient=False,
        disable=not show,
    )


def fmt(x, spec: str = ".3f") -> str:
    if x is None:
        return "-"
    try:
        return format(x, spec)
    except (TypeError, ValueError):
        return str(x)
