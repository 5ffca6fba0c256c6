"""Reward terms from the user's own code: ``reward.terms: [{type: function, function: "mod:f"}]``.

The contract is TRL's (trl 1.16, ``GRPOTrainer._calculate_rewards``), so one function serves both::

    f(prompts=[...], completions=[...], completion_ids=[[...], ...], answer=[...], <column>=[...], ...,
      trainer_state=..., log_extra=..., log_metric=...) -> list[float]     # one value per completion

rlvr calls it once per prompt's group (the G responses to one prompt of a training step), so every list
holds that group; an evaluation, which measures correctness with the task's verifier, does not call it.
Prompts and completions are text, or with ``task.chat_template`` TRL's conversational form: the
prompt's messages, and ``[{"role": "assistant", "content": text}]`` per completion. ``answer`` is the
gold answer as the task's verifier reads it; a dataset task adds its ``reward_columns`` under their own
names; ``trainer_state.global_step`` is the rlvr step; ``log_extra`` and ``log_metric`` accept TRL's
logging calls and drop them. The function sees every completion, a truncated one too
(``reward.truncated_is_incorrect`` zeroes only rlvr's own answer-based terms), as it would under TRL.

Where it runs: in a verifier worker (:mod:`rlvr_cli.rewards.pool`), which imports the module once when
it starts, under the pool's hard limit ``reward.timeout_s`` per call and its memory limit. That bounds a
hang; it is no sandbox: the function is the user's own code with the user's rights, unlike the ``code``
verifier's programs (docs/sandbox.md).

A failure is never a silent 0: an exception, a timeout, a dead worker, or a return that is not one
finite number per completion becomes a :class:`FunctionFailed` reason, which the scorer turns into a
``UserError`` naming the function and the prompt (exit 2). A failing call and one bad value in a
return are reported the same way: one call is one prompt's group, so the prompt is always known, and a
bad value also names its completion.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import importlib.util
import inspect
import json
import math
import os
import pickle
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rlvr_cli.errors import UserError
from rlvr_cli.rewards.outcome import Outcome
from rlvr_cli.rewards.pool import Check

FUNCTION_CHECK = "function"
"""The ``Check.verifier`` of a call of a user's function: the worker routes it here, not to a verifier."""

PASSED = frozenset({"prompts", "completions", "completion_ids", "answer", "trainer_state", "log_extra", "log_metric"})
"""The keywords every call gets, besides a dataset's ``reward_columns``."""


class FunctionFailed(Exception):
    """Why one call of a user's function gave no usable rewards (one line, without the function or prompt)."""


@dataclass(frozen=True)
class TrainerState:
    """What rlvr passes as ``trainer_state``: the one field of transformers' ``TrainerState`` it has."""

    global_step: int
    """The rlvr step being scored."""


def _log_extra(column: str, values: list) -> None:
    """TRL's hook that adds a column to its completions table: rlvr keeps no such table and drops it."""


def _log_metric(name: str, value: float) -> None:
    """TRL's hook that logs a scalar: rlvr drops it (its metrics are the ones docs/metrics.md lists)."""


@dataclass
class Call:
    """One call: a prompt's group as TRL's keyword arguments."""

    prompts: list
    completions: list
    completion_ids: list
    columns: dict[str, list] = field(default_factory=dict)
    """``answer`` and the dataset's ``reward_columns``, one value per completion."""
    step: int = 0

    def kwargs(self) -> dict:
        return {"prompts": self.prompts, "completions": self.completions, "completion_ids": self.completion_ids,
                **self.columns, "trainer_state": TrainerState(self.step), "log_extra": _log_extra,
                "log_metric": _log_metric}


# --- finding the function ------------------------------------------------------------------------------
_loaded: dict[str, Callable] = {}


def split_reference(ref: str) -> tuple[str, str]:
    """`pkg.mod:f` -> ("pkg.mod", "f"); `path/to/file.py:f` -> ("path/to/file.py", "f")."""
    where, _, name = ref.rpartition(":")
    return where, name


def _import_file(where: str):
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


def _import_module(where: str):
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:  # `rlvr` as a console script: import as `python -m` would
        sys.path.insert(0, here)
    return importlib.import_module(where)


def load_function(ref: str) -> Callable:
    """The callable ``ref`` names (``module:function`` or ``file.py:function``), imported once per process.

    Raises ``UserError`` naming ``ref`` when the module cannot be imported (its own exception is
    quoted) or has no such callable.
    """
    if ref in _loaded:
        return _loaded[ref]
    where, name = split_reference(ref)
    try:
        module = _import_file(where) if where.endswith(".py") else _import_module(where)
    except UserError as e:
        raise UserError(f"{ref}: {e.problems[0]}") from None
    except (Exception, SystemExit) as e:  # noqa: BLE001 - whatever the user's module raises while importing
        raise UserError(f"{ref}: cannot import {where}: {type(e).__name__}: {e}{_where(e)}") from None
    fn = getattr(module, name, None)
    if fn is None:
        callables = [n for n, v in vars(module).items() if not n.startswith("_") and callable(v)]
        raise UserError(f"{ref}: {where} has no {name!r}{did_you_mean(name, callables)}")
    if not callable(fn):
        raise UserError(f"{ref}: {name} is a {type(fn).__name__}, not a function")
    _loaded[ref] = fn
    return fn


