"""What a recipe points at outside itself exists and fits, checked without loading a model
(`rlvr recipes validate`): the data files, the rows (read as the run reads them), and each ``function``
reward term's module, function and signature.

A local data file (``.jsonl``/``.json``/``.parquet``/``.csv``) is read whole, so a bad line, a missing
column or a gold answer that cannot be extracted is named as training would name it, and a gold answer
the verifier cannot read (:func:`gold_problem`) by its line. A Hugging Face
dataset name is not fetched (that needs the network): `rlvr doctor` reads it. A function term's module is
imported as the scorer imports it before a run samples anything: in a child process under a time and memory
limit (:mod:`rlvr_cli.checked_import`), so a module that hangs or exits at import is a problem
named here, not a hang of `rlvr recipes validate` or `rlvr sweep`. The environment's factory and tools
(``environment.factory``, ``environment.tools``) are imported in this process and one environment is built.
"""

from __future__ import annotations

import re
from pathlib import Path

from rlvr_cli.errors import UserError
from rlvr_cli.recipe.schema import Recipe
from rlvr_cli.rewards.function import PASSED
from rlvr_cli.checked_import import check_importable
from rlvr_cli.tasks import build_task
from rlvr_cli.tasks.dataset import LOCAL_FORMATS


NAMED = 3
"""Rows with an unreadable gold answer named (then a count of the others)."""
_FLOAT_INT = re.compile(r"[+-]?\d+\.0+")


def gold_problem(verifier: str, gold: str) -> str | None:
    """Why ``verifier`` cannot read the gold answer ``gold``, or None when it can (or the verifier takes
    any text as a gold: `math` compares a gold it cannot parse as text). A response to a row whose gold
    cannot be read is an ``error``, scored 0, whatever it says."""
    if verifier != "integer":
        return None
    from rlvr_cli.rewards.integer import parse_reference

    if parse_reference(gold) is not None:
        return None
    if _FLOAT_INT.fullmatch(gold.strip()):
        return (f"{gold!r} is a float, not an integer (pandas writes an integer column that has an empty cell "
                "as floats): write integers, or use verifier: math")
    return f"{gold[:40]!r} is not an integer (verifier integer reads digits only: use verifier: math for other answers)"


def _local(value: str | None) -> bool:
    return bool(value) and (Path(value).suffix.lower() in LOCAL_FORMATS or Path(value).expanduser().exists())


def check_references(recipe: Recipe) -> list[str]:
    """One ``field: problem`` line per reference of ``recipe`` that is missing or unusable; [] when all hold."""
    problems: list[str] = []
    task, built = recipe.task, None
    if task.name == "dataset" and _local(task.path) and (task.eval_path is None or _local(task.eval_path)):
        try:
            built = build_task(task)
        except UserError as e:
            problems += [p if p.startswith("task") else f"task: {p}" for p in e.problems]
        else:
            bad = [f"{where}: {why}" for where, p in built.located_rows() if (why := gold_problem(task.verifier, p.reference))]
            if bad:
                more = f" and {len(bad) - NAMED} more" if len(bad) > NAMED else ""
                problems.append(f"task.answer_field: {len(bad)} gold answer(s) the verifier cannot read: "
                                f"{'; '.join(bad[:NAMED])}{more}")
    # the keywords a function gets: the declared columns, and every column where the task has the list (as the scorer)
    columns = set(getattr(task, "reward_columns", None) or []) | set(getattr(built, "column_names", None) or [])
    functions = [(i, t.function) for i, t in enumerate(recipe.reward.terms) if t.type == "function"]
    refused = check_importable(list(dict.fromkeys(f for _, f in functions)), set(PASSED) | columns,
                               recipe.reward.worker_memory_mb)
    problems += [f"reward.terms[{i}].function: {refused[f]}" for i, f in functions if f in refused]
    if recipe.environment is not None:  # its module imported and its class built once, as a run's start does
        from rlvr_cli.envs.loading import load_environment

        try:
            load_environment(recipe.environment)
        except UserError as e:
            problems += e.problems
    return problems
