"""Finding the final answer in a response: after the task's marker, in the last ``\\boxed{}``, after
GSM8K's ``####``, or the last number.

Rules (shared by the integer and math verifiers, ``format`` and ``format_only``):

- A task with an answer marker (the built-in tasks use ``#``) defines its format: the answer is the
  text after the marker's *last* occurrence, and nothing else is tried.
- Without a marker (datasets) the methods of ``reward.extract`` are tried in order
  (default ``boxed``, ``gsm8k``, ``last_number``).
- A method that finds its sign owns the answer. If the response has a ``\\boxed`` whose braces never
  close, or a ``####`` with nothing after it, the answer is unreadable and *no later method is tried*:
  falling back to "the last number" there would turn a broken ``\\boxed{\\frac{1}{2`` into the answer
  ``2`` (one of math-verify's known false positives).

Every function here runs in time linear in the response (``str.rfind``, one left-to-right brace scan,
one regex without nested quantifiers), so it is safe to run in-process on untrusted text of any size.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

EXTRACT_METHODS = ("boxed", "gsm8k", "last_number")
DEFAULT_EXTRACT = EXTRACT_METHODS
EXPLICIT_METHODS = ("boxed", "gsm8k")
"""Methods where the response states its answer on purpose (what the `format` reward asks for)."""

_BOX_COMMANDS = ("\\boxed", "\\fbox")
# One number: optional sign, digits with optional thousands commas, optional decimals, exponent or
# /denominator. Each part starts with a character the one before cannot match (`,` `.` `e` `/`), so no
# two parts compete for the same characters: no backtracking.
_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:[eE][+-]?\d+)?(?:/\d+)?")


_GROUP_SPACE = "[ \u00a0\u2009\u202f]"
_SI_GROUPS = re.compile(rf"(?<!\d)\d{{1,3}}(?:{_GROUP_SPACE}\d{{3}})+(?!\d)")
_SPACED_DIGITS = re.compile(r"\d\s+\d")


def join_digit_groups(text: str) -> str | None:
    """``1 234 567`` (SI thousands grouping, with a space, no-break or thin space) -> ``1234567``;
    None when digits are separated by whitespace in any other way: ``4 2`` is two numbers, not 42
    (nor 6, as a LaTeX parser reads it). Digits of any script count (``\\d`` is Unicode)."""
    joined = _SI_GROUPS.sub(lambda m: re.sub(_GROUP_SPACE, "", m.group()), text)
    return None if _SPACED_DIGITS.search(joined) else joined


class Broken(Exception):
    """A method found its sign but what follows cannot be read (the answer is unparseable, no fallback)."""


def after_marker(response: str, marker: str) -> str | None:
    """The text after the last occurrence of ``marker``, or None when the marker is absent."""
    i = response.rfind(marker)
    return None if i < 0 else response[i + len(marker) :]


def last_boxed(response: str) -> str | None:
    """Content of the last ``\\boxed{...}`` / ``\\fbox{...}`` (balanced braces); None if there is none.

    Raises Broken when the last box is never closed (a truncated or malformed final answer).
    """
    start, command = max((response.rfind(c), c) for c in _BOX_COMMANDS)
    if start < 0:
        return None
    i = start + len(command)
    while i < len(response) and response[i] == " ":
        i += 1
    if i >= len(response) or response[i] != "{":
        # `\boxed 5` (no braces): the token up to the next space or `$`
        m = re.match(r"[^\s$]+", response[i:])
        if not m:
            raise Broken(f"{command} without content")
        return m.group(0)
    depth = 0
    for j in range(i, len(response)):
        ch = response[j]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return response[i + 1 : j]
    raise Broken(f"unbalanced braces in the last {command}")


def gsm8k_answer(response: str) -> str | None:
    """The text after the last ``####`` up to the end of its line; None when there is no ``####``."""
    tail = after_marker(response, "####")
    if tail is None:
        return None
    line = tail.split("\n", 1)[0].strip()
    if not line:
        raise Broken("nothing after ####")
    return line


def last_number(response: str) -> str | None:
    """The last number in the response (`-1,234.5`, `3/4`), or None."""
    last = None
    for m in _NUMBER.finditer(response):
        last = m
    return last.group(0) if last else None


_METHODS = {"boxed": last_boxed, "gsm8k": gsm8k_answer, "last_number": last_number}


def clean_answer(text: str) -> str:
    """Strip what surrounds an answer without changing it: spaces, math `$` delimiters, a final period."""
    text = text.strip().strip("$").strip()
    if text.endswith(".") and not text.endswith(".."):
        text = text[:-1].rstrip()
    return text


def extract_answer(response: str, marker: str = "", methods: Sequence[str] = DEFAULT_EXTRACT) -> tuple[str | None, str]:
    """(answer text or None, how it was found or why not). See the module docstring for the rules."""
    if marker:
        tail = after_marker(response, marker)
        if tail is None:
            return None, f"no answer marker {marker!r}"
        tail = clean_answer(tail)
        return (tail, "marker") if tail else (None, f"nothing after the answer marker {marker!r}")
    for name in methods:
        try:
            found = _METHODS[name](response)
        except Broken as e:
            return None, str(e)
        if found is not None:
            found = clean_answer(found)
            if not found:
                return None, f"empty answer ({name})"
            return found, name
    return None, "no answer found (tried " + ", ".join(methods) + ")"
