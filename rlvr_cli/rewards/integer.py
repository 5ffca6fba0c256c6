"""Verifier `integer` (the `arithmetic` task's): the exact integer answer.

Rules:

- With an answer marker (arithmetic: ``#``) the answer is the text after the marker's last
  occurrence. It must be an integer, optionally followed by redundant checks that restate it:
  ``12,13,6#632=632``. *Every* integer after the marker must equal the reference: a check that
  disagrees (``#632=631``, or a check cut short by the length limit, ``#632=63``) makes the response
  ``incorrect``, because it contradicts itself. Anything else after the marker (``#632 wait``) is
  ``unparseable``: the built-in format is exact.
- Without a marker (a dataset with ``verifier: integer``) the answer comes from the extraction chain
  (``\\boxed{}``, ``####``, last number; see :mod:`rlvr_cli.rewards.extract`). `$` and thousands
  separators (commas, or SI spaces ``1 234``) are dropped (``$1,234`` -> 1234); digits split by
  spaces any other way (``4 2``) are not a number and a decimal with a zero fraction is an integer
  (``18.00`` -> 18). Any other decimal (``18.5``) is a number that is not the integer: ``incorrect``.
  Other text is ``unparseable`` (use the `math` verifier for answers with units or LaTeX).
- Leading zeros and ``+`` do not matter (``0632`` = ``632``); the canonical answer is ``str(int)``.

Why this is safe in-process (no worker, no time limit), on any input: one ``str.rfind``, a split on
``=``, fixed regexes without nested quantifiers, and ``int()`` only on at most ``MAX_DIGITS`` digits
(Python refuses longer conversions anyway), so the cost is linear in the response and memory is bounded.
"""

from __future__ import annotations

import re

from rlvr_cli.rewards import outcome as oc
from rlvr_cli.rewards.extract import DEFAULT_EXTRACT, after_marker, extract_answer, join_digit_groups
from rlvr_cli.rewards.outcome import Outcome

IN_PROCESS_SAFE = True
MAX_DIGITS = 1000
"""Longer integers are unparseable: no reference needs them and int() of huge strings is quadratic."""

_INT = re.compile(rf"[+-]?\d{{1,{MAX_DIGITS}}}")
_DECIMAL = re.compile(rf"([+-]?\d{{1,{MAX_DIGITS}}})\.(\d{{1,{MAX_DIGITS}}})")
_THOUSANDS = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+")


def parse_reference(reference: str) -> int | None:
    text = str(reference).strip().replace(",", "")
    return int(text) if _INT.fullmatch(text) else None


def marker_integers(tail: str) -> list[int] | None:
    """The answer and its checks after the marker (`632=632` -> [632, 632]); None if that is not the form."""
    parts = tail.split("=")
    if len(parts) > MAX_DIGITS:
        return None
    values = []
    for part in parts:
        part = part.strip()
        if not _INT.fullmatch(part):
            return None
        values.append(int(part))
    return values


def normalize_integer(text: str) -> tuple[int | None, bool]:
    """(integer, is a number at all) of an extracted answer: `$1,234` -> (1234, True), `2.5` -> (None, True)."""
    text = join_digit_groups(text.replace("\\$", "").replace("$", "").replace("\\,", "").strip())
    if text is None:
        return None, False  # digits split by spaces (`4 2`): not one number
    text = text.replace(" ", "")
    if _THOUSANDS.fullmatch(text):
        text = text.replace(",", "")
    if _INT.fullmatch(text):
        return int(text), True
    m = _DECIMAL.fullmatch(text)
    if m:
        return (int(m.group(1)), True) if set(m.group(2)) == {"0"} else (None, True)
    return None, False


def extract(response: str, marker: str = "", extract: tuple[str, ...] = DEFAULT_EXTRACT, **_) -> str | None:
    """The answer text that `check` reads, or None (used by `format_only`)."""
    if marker:
        tail = after_marker(response, marker)
        if tail is None:
            return None
        values = marker_integers(tail)
        return str(values[0]) if values else None
    text, _how = extract_answer(response, "", extract)
    if text is None:
        return None
    value, _is_number = normalize_integer(text)
    return None if value is None else str(value)


def check(response: str, reference: str, marker: str = "", extract: tuple[str, ...] = DEFAULT_EXTRACT) -> Outcome:
    gold = parse_reference(reference)
    if gold is None:
        return oc.error(f"reference {str(reference)[:40]!r} is not an integer")
    if marker:
        tail = after_marker(response, marker)
        if tail is None:
            return oc.unparseable(f"no answer marker {marker!r}")
        values = marker_integers(tail)
        if values is None:
            return oc.unparseable(f"not an integer (with optional =checks) after {marker!r}: {tail[:40]!r}")
        answer = str(values[0])
        if values[0] != gold:
            return oc.incorrect(answer, f"{values[0]} != {gold}")
        if any(v != gold for v in values[1:]):
            return oc.incorrect(answer, "a check after the answer disagrees with it")
        return oc.correct(answer)
    text, how = extract_answer(response, "", extract)
    if text is None:
        return oc.unparseable(how)
    value, is_number = normalize_integer(text)
    if value is None:
        if is_number:
            return oc.incorrect(text, f"{text} is not an integer ({how})")
        return oc.unparseable(f"not an integer: {text[:40]!r} ({how})")
    return oc.judged(value == gold, str(value), f"{value} vs {gold} ({how})")
