"""`rlvr doctor`: before training, what would make a run learn nothing or mislead (rlvr_cli/evaluation/doctor.py)."""

from __future__ import annotations

import typer
from rich.markup import escape
from rich.table import Table

from rlvr_cli.cli.common import console

NO_SIGNAL_EXIT = 3
"""Exit status of a recipe that validates but whose run would learn nothing or stop."""

STYLE = {"ok": "green", "info": "dim", "warn": "yellow", "FAIL": "bold red"}


def doctor(
    recipe: str = typer.Argument(..., help="Recipe file or shipped recipe name."),
    set_: list[str] = typer.Option([], "--set", help="Override a field: --set rollout.max_new_tokens=128 (repeatable)."),
    prompts: int = typer.Option(8, "--prompts", min=1, max=1024, help="Training prompts to sample (each G times)."),
) -> None:
    """Sample the base model on the first prompts of the run's first step with the recipe's own settings,
    score them with its reward terms, and print what would make the run learn nothing or mislead:
    truncated responses, groups with zero reward spread or no learning signal, the reward per term, reward
    against accuracy, whether the true reward can be learned, with an environment how often the base calls the
    tool (warn: never), the sampling settings, and the recipe's notes.
    Every row of a file task is checked for prompts longer than the context, gold answers the verifier
    cannot read and characters the tokenizer does not know, each named by file:line.

    Exit status: 0 the run has a learning signal (warnings may be printed); 3 the run would learn nothing or
    stop (every response cut before its answer, no group with a nonzero advantage, no prompt solved in any
    sample, a prompt longer than the context, a gold answer the verifier cannot read), one
    `doctor: check: reason` line per reason; 2 bad input (the recipe, the data, a reward
    function that raises or returns garbage); 1 an internal failure.

    Example: rlvr doctor dr_grpo --set rollout.max_new_tokens=1
    """
    from rlvr_cli.evaluation.doctor import diagnose
    from rlvr_cli.recipe.load import load_recipe
    from rlvr_cli.warm_start import ensure_built

    r = load_recipe(recipe, set_)
    ensure_built(r.model.name)
    d = diagnose(r, prompts)
    g = r.rollout.group_size
    table = Table(title=f"rlvr doctor {recipe}: {d.prompts} prompts x {g} responses of {r.model.name} ({d.seconds:.0f} s)")
    for col in ("check", "value", "verdict"):
        table.add_column(col, overflow="fold")
    for f in d.findings:
        table.add_row(f.check, escape(f.value), f"[{STYLE[f.verdict]}]{f.verdict}[/]")
    console.print(table)
    if d.terms:
        terms = Table(title="reward terms (before weighting)")
        terms.add_column("term", no_wrap=True)
        for col in ("weight", "mean", "std", "min", "max", "groups varying"):
            terms.add_column(col, justify="right")
        for t in d.terms:
            terms.add_row(t.key, f"{t.weight:g}", f"{t.mean:.3f}", f"{t.std:.3f}", f"{t.low:.3g}", f"{t.high:.3g}",
                          f"{t.groups_with_spread} of {d.prompts}")
        console.print(terms)
    for s in d.samples:
        console.print(f"sample: {s['prompt']!r} -> {s['response'][:120]!r}: reward {s['reward']:.3g} ({s['outcome']})",
                      highlight=False, markup=False)
    for f in d.findings:
        if f.verdict == "warn":
            console.print(f"[yellow]warn:[/yellow] {escape(f.check)}: {escape(f.detail)}", highlight=False, soft_wrap=True)
    for note in d.notes:
        console.print(f"note: {note}", style="dim", highlight=False, markup=False)
    for line in d.failures:
        console.print(f"[red]doctor:[/red] {escape(line)}", highlight=False, soft_wrap=True)
    if d.failures:
        raise typer.Exit(NO_SIGNAL_EXIT)
