"""Shaped reward `format`: 1 when the response follows the task's format, else 0 (added with a weight).

The format is:

- with ``think: true``: the response opens with ``<think>``, has exactly one ``<think>`` and one
  ``</think>`` after it, something other than whitespace between them, and the answer below comes
  after ``</think>``;
- a task with an answer marker (the built-in ones): the marker is present and what follows its last
  occurrence is a readable answer of the task's verifier (an integer, an equation);
- a task without a marker: an explicit final answer by one of the recipe's ``reward.extract`` methods
  other than ``last_number`` (a ``\\boxed{...}`` or a GSM8K ``#### ...`` line when it lists none): the
  last-number fallback does not count, since every response with a digit would have the format;
- the `code` verifier: a fenced code block.

Everything here is linear in the response, so it runs in-process.
"""

from __future__ import annotations

from collections.abc import Sequence

from rlvr_cli.rewards.code_tests import FENCE, program_text
from rlvr_cli.rewards.extract import EXPLICIT_METHODS, extract_answer
from rlvr_cli.rewards.registry import get_verifier

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def after_think(response: str) -> str | None:
    """The text after a well-formed leading ``<think>...</think>`` block, or None."""
    if not response.lstrip().startswith(THINK_OPEN):
        return None
    if response.count(THINK_OPEN) != 1 or response.count(THINK_CLOSE) != 1:
        return None
    start, end = response.index(THINK_OPEN), response.index(THINK_CLOSE)
    if end < start or not response[start + len(THINK_OPEN) : end].strip():
        return None
    return response[end + len(THINK_CLOSE) :]


def explicit_methods(extract: Sequence[str]) -> tuple[str, ...]:
    """The extraction methods that count as stating an answer on purpose: all but ``last_number``."""
    return tuple(m for m in extract if m != "last_number") or EXPLICIT_METHODS


def has_explicit_answer(text: str, verifier: str, marker: str, extract: Sequence[str] = EXPLICIT_METHODS) -> bool:
    if verifier == "code":
        return FENCE in text and program_text(text) is not None
    if marker:
        return get_verifier(verifier).extract(text, marker=marker) is not None
    answer, _how = extract_answer(text, "", explicit_methods(extract))
    return answer is not None


def format_reward(response: str, verifier: str, marker: str, think: bool = False,
                  extract: Sequence[str] = EXPLICIT_METHODS) -> float:
    text = after_think(response) if think else response
    if text is None:
        return 0.0
    return 1.0 if has_explicit_answer(text, verifier, marker, extract) else 0.0
