"""Verifier `code`: run the response's Python program against the reference tests in a sandbox.

The program is the last complete fenced block of the response (```` ```python ... ``` ````; a
language tag on the opening line is dropped); a block left open by the length limit counts from its
opening fence; a response without any fence is taken as the program itself.

The reference is either

- Python test code (asserts, MBPP/HumanEval style), run after the program, in a separate process that
  sees the program's top-level names as data or handles (the program's ``__name__`` is
  ``"solution"``, so an ``if __name__ == "__main__":`` block of it does not run); or
- JSON ``{"inputs": [...], "outputs": [...]}`` (APPS style): the program runs once per case as
  ``__main__`` with the input on ``sys.stdin``; its ``sys.stdout`` must equal the output (trailing
  whitespace of each line and trailing blank lines ignored).

Outcomes: every test passed -> ``correct``; a test failed, the program raised, exited or was killed
before the tests finished (``os._exit(0)``, a memory limit, printing "PASSED" changes nothing) ->
``incorrect``; no program, or one that does not compile -> ``unparseable``; the wall-clock or CPU limit
-> ``timeout``; broken tests or a sandbox that cannot start -> ``error``.

The canonical answer is a hash of the program (equal programs give equal keys). What the sandbox does
and does not protect against is spelled out in docs/sandbox.md.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import fields

from rlvr_cli.rewards import outcome as oc
from rlvr_cli.rewards import sandbox
from rlvr_cli.rewards.outcome import Outcome

IN_PROCESS_SAFE = False
FENCE = "```"


def program_text(response: str) -> str | None:
    """The program in a response (see the module docstring); None if it is empty."""
    parts = response.split(FENCE)  # outside, inside, outside, ... : odd parts are inside fences
    if len(parts) == 1:
        block = response
    elif len(parts) % 2 == 0:
        block = parts[-1]  # an odd number of fences: the last block was left open (truncated)
    else:
        block = parts[-2]  # the last closed block
    first, _, rest = block.partition("\n")
    if first.strip() and " " not in first.strip() and first.strip().isidentifier():
        block = rest  # a language tag such as `python`
    return block if block.strip() else None


def parse_reference(reference: str) -> tuple[str | None, list | None]:
    """(assert-style tests, None) or (None, [[input, output], ...])."""
    text = reference.lstrip()
    if text.startswith("{"):
        try:
            spec = json.loads(text)
        except ValueError:
            spec = None
        if isinstance(spec, dict) and "inputs" in spec and "outputs" in spec:
            inputs, outputs = spec["inputs"], spec["outputs"]
            if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
                raise ValueError("inputs and outputs must be lists of the same length")
            return None, [[_as_text(i), _as_text(o)] for i, o in zip(inputs, outputs)]
    return reference, None


def _as_text(value) -> str:
    if isinstance(value, list):
        return "\n".join(map(str, value))
    return str(value)


def program_key(program: str) -> str:
    return "sha1:" + hashlib.sha1(program.strip().encode("utf-8", "surrogatepass")).hexdigest()[:16]


def extract(response: str, **_) -> str | None:
    """The program's key, or None when the response holds no program (used by `format_only`)."""
    program = program_text(response)
    return None if program is None else program_key(program)


OPTIONS = tuple(f.name for f in fields(sandbox.Limits))
"""The options ``check`` takes besides the response and the reference: the sandbox's limits."""


def check(response: str, reference: str, on_start=None, **limits) -> Outcome:
    """Run the response's program against the reference's tests in the sandbox; ``limits`` are
    :class:`~rlvr_cli.rewards.sandbox.Limits` fields (``OPTIONS``), the rest at their defaults."""
    program = program_text(response)
    if program is None:
        return oc.unparseable("no program in the response")
    key = program_key(program)
    try:
        tests, cases = parse_reference(reference)
    except ValueError as e:
        return oc.error(f"bad code reference: {e}")
    run = sandbox.run_program(program, tests, cases, sandbox.Limits(**limits), on_start=on_start)
    if run.status == "passed":
        return oc.correct(key, "all tests passed")
    if run.status == "failed":
        return oc.incorrect(key, run.detail)
    if run.status == "syntax":
        return oc.unparseable(run.detail, answer=key)
    if run.status == "timeout":
        return oc.timeout(run.detail)
    return oc.error(run.detail)


def warm_up(**limits) -> None:
    """Probe the sandbox's isolation once (a worker does this before its first timed check)."""
    keep = {k: v for k, v in limits.items() if k in ("isolation", "python")}
    sandbox.isolation_level(sandbox.Limits(**keep))
