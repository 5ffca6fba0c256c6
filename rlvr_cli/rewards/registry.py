"""The correctness verifiers by name, and ``verify``: one check, in-process, without a time limit.

The names are exactly the recipe schema's ``VerifierName`` without ``task``, which is not a verifier
but "the task's own" and is resolved by the scorer (``tests/rewards/test_rewards_registry.py`` checks this).
Each verifier module has ``check(response, reference, **options) -> Outcome``, ``extract(response,
**options) -> str | None`` (used by `format` and `format_only`), and ``IN_PROCESS_SAFE``: whether a
check is bounded in time and memory by construction (then the scorer runs it in-process; the others go
through the worker pool with a hard time limit).
"""

from __future__ import annotations

import inspect
from functools import cache

from rlvr_cli.rewards import code_tests, countdown, integer, math_answer, reasoning_gym
from rlvr_cli.rewards.outcome import Outcome

VERIFIERS = {"integer": integer, "math": math_answer, "countdown": countdown, "code": code_tests, "reasoning_gym": reasoning_gym}


def get_verifier(name: str):
    try:
        return VERIFIERS[name]
    except KeyError:
        raise ValueError(f"unknown verifier {name!r} (choose from {', '.join(VERIFIERS)})") from None


@cache
def accepted_options(name: str) -> frozenset[str]:
    """Keyword options that the verifier's ``check`` takes (besides response and reference): its
    module's ``OPTIONS`` where ``check`` takes them as ``**kwargs``, else its named parameters."""
    module = get_verifier(name)
    params = getattr(module, "OPTIONS", None) or inspect.signature(module.check).parameters
    return frozenset(p for p in params if p not in ("response", "reference", "on_start"))


def options_for(name: str, options: dict) -> dict:
    """The subset of ``options`` that verifier ``name`` understands (one options dict serves all)."""
    accepted = accepted_options(name)
    return {k: v for k, v in options.items() if k in accepted}


def verify(name: str, response: str, reference: str, **options) -> Outcome:
    """Check one response against a reference with verifier ``name``: pure, in-process, no time limit.

    For untrusted responses and the `math` and `code` verifiers use a :class:`~rlvr_cli.rewards.Scorer`
    or :class:`~rlvr_cli.rewards.pool.VerifierPool`, which add the hard limits.
    """
    return get_verifier(name).check(response, reference, **options)
