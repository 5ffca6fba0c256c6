"""What every command shares: the console and parsing of list options."""

from __future__ import annotations

from rlvr_cli.console import console  # noqa: F401 - the commands import it from here
from rlvr_cli.errors import UserError

SEED_MIN, SEED_MAX = -(2**63), 2**64 - 1
"""The seeds torch's generators take (``manual_seed``); a --seed outside is a usage error (exit 2)."""


def parse_int_list(text: str | None, option: str) -> list[int] | None:
    """`1,2,4` -> [1, 2, 4]; a clear error naming the option otherwise."""
    if text is None or text == "":
        return None
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"{option} {text}: expected comma-separated integers, e.g. 1,2,4,8") from None
    if not values or any(v < 1 for v in values):
        raise UserError(f"{option} {text}: values must be positive integers")
    return values


def task_from_arg(arg: str):
    """--task: a built-in task name, or a recipe (shipped name or file) whose `task` section to use."""
    from rlvr_cli.recipe.load import load_recipe
    from rlvr_cli.tasks import BUILTIN_TASKS, build_task

    if arg in BUILTIN_TASKS:
        return build_task(arg)
    try:
        recipe = load_recipe(arg)
    except UserError as e:
        raise UserError(
            [f"--task {arg}: not a built-in task ({', '.join(BUILTIN_TASKS)}) nor a loadable recipe:"] + e.problems
        ) from None
    return build_task(recipe.task)
