"""`rlvr eval`: pass@k, maj@k and length of a model or a run's checkpoints."""

from __future__ import annotations

import typer

from rlvr_cli.errors import UserError


def evaluate(
    model: str = typer.Argument(..., help="MODEL or RUN_DIR."),
    task: str = typer.Option("arithmetic", "--task", help="Built-in task name or a recipe whose task to use."),
) -> None:
    """Evaluate. Example: rlvr eval runs/dr_grpo --task arithmetic --n 16"""
    raise UserError("rlvr eval: not implemented yet (issue 5)")