def check_signature(fn: Callable, ref: str, names: set[str]) -> None:
    """``UserError`` when ``fn`` cannot take the keywords rlvr passes (``names``): a TRL reward function
    takes ``**kwargs`` (rlvr and TRL pass more than any one function reads), and each parameter without a
    default must be one of ``names``."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a callable without a readable signature: its first call will tell
        return
    params = list(sig.parameters.values())
    if not any(p.kind is p.VAR_KEYWORD for p in params):
        raise UserError(f"{ref}: {sig} takes no **kwargs; a TRL reward function is called with prompts=, completions=, "
                        "completion_ids=, trainer_state= and the dataset's columns as keywords: add **kwargs")
    positional = [p.name for p in params if p.kind is p.POSITIONAL_ONLY and p.default is p.empty]
    if positional:
        raise UserError(f"{ref}: parameter(s) {positional} are positional-only; rlvr passes everything by keyword")
    missing = [p.name for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
               and p.name not in names]
    if missing:
        raise UserError(f"{ref}: parameter(s) {missing} are never passed (rlvr passes {', '.join(sorted(names))}); "
                        "name a dataset column in task.reward_columns to pass it")


def did_you_mean(name: str, known) -> str:
    """` (did you mean 'x'?)` for the closest of ``known`` to a misspelled ``name``, or ''."""
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


# --- calling it ------------------------------------------------------------------------------------------
def _where(e: BaseException) -> str:
    """` (at file.py:12)`: where the exception was raised, so the user can find the line."""
    frames = traceback.extract_tb(e.__traceback__)
    return f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""


def _kind(x) -> str:
    return f"a {type(x).__name__} ({str(x)[:60]!r})" if isinstance(x, (str, bytes)) else f"a {type(x).__name__}"


def checked_values(out, n: int) -> list[float]:
    """``out`` as ``n`` finite floats, or ``FunctionFailed`` saying what is wrong with it."""
    if out is None or isinstance(out, (str, bytes, dict)) or not hasattr(out, "__iter__") or not hasattr(out, "__len__"):
        raise FunctionFailed(f"returned {'None' if out is None else _kind(out)}, not a list of {n} floats")
    values = list(out)
    if len(values) != n:
        raise FunctionFailed(f"returned {len(values)} values for {n} completions")
    result = []
    for i, v in enumerate(values):
        if v is None:
            raise FunctionFailed(f"returned None for completion {i} (TRL reads None as `does not apply`; rlvr needs "
                                 "a number: return 0.0 where that is meant)")
        if isinstance(v, (str, bytes)) or not hasattr(v, "__float__"):
            raise FunctionFailed(f"returned {_kind(v)} for completion {i}, not a number")
        try:
            f = float(v)
        except (TypeError, ValueError) as e:
            raise FunctionFailed(f"returned {_kind(v)} for completion {i}, not a number ({e})") from None
        if not math.isfinite(f):
            raise FunctionFailed(f"returned {f} for completion {i}")
        result.append(f)
    return result


def invoke(fn: Callable, call: Call) -> list[float]:
    """Call ``fn`` on one group and check its return; ``FunctionFailed`` otherwise."""
    try:
        out = fn(**call.kwargs())
    except (Exception, SystemExit) as e:  # noqa: BLE001 - the user's code may raise anything
        hint = " (raise reward.worker_memory_mb?)" if isinstance(e, MemoryError) else ""
        raise FunctionFailed(f"raised {type(e).__name__}: {str(e)[:300]}{_where(e)}{hint}") from None
    return checked_values(out, len(call.completions))


# --- through the worker pool -------------------------------------------------------------------------------
def to_check(ref: str, call: Call, timeout_s: float) -> Check:
    """The pool's check that calls ``ref`` on ``call`` in a worker (pickled: the columns keep their types)."""
    payload = base64.b64encode(pickle.dumps(call, protocol=pickle.HIGHEST_PROTOCOL)).decode("ascii")
    return Check(FUNCTION_CHECK, payload, "", {"function": ref}, timeout_s)


def answer(request: dict) -> dict:
    """The worker's answer to a function check: the values as JSON, or an `error` with the reason."""
    rid = request["id"]
    try:
        fn = load_function(request["options"]["function"])
        call = pickle.loads(base64.b64decode(request["response"]))
        values = invoke(fn, call)
        return {"id": rid, "outcome": "correct", "reward": 0.0, "answer": json.dumps(values), "detail": ""}
    except FunctionFailed as e:
        detail = str(e)
    except UserError as e:
        detail = e.problems[0]
    return {"id": rid, "outcome": "error", "reward": 0.0, "answer": None, "detail": detail}


def values_from(outcome: Outcome, n: int, timeout_s: float) -> list[float]:
    """The rewards a worker sent back for a call of ``n`` completions, or ``FunctionFailed``."""
    if outcome.outcome == "correct" and outcome.answer is not None:
        return checked_values(json.loads(outcome.answer), n)
    if outcome.outcome == "timeout":
        raise FunctionFailed(f"took longer than reward.timeout_s ({timeout_s:g} s) and was stopped")
    if outcome.detail.startswith("verifier worker"):
        raise FunctionFailed(f"{outcome.detail}: the function crashed its worker process, or went over "
                             "reward.worker_memory_mb")
    raise FunctionFailed(outcome.detail)
