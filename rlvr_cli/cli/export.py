"""`rlvr export RECIPE --to trl|verl`: carry a recipe to another framework."""

from __future__ import annotations

from pathlib import Path

import typer
import yaml

from rlvr_cli.cli.common import console
from rlvr_cli.errors import UserError


def comment(text: str) -> str:
    """One comment line: a line break in ``text`` (a recipe file name, a model name quoted in a warning)
    is shown escaped, so that it cannot start a line of its own (an override, YAML or Python)."""
    from rlvr_cli.bridges.export_verl import LINE_BREAKS

    return "# " + "".join(repr(c)[1:-1] if c in LINE_BREAKS else c for c in text)


def render(exp, recipe, source: str) -> str:
    """The export as text: YAML (TRL), a Python snippet (TRL, ``py``) or Hydra override lines (verl)."""
    head = [comment(f"rlvr export {source} --to {exp.target}")]
    head += [comment(f"warning: {w}") for w in exp.warnings] or ["# every knob carried exactly"]
    head += [comment(f"note: {n}") for n in exp.notes]
    if exp.target == "verl":
        from rlvr_cli.bridges.export_verl import format_value

        body = [f"{k}={format_value(v)}" for k, v in exp.settings.items()]
        return "\n".join(head + body) + "\n"
    doc = {"grpo_config": exp.settings, "rlvr_recipe": recipe.model_dump(mode="json")}
    return "\n".join(head) + "\n" + yaml.safe_dump(doc, sort_keys=False)


def render_python(exp, recipe, source: str) -> str:
    head = [comment(f"rlvr export {source} --to trl")] + [comment(f"warning: {w}") for w in exp.warnings]
    body = [
        "from trl import GRPOConfig, GRPOTrainer",
        "",
        "from rlvr_cli.bridges.trl_reward import trainer_inputs",
        "",
        f"config = GRPOConfig(**{exp.settings!r})",
        f"recipe = {recipe.model_dump(mode='json')!r}",
        "trainer = GRPOTrainer(args=config, **trainer_inputs(recipe))",
        "trainer.train()",
    ]
    return "\n".join(head + body) + "\n"


def export(
    recipe: str = typer.Argument(..., help="A shipped recipe name (e.g. dapo) or a YAML file."),
    to: str = typer.Option(..., "--to", help="Target framework: trl (GRPOConfig) or verl (Hydra overrides)."),
    out: Path | None = typer.Option(None, "--out", help="Write here instead of stdout (TRL: .yaml, or .py for a Python snippet)."),
    strict: bool = typer.Option(False, "--strict", help="Exit 2 if any knob cannot be carried exactly."),
    set_: list[str] = typer.Option([], "--set", help="Override a recipe field first (repeatable)."),
) -> None:
    """Translate an RL recipe to TRL's GRPOConfig or verl's trainer overrides; one warning line per
    knob the target cannot carry exactly (on stderr, and as comments in the output).

    Example: rlvr export dapo --to verl --out dapo.verl.txt
    """
    from rlvr_cli.bridges import TARGETS, export_recipe
    from rlvr_cli.io import atomic_write_text
    from rlvr_cli.recipe.load import load_recipe

    if to not in TARGETS:
        raise UserError(f"--to {to}: unknown target (choose from {', '.join(TARGETS)})")
    r = load_recipe(recipe, set_)
    if r.algorithm != "rl":
        raise UserError(f"{recipe}: algorithm is `{r.algorithm}`; export carries RL recipes only")
    exp = export_recipe(r, to)
    for w in exp.warnings:
        console.print(f"[yellow]warning:[/yellow] {w}", highlight=False, soft_wrap=True)
    if strict and exp.warnings:
        raise UserError(f"{recipe}: --strict: {len(exp.warnings)} knob(s) cannot be carried exactly to {to} (listed above)")
    if out is not None and out.suffix == ".py" and to == "trl":
        text = render_python(exp, r, recipe)
    else:
        text = render(exp, r, recipe)
    if out is None:
        typer.echo(text, nl=False)
    else:
        try:
            atomic_write_text(out, text)
        except OSError as e:  # a directory, a missing or read-only parent
            raise UserError(f"--out {out}: cannot write ({e.strerror or e})") from None
        console.print(f"wrote {out}", highlight=False)
