"""Verifier `countdown`: an equation over the given numbers that reaches the target exactly.

The reference is JSON ``{"numbers": [3, 5, 7], "target": 22}``; the equation is the text after the
last answer marker (``5*3=15,15+7=22#(5*3)+7``), or the last line of the response without a marker.

Rules:

- Allowed: non-negative integer literals, ``+ - * /``, parentheses, spaces, and one optional trailing
  ``=N`` (which must equal the value). Not allowed, ``unparseable``: any other character or operator
  (``**``, ``^``, ``%``), unary minus (``-3`` is not a given number), implicit multiplication
  (``2(3)``), an empty or unbalanced expression, more than ``MAX_TOKENS`` tokens or ``MAX_DEPTH``
  nested parentheses.
- Each given number may be used at most once (duplicates in the list may each be used once); a number
  that is not given, or is used more often than given, is ``incorrect``. At least two numbers must be
  used (a bare number is not an equation, as in the task's own solutions).
- The value is computed exactly with fractions (``(7/2)*4`` = 14 is fine: fractions are allowed
  mid-way) and must equal the target exactly. Division by zero is ``incorrect``.
- The canonical answer is the equation without spaces (so equal answers give equal outcomes).

The parser is never ``eval``: a tokenizer and a recursive-descent parser with a depth limit. Why it is
safe in-process on any input: tokens are read left to right once (linear), the token count and depth
are capped before any arithmetic, and the arithmetic only ever combines the few given numbers
(anything else is rejected first), so values stay small. No exponent exists, so `9**9**9**9` is
rejected as a token error, not computed.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from fractions import Fraction

from rlvr_cli.rewards import outcome as oc
from rlvr_cli.rewards.extract import after_marker
from rlvr_cli.rewards.outcome import Outcome

IN_PROCESS_SAFE = True
MAX_TOKENS = 200
MAX_DEPTH = 32
MAX_LITERAL_DIGITS = 12
_TOKEN = re.compile(r"\s*(?:(\d+)|(.))")


class Invalid(Exception):
    """The text is not an equation of the allowed form (unparseable)."""


def parse_reference(reference: str) -> tuple[list[int], Fraction]:
    spec = json.loads(reference)
    numbers = [int(n) for n in spec["numbers"]]
    target = Fraction(spec["target"])
    return numbers, target


def equation_text(response: str, marker: str) -> str | None:
    if marker:
        return after_marker(response, marker)
    lines = response.strip().splitlines()
    return lines[-1] if lines else None


def tokenize(text: str) -> list[str]:
    tokens: list[str] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        number, other = m.group(1), m.group(2)
        if number is not None:
            if len(number) > MAX_LITERAL_DIGITS:
                raise Invalid("number too long")
            tokens.append(number)
        elif other in "+-*/()=":
            if other == "*" and tokens and tokens[-1] == "*":
                raise Invalid("operator ** is not allowed")
            tokens.append(other)
        else:
            raise Invalid(f"character {other!r} is not allowed")
        if len(tokens) > MAX_TOKENS:
            raise Invalid(f"more than {MAX_TOKENS} tokens")
        pos = m.end()
    return tokens


class _Parser:
    """expr := term (('+'|'-') term)* ; term := atom (('*'|'/') atom)* ; atom := NUMBER | '(' expr ')'"""

    def __init__(self, tokens: list[str]):
        self.tokens, self.i, self.used = tokens, 0, []

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> str:
        tok = self.peek()
        if tok is None:
            raise Invalid("the equation ends too early")
        self.i += 1
        return tok

    def expr(self, depth: int):
        value = self.term(depth)
        while self.peek() in ("+", "-"):
            op = self.take()
            rhs = self.term(depth)
            value = value + rhs if op == "+" else value - rhs
        return value

    def term(self, depth: int):
        value = self.atom(depth)
        while self.peek() in ("*", "/"):
            op = self.take()
            rhs = self.atom(depth)
            if op == "*":
                value = value * rhs
            elif rhs == 0:
                value = ZeroDivision()
            else:
                value = value / rhs
        return value

    def atom(self, depth: int):
        tok = self.take()
        if tok == "(":
            if depth >= MAX_DEPTH:
                raise Invalid(f"more than {MAX_DEPTH} nested parentheses")
            value = self.expr(depth + 1)
            if self.take() != ")":
                raise Invalid("unbalanced parentheses")
            return value
        if tok.isdigit():
            self.used.append(int(tok))
            return Fraction(int(tok))
        if tok == "-":
            raise Invalid("unary minus is not allowed")
        raise Invalid(f"unexpected {tok!r}")


class ZeroDivision:
    """The value of an expression that divided by zero; absorbs every later operation."""

    def _absorb(self, other):
        return self

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _absorb


def evaluate(text: str) -> tuple[Fraction | ZeroDivision, list[int], str, int | None]:
    """(value, numbers used in order, canonical text, claimed result after `=` or None). Raises Invalid."""
    tokens = tokenize(text)
    claimed = None
    if "=" in tokens:
        k = tokens.index("=")
        if k != len(tokens) - 2 or not tokens[-1].isdigit():
            raise Invalid("only one trailing `=N` is allowed")
        claimed = int(tokens[-1])
        tokens = tokens[:k]
    if not tokens:
        raise Invalid("empty equation")
    # implicit multiplication, e.g. `2(3)` or `(2)3`, is two atoms in a row: the parser stops early
    p = _Parser(tokens)
    value = p.expr(0)
    if p.i != len(tokens):
        raise Invalid(f"unexpected {tokens[p.i]!r}")
    return value, p.used, "".join(tokens), claimed


def check_numbers(used: list[int], numbers: list[int]) -> str | None:
    """Why the numbers used break the rules, or None."""
    given, seen = Counter(numbers), Counter(used)
    for n, k in seen.items():
        if n not in given:
            return f"uses {n}, which is not among {numbers}"
        if k > given[n]:
            return f"uses {n} {k} times (given {given[n]})"
    if len(used) < 2:
        return "uses fewer than two numbers"
    return None


def extract(response: str, marker: str = "", **_) -> str | None:
    """The canonical equation, or None if none can be read (used by `format_only`)."""
    text = equation_text(response, marker)
    if text is None:
        return None
    try:
        return evaluate(text)[2]
    except Invalid:
        return None


def check(response: str, reference: str, marker: str = "") -> Outcome:
    try:
        numbers, target = parse_reference(reference)
    except (ValueError, KeyError, TypeError) as e:
        return oc.error(f"bad countdown reference ({type(e).__name__})")
    text = equation_text(response, marker)
    if text is None:
        return oc.unparseable(f"no answer marker {marker!r}" if marker else "empty response")
    try:
        value, used, canonical, claimed = evaluate(text)
    except Invalid as e:
        return oc.unparseable(str(e))
    problem = check_numbers(used, numbers)
    if problem:
        return oc.incorrect(canonical, problem)
    if isinstance(value, ZeroDivision):
        return oc.incorrect(canonical, "division by zero")
    if claimed is not None and claimed != value:
        return oc.incorrect(canonical, f"claims ={claimed} but the value is {value}")
    return oc.judged(value == target, canonical, f"value {value}, target {target}")
