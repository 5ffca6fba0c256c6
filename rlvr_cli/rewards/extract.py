"""Finding the final answer in a response: after the task's marker, in the last ``\\boxed{}``, after
GSM8K's ``####``, in the last ``<answer>...</answer>``, after the last ``Answer:``, or the last number.

Rules (shared by the integer and math verifiers, ``format`` and ``format_only``):

- A task with an answer marker (the built-in tasks use ``#``) defines its format: the answer is the
  text after the marker's *last* occurrence, and nothing else is tried.
- Without a marker (datasets) the methods of ``reward.extract`` are tried in order
  (default ``boxed``, ``gsm8k``, ``last_number``).
- A method that finds its sign owns the answer. If the response has a ``\\boxed`` whose braces never
  close, or a ``####`` with nothing after it, the answer is unreadable and *no later method is tried*:
  falling back to "the last number" there would turn a broken ``\\boxed{\\frac{1}{2`` into the answer
  ``2`` (one of math-verify's known false positives).

Free text (an instruct model's answer) has strict and lenient extractors:

- ``answer_tags`` / ``answer_colon`` (strict): the content of the last ``<answer>...</answer>`` /
  the rest of the line after the last ``answer:`` (any case, ``final answer:``, markdown ``**Answer:**``);
  the verifier must read that text whole (``<answer>The sum is 12</answer>`` is unparseable).
- ``answer_tags_lenient`` / ``answer_colon_lenient``: the same places, but ``answer_colon_lenient``
  also reads ``the answer is N`` / ``answer = N`` and ends the answer at the end of its sentence, and
  a found text that is words rather than one answer (it has a space and a letter) is reduced to its
  last number: ``The answer is 12, since 6 + 6 = 12.`` -> ``12``.

Every function here runs in time linear in the response (``str.rfind``, one left-to-right brace scan,
one regex without nested quantifiers), so it is safe to run in-process on untrusted text of any size.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

EXTRACT_METHODS = ("boxed", "gsm8k", "last_number", "answer_tags", "answer_colon", "answer_tags_lenient",
                   "answer_colon_lenient")
"""Every extractor, by the name a recipe's ``reward.extract`` gives it."""
DEFAULT_EXTRACT = ("boxed", "gsm8k", "last_number")
EXPLICIT_METHODS = ("boxed", "gsm8k")
"""The `format` reward's default: methods where the response states its answer on purpose."""

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


_TAG_OPEN, _TAG_CLOSE = "<answer>", "</answer>"
_ANSWER_COLON = re.compile(r"answer\**[ \t]*:[ \t]*\**", re.IGNORECASE)
_ANSWER_PHRASE = re.compile(r"answer\**[ \t]*(?::|=|\bis\b)[ \t]*\**", re.IGNORECASE)
_SENTENCE_END = re.compile(r"\.(?:\s|$)|[\n;]")


def answer_tags(response: str) -> str | None:
    """Content of the last ``<answer>...</answer>``; None without an ``<answer>``.

    Raises Broken when the last ``<answer>`` is never closed (a cut or malformed final answer).
    """
    start = response.rfind(_TAG_OPEN)
    if start < 0:
        return None
    end = response.find(_TAG_CLOSE, start)
    if end < 0:
        raise Broken("<answer> without </answer>")
    return response[start + len(_TAG_OPEN) : end]


def _last_match(pattern: re.Pattern, response: str):
    last = None
    for m in pattern.finditer(response):
        last = m
    return last


def answer_colon(response: str) -> str | None:
    """The rest of the line after the last ``answer:`` (``Final Answer: 12`` -> ``12``); None without one."""
    m = _last_match(_ANSWER_COLON, response)
    if m is None:
        return None
    line = response[m.end() :].split("\n", 1)[0].strip().strip("*").strip()
    if not line:
        raise Broken("nothing after answer:")
    return line


def _words_to_number(text: str) -> str:
    """A found text that is words (a space and a letter) -> its last number; an answer alone stays."""
    if " " in text.strip() and re.search(r"[A-Za-z]", text):
        return last_number(text) or text
    return text


def answer_tags_lenient(response: str) -> str | None:
    found = answer_tags(response)
    return None if found is None else _words_to_number(found)


def answer_colon_lenient(response: str) -> str | None:
    """The sentence after the last ``answer:`` / ``answer is`` / ``answer =``, reduced to its last
    number when it is words: ``The answer is 12, since 6 + 6 = 12.`` -> ``12``."""
    m = _last_match(_ANSWER_PHRASE, response)
    if m is None:
        return None
    rest = response[m.end() :]
    end = _SENTENCE_END.search(rest)
    sentence = (rest[: end.start()] if end else rest).strip().strip("*").strip()
    if not sentence:
        raise Broken("nothing after the answer phrase")
    return _words_to_number(sentence)


_METHODS = {"boxed": last_boxed, "gsm8k": gsm8k_answer, "last_number": last_number, "answer_tags": answer_tags,
            "answer_colon": answer_colon, "answer_tags_lenient": answer_tags_lenient,
            "answer_colon_lenient": answer_colon_lenient}


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
