"""`rlvr recipes list | show | validate`."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from rlvr_cli.cli.common import console
from rlvr_cli.errors import UserError
from rlvr_cli.recipe.load import dump_recipe, list_shipped, load_recipe

app = typer.Typer(help="List, show and validate recipes.", no_args_is_help=True)


def _header(path: Path) -> str:
    """First line of a recipe's header comment (its one-line description)."""
    for line in path.read_text(encoding="utf-8").splitlines():
        s = line.strip()
        if s.startswith("#"):
            return s.lstrip("#").strip()
        if s:
            break
    return ""


@app.command("list")
def list_() -> None:
    """List the shipped recipes with their one-line description, on stdout (piped: 200 columns wide, so a
    line is not folded).

    Example: rlvr recipes list | grep dapo
    """
    from rich.console import Console

    out = Console(highlight=False)
    if not out.is_terminal:
        out = Console(highlight=False, width=200)
    table = Table(title="shipped recipes", show_lines=False)
    table.add_column("name", style="bold")
    table.add_column("description")
    for name, path in list_shipped():
        try:
            desc = load_recipe(str(path)).description or _header(path)
        except UserError as e:
            desc = f"[red]invalid:[/red] {e.problems[0]}"
        table.add_row(name, desc)
    out.print(table)  # the list is the command's data: stdout, as `recipes show` and `recipes fields`


@app.command("show")
def show(
    recipe: str = typer.Argument(..., help="A shipped recipe name (e.g. dr_grpo) or a YAML file."),
    set_: list[str] = typer.Option([], "--set", help="Override a field: --set loss.clip.eps_high=0.28 (repeatable)."),
) -> None:
    """Print the fully resolved recipe (every default written out) as YAML on stdout.

    The output is itself a valid recipe. Example: rlvr recipes show dapo > my_dapo.yaml
    """
    r = load_recipe(recipe, set_)
    typer.echo(dump_recipe(r), nl=False)


@app.command("validate")
def validate(
    files: list[str] = typer.Argument(..., help="Recipe files or shipped names."),
    set_: list[str] = typer.Option([], "--set", help="Override a field before validating (repeatable)."),
) -> None:
    """Validate recipes; print one line per problem (file:line: field: problem) and exit 2 if any fails.

    Besides the fields, what a recipe points at is checked without loading a model: a local data file
    exists and its rows read (columns, gold answers), and each `function` reward term's file or module
    imports, has the function, and takes rlvr's keywords. A Hugging Face dataset is not fetched.

    Example: rlvr recipes validate recipes/*.yaml
    """
    from rlvr_cli.models.notes import model_notes
    from rlvr_cli.rewards.scorer import check_functions
    from rlvr_cli.rewards.references import check_references

    problems: list[str] = []
    for f in files:
        try:
            r = load_recipe(f, set_)
        except UserError as e:
            problems.extend(e.problems)
            continue
        missing = check_references(r)  # data file, reward files and names (rlvr_cli/rewards/references.py)
        if missing:
            problems.extend(f"{f}: {p}" for p in missing)
            continue
        try:  # the user's reward functions: importable, and callable with rlvr's keywords (no model loads)
            check_functions(r.reward, r.task)
        except UserError as e:
            problems.extend(f"{f}: {p}" for p in e.problems)
            continue
        console.print(f"[green]ok[/green] {f}", highlight=False)
        for note in r.notes() + model_notes(r):
            console.print(f"   note: {note}", highlight=False, style="dim")
    if problems:
        raise UserError(problems)


@app.command("fields")
def fields() -> None:
    """Print the reference of every recipe field (type, default, meaning) as a Markdown table on stdout.

    Example: rlvr recipes fields > fields.md
    """
    from rlvr_cli.recipe.docs import markdown_table

    typer.echo(markdown_table(), nl=False)
