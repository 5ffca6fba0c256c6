"""`rlvr models list | rebuild`: the built-in models, and whether this machine builds the shipped bits."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from rlvr_cli.cli.common import console
from rlvr_cli.errors import UserError

app = typer.Typer(help="The built-in models: list them, or rebuild a shipped one and compare.", no_args_is_help=True)

DIFFERS_EXIT = 3
"""`rlvr models rebuild` exit status when a rebuild differs from the shipped weights."""


@app.command("list")
def list_() -> None:
    """The built-in models: shipped (the same bits on every machine) or built on first use, with the
    fingerprint run.json records as `base_weights` and the recipe that makes each.

    Example: rlvr models list
    """
    from rlvr_cli.models.builtin import WARM_START_RECIPES, shipped_manifest

    table = Table(title="built-in models", show_lines=False)
    for col in ("name", "weights", "recipe", "fingerprint (base_weights)", "pass@1 at build"):
        table.add_column(col)
    shipped = shipped_manifest()
    for name in dict.fromkeys([*shipped, *WARM_START_RECIPES]):
        entry = shipped.get(name)
        recipe = (entry or {}).get("recipe") or WARM_START_RECIPES.get(name) or "seeded init"
        if entry:
            pass1 = (entry.get("pass_at_k") or {}).get("1")
            table.add_row(f"builtin:{name}", "shipped", recipe, entry["weights"],
                          "" if pass1 is None else f"{pass1:.3f}")
        else:
            table.add_row(f"builtin:{name}", "built on first use", recipe, "recorded by each run", "")
    out = Console()
    if not out.is_terminal:  # a pipe gets whole rows (rich would wrap them at 80 columns)
        out = Console(width=200)
    out.print(table)


@app.command("rebuild")
def rebuild(
    names: list[str] = typer.Argument(..., help="Shipped models to rebuild (tiny, builtin:tiny-countdown, ...) or `all`."),
    write: bool = typer.Option(False, "--write", help="Replace the shipped weights with this build (after a recipe "
                               "change; commit rlvr_cli/models/weights/ and re-record what depends on them)."),
    keep: Path | None = typer.Option(None, "--keep", help="Keep the rebuilt model directories here."),
) -> None:
    """Train shipped built-in models again from their recipes and say whether this machine's build equals
    the shipped weights, bit for bit. A build is minutes per model (tiny: about 1.5 on one core).
    Exit status 3 when a build differs (see docs/reproducibility.md for what makes builds differ).

    Example: rlvr models rebuild tiny
    """
    from rlvr_cli.models.builtin import shipped_manifest
    from rlvr_cli.warm_start import compare_with_shipped, rebuild as rebuild_model, ship

    shipped = shipped_manifest()
    wanted = list(shipped) if names == ["all"] else [n.removeprefix("builtin:") for n in names]
    unknown = [n for n in wanted if n not in shipped]
    if unknown:
        raise UserError(f"{', '.join(unknown)}: not a shipped built-in model (shipped: {', '.join(shipped)}, or all)")
    work = Path(tempfile.mkdtemp(prefix="rlvr-rebuild-"))
    differ = []
    try:
        for name in wanted:
            model_dir = rebuild_model(name, work)
            same, fingerprint, max_diff = compare_with_shipped(name, model_dir)
            verdict = "equal to the shipped weights" if same else f"DIFFERS (max |dw| {max_diff:.3g})"
            console.print(f"builtin:{name}: this machine built {fingerprint}, shipped "
                          f"{shipped[name]['weights']}: {verdict}", highlight=False)
            if not same:
                differ.append(name)
            if write and not same:
                ship(name, model_dir)
                console.print(f"builtin:{name}: shipped weights replaced by this build", highlight=False)
            if keep is not None:
                keep.mkdir(parents=True, exist_ok=True)
                shutil.copytree(model_dir, keep / name, dirs_exist_ok=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if differ and not write:
        sys.exit(DIFFERS_EXIT)
