"""Reward terms from the user's own code: ``reward.terms: [{type: function, function: "mod:f"}]``.

The contract is TRL's (trl 1.16, ``GRPOTrainer._calculate_rewards``), so one function serves both::

    f(prompts=[...], completions=[...], completion_ids=[[...], ...], answer=[...], <column>=[...], ...,
      trainer_state=..., log_extra=..., log_metric=...) -> list[float]     # one value per completion

rlvr calls it once per prompt's group (the G responses to one prompt of a training step), so every list
holds that group; an evaluation, which measures correctness with the task's verifier, does not call it.
Prompts and completions are text, or with ``task.chat_template`` TRL's conversational form: the
prompt's messages, and ``[{"role": "assistant", "content": text}]`` per completion. ``answer`` is the
gold answer as the task's verifier reads it; a dataset task adds every column of the prompt's row (the
question column aside: it is ``prompts``) under its own name, as TRL passes a dataset's columns;
``trainer_state.global_step`` counts as TRL's does (0 on the first step); ``log_extra`` and
``log_metric`` accept TRL's logging calls and drop them. An ``async def`` function is awaited, as TRL
does. The function sees every completion, a truncated one too
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

import asyncio
import base64
import hashlib
import inspect
import math
import os
import pickle
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rlvr_cli.errors import UserError
from rlvr_cli.fingerprints import reward_code_digest, reward_source_digest
from rlvr_cli.rewards.pool import CallResult, FunctionCall
from rlvr_cli.user_code import describe_exception as _exception
from rlvr_cli.user_code import did_you_mean, import_where, split_reference  # noqa: F401 - did_you_mean is imported from here
from rlvr_cli.user_code import raised_at as _where

MAX_ABS_VALUE = 1e9
"""The largest |value| a function may return. rlvr's advantages are group statistics (a mean and a
standard deviation over G rewards, times a weight up to 1e4): a reward of 1e308 is finite, yet its group's
squared deviations overflow to inf and every update becomes NaN. 1e9 (times 1e4, squared, summed over a
group) stays far below float32's 3.4e38, and no reward that means something is that large."""

PASSED = frozenset({"prompts", "completions", "completion_ids", "answer", "trainer_state", "log_extra", "log_metric"})
"""The keywords every call gets, besides a dataset's columns (a column of one of these names is not passed:
rlvr's value wins, e.g. ``answer`` is the gold answer after ``answer_extraction``)."""


class FunctionFailed(Exception):
    """Why one call of a user's function gave no usable rewards (one line, without the function or prompt)."""


@dataclass(frozen=True)
class TrainerState:
    """What rlvr passes as ``trainer_state``: the one field of transformers' ``TrainerState`` it has."""

    global_step: int
    """As TRL counts it: the optimiser steps completed before this batch was scored, so 0 on the first
    step; in ``rlvr train``, rlvr's step - 1 (under TRL, through the bridge, TRL's own value)."""


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
    """``answer`` and every column of the dataset's row, one value per completion."""
    global_step: int = 0
    """``trainer_state.global_step`` (TRL's count: 0 on the first step)."""

    def kwargs(self) -> dict:
        return {"prompts": self.prompts, "completions": self.completions, "completion_ids": self.completion_ids,
                **self.columns, "trainer_state": TrainerState(self.global_step), "log_extra": _log_extra,
                "log_metric": _log_metric}


# --- finding the function ------------------------------------------------------------------------------
_loaded: dict[str, Callable] = {}


def load_function(ref: str) -> Callable:
    """The callable ``ref`` names (``module:function`` or ``file.py:function``), imported once per process.

    Raises ``UserError`` naming ``ref`` when the module cannot be imported (its own exception is
    quoted) or has no such callable.
    """
    if ref in _loaded:
        return _loaded[ref]
    where, name = split_reference(ref)
    module = import_where(ref)
    fn = getattr(module, name, None)
    if fn is None:
        callables = [n for n, v in vars(module).items() if not n.startswith("_") and callable(v)]
        raise UserError(f"{ref}: {where} has no {name!r}{did_you_mean(name, callables)}")
    if not callable(fn):
        raise UserError(f"{ref}: {name} is a {type(fn).__name__}, not a function")
    _loaded[ref] = fn
    return fn


def source_file(ref: str) -> Path | None:
    """The file that defines ``ref``'s module, found as the import would find it but without running
    anything (a package's ``__init__`` is not executed); None when it cannot be found, or has no file."""
    where, _ = split_reference(ref)
    if where.endswith(".py"):
        path = Path(where).expanduser().resolve()
        return path if path.is_file() else None
    from importlib.machinery import PathFinder

    search = [p or os.getcwd() for p in sys.path] + [os.getcwd()]
    spec = None
    for part in where.split("."):
        spec = PathFinder.find_spec(part, search)
        if spec is None:
            return None
        search = list(spec.submodule_search_locations or [])
    origin = spec.origin if spec is not None else None
    return Path(origin) if origin and Path(origin).is_file() else None


def source_digests(refs) -> dict[str, str | None]:
    """``{ref: "blake2b:<32 hex>"}``: each function's module file (its bytes) and the function's name, the
    reward-code part of a run's fingerprint; None for a module without a file. It covers the file that
    defines the module, not the modules that file imports."""
    out = {}
    for ref in refs:
        path = source_file(ref)
        if path is None:
            out[ref] = None
            continue
        out[ref] = reward_source_digest(path, split_reference(ref)[1])
    return out


