"""Importing the user's own code by reference: `module:name` or `path/to/file.py:name`.

One address for the import machinery that reward functions (:mod:`rlvr_cli.rewards.function`) and
environments (:mod:`rlvr_cli.envs.loading`) share: how a reference splits, how a file is imported (its
folder on ``sys.path``, as when run as a script), how a module is imported from the working directory, and
how the user's exception is quoted in one line.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import os
import sys
import traceback
from pathlib import Path

from rlvr_cli.errors import UserError


def split_reference(ref: str) -> tuple[str, str]:
    """`pkg.mod:f` -> ("pkg.mod", "f"); `path/to/file.py:f` -> ("path/to/file.py", "f")."""
    where, _, name = ref.rpartition(":")
    return where, name


def import_file(where: str):
    """The module of the file ``where`` (a path to a .py file), imported under a name keyed by its path."""
    path = Path(where).expanduser().resolve()
    if not path.is_file():
        raise UserError(f"{where}: no such file (looked for {path}; a relative path is read from the folder of the "
                        f"recipe file that names it, then from the working directory, {os.getcwd()})")
    name = f"rlvr_user_reward_{hashlib.blake2b(str(path).encode('utf-8', 'surrogatepass'), digest_size=4).hexdigest()}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    if str(path.parent) not in sys.path:  # as when the file is run as a script: its folder's modules import
        sys.path.insert(0, str(path.parent))
    sys.modules[name] = module  # dataclasses and pickling inside the module look it up there
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def import_module(where: str):
    """``importlib.import_module(where)`` with the working directory importable (as under ``python -m``)."""
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:  # `rlvr` as a console script: import as `python -m` would
        sys.path.insert(0, here)
    return importlib.import_module(where)


def import_where(ref: str):
    """The module ``ref``'s part before the last colon names; ``UserError`` starting with ``ref`` when it
    cannot be imported (the module's own exception quoted, with the line that raised it)."""
    where, _ = split_reference(ref)
    if not where:
        raise UserError(f"{ref}: not a reference (write module:name or path/to/file.py:name)")
    try:
        return import_file(where) if where.endswith(".py") else import_module(where)
    except UserError as e:
        raise UserError(f"{ref}: {e.problems[0]}") from None
    except BaseException as e:  # noqa: BLE001 - whatever the user's module raises while importing, Ctrl-C's too
        raise UserError(f"{ref}: cannot import {where}: {describe_exception(e)}{raised_at(e)}") from None


def did_you_mean(name: str, known) -> str:
    """` (did you mean 'x'?)` for the closest of ``known`` to a misspelled ``name``, or ''."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def describe_exception(e: BaseException) -> str:
    """`ValueError: its message`, or the type alone when the message is empty (`KeyboardInterrupt`)."""
    try:
        text = str(e)[:300]
    except Exception:  # noqa: BLE001 - the user's exception type may fail to print itself
        text = "(its message cannot be printed)"
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def raised_at(e: BaseException) -> str:
    """` (at file.py:12)`: where the exception was raised, so the user can find the line."""
    frames = traceback.extract_tb(e.__traceback__)
    return f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
