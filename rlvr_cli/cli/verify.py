"""`rlvr verify`: score a JSONL of samples with a verifier."""

from __future__ import annotations

import typer

from rlvr_cli.errors import UserError


def verify(
    file: str = typer.Argument(..., help="JSONL of samples (as `rlvr sample` writes them)."),
    verifier: str | None = typer.Option(None, "--verifier", help="Verifier name (default: the samples' task's)."),
    out: str | None = typer.Option(None, "--out", help="Write scored samples here."),
) -> None:
    """Score samples. Example: rlvr verify samples.jsonl --verifier integer --out scored.jsonl"""
    raise UserError("rlvr verify: not implemented yet (issue 3)")