def reward_code_fingerprint(terms) -> tuple[str | None, dict[str, str | None]]:
    """(one digest over every ``function`` term's source digest, or None without such terms; the
    per-function digests), for run.json's fingerprint fields ``reward_code`` and ``reward_functions``."""
    digests = source_digests(sorted({t.function for t in terms if t.user_code}))
    if not digests:
        return None, {}
    return reward_code_digest(digests), digests


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
        raise UserError(f"{ref}: parameter(s) {missing} are never passed (rlvr passes {', '.join(sorted(names))}: its "
                        "keywords and the data's columns); give it a default, or name a column of the data")


# --- calling it ------------------------------------------------------------------------------------------
def _kind(x) -> str:
    return f"a {type(x).__name__} ({str(x)[:60]!r})" if isinstance(x, (str, bytes)) else f"a {type(x).__name__}"


def _number(v, i: int) -> float:
    """One returned value as a float in +-MAX_ABS_VALUE, or ``FunctionFailed`` naming completion ``i``."""
    if v is None:
        raise FunctionFailed(f"returned None for completion {i} (TRL reads None as `does not apply`; rlvr needs "
                             "a number: return 0.0 where that is meant)")
    if isinstance(v, (str, bytes)) or not hasattr(v, "__float__"):
        raise FunctionFailed(f"returned {_kind(v)} for completion {i}, not a number")
    try:
        f = float(v)
    except OverflowError:  # an int (or Fraction, Decimal) beyond any float: 10**400
        digits = f" (about {int(abs(v).bit_length() * 0.30103) + 1} digits)" if isinstance(v, int) else ""
        raise FunctionFailed(f"returned {_kind(v)} too large for a float{digits} for completion {i}; a reward must be "
                             f"within +-{MAX_ABS_VALUE:g}") from None
    except Exception as e:  # noqa: BLE001 - the user's own number type may raise anything from __float__
        raise FunctionFailed(f"returned {_kind(v)} for completion {i}, which is not a number "
                             f"(float() raised {type(e).__name__}: {str(e)[:100]})") from None
    if not math.isfinite(f):
        raise FunctionFailed(f"returned {f} for completion {i}")
    if abs(f) > MAX_ABS_VALUE:
        raise FunctionFailed(f"returned {f:g} for completion {i}, beyond +-{MAX_ABS_VALUE:g} (a reward that large "
                             "overflows its group's standard deviation: every update would be NaN); scale it down")
    return f


def checked_values(out, n: int) -> list[float]:
    """``out`` as ``n`` finite floats within +-``MAX_ABS_VALUE``, or ``FunctionFailed`` saying what is wrong."""
    if out is None or isinstance(out, (str, bytes, dict)) or not hasattr(out, "__iter__") or not hasattr(out, "__len__"):
        raise FunctionFailed(f"returned {'None' if out is None else _kind(out)}, not a list of {n} floats")
    try:
        length = len(out)  # before reading it: range(10**12) has a length, and no memory for its list
        values = list(out) if length == n else []
    except Exception as e:  # noqa: BLE001 - the user's own sequence type may raise while measured or read
        raise FunctionFailed(f"returned {_kind(out)} that raised {type(e).__name__} when read: {str(e)[:100]}") from None
    if length != n or len(values) != n:
        raise FunctionFailed(f"returned {length if length != n else len(values)} values for {n} completions")
    return [_number(v, i) for i, v in enumerate(values)]


async def _awaited(awaitable):
    return await awaitable


def invoke(fn: Callable, call: Call) -> list[float]:
    """Call ``fn`` on one group and check its return; ``FunctionFailed`` otherwise."""
    try:
        out = fn(**call.kwargs())
        if inspect.isawaitable(out):  # an `async def` reward function: awaited, as TRL does
            out = asyncio.run(_awaited(out))
    except BaseException as e:  # noqa: BLE001 - the user's code may raise anything, KeyboardInterrupt too
        hint = " (raise reward.worker_memory_mb?)" if isinstance(e, MemoryError) else ""
        raise FunctionFailed(f"raised {_exception(e)}{_where(e)}{hint}") from None
    return checked_values(out, len(call.completions))


# --- through the worker pool -------------------------------------------------------------------------------
def to_call(ref: str, call: Call, timeout_s: float) -> FunctionCall:
    """The pool's job that calls ``ref`` on ``call`` in a worker (pickled: the columns keep their types)."""
    payload = base64.b64encode(pickle.dumps(call, protocol=pickle.HIGHEST_PROTOCOL)).decode("ascii")
    return FunctionCall(ref, payload, timeout_s)


def answer(request: dict) -> dict:
    """The worker's answer to a ``function`` request: ``{"id", "values"}`` or ``{"id", "failure"}``."""
    rid = request["id"]
    try:
        fn = load_function(request["function"])
        call = pickle.loads(base64.b64decode(request["call"]))
        return {"id": rid, "values": invoke(fn, call)}
    except FunctionFailed as e:
        failure = str(e)
    except UserError as e:
        failure = e.problems[0]
    except BaseException as e:  # noqa: BLE001 - never a traceback from the worker: the reply says what happened
        failure = f"rlvr could not run the call: {type(e).__name__}: {str(e)[:200]}"
    return {"id": rid, "failure": failure}


def values_from(result: CallResult, n: int, timeout_s: float) -> list[float]:
    """The rewards a worker sent back for a call of ``n`` completions, or ``FunctionFailed``."""
    if result.values is not None:
        return checked_values(result.values, n)
    if result.timed_out:
        raise FunctionFailed(f"took longer than reward.timeout_s ({timeout_s:g} s) and was stopped")
    if result.failure.startswith("verifier worker"):
        raise FunctionFailed(f"{result.failure}: the function crashed its worker process, or went over "
                             "reward.worker_memory_mb")
    raise FunctionFailed(result.failure)
