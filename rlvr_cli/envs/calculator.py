"""The built-in environment `builtin:calculator`: one tool, ``calc(expression)``, on the toy tasks.

``calc`` evaluates + - * / and parentheses over integers with a small recursive-descent parser (no
``eval``), in exact fractions: ``calc("347*28")`` is `9716`, ``calc("7/2")`` `3.5`, ``calc("1/3")``
`0.333333` (six decimals, rounded half-even), and a division by zero is an error shown to the model.

Option ``error_rate`` (0..1): that fraction of calls returns a wrong result (the true one shifted by
+-1..9), to study over-trust in a tool. Whether the k-th call of a trajectory is wrong, and by how much,
is a pure function of the task row's ``id`` (else its ``prompt``), k and the expression, so runs are
reproducible and the G trajectories of a prompt's group that make the same call get the same answer.
"""

from __future__ import annotations

import hashlib
import re
from fractions import Fraction

MAX_EXPRESSION_CHARS = 256
MAX_DIGITS = 40
"""The longest integer literal ``calc`` reads (its results stay printable: no exponent operator)."""
_TOKEN = re.compile(r"\s*(?:(\d+)|(.))")


class CalcError(ValueError):
    """An expression ``calc`` cannot evaluate (the message is shown to the model)."""


def _tokens(expression: str) -> list:
    out = []
    for number, op in _TOKEN.findall(expression.strip()):
        if number:
            if len(number) > MAX_DIGITS:
                raise CalcError(f"a number longer than {MAX_DIGITS} digits")
            out.append(int(number))
        elif op.strip():
            if op not in "+-*/()":
                raise CalcError(f"unexpected {op!r} (calc reads integers, + - * / and parentheses)")
            out.append(op)
    return out


class _Parser:
    """expr := term (('+'|'-') term)*; term := factor (('*'|'/') factor)*; factor := ('-'|'+') factor | INT | '(' expr ')'."""

    def __init__(self, tokens: list):
        self.tokens, self.i = tokens, 0

    def peek(self):
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self):
        tok = self.peek()
        self.i += 1
        return tok

    def expr(self) -> Fraction:
        value = self.term()
        while self.peek() in ("+", "-"):
            value = value + self.term() if self.take() == "+" else value - self.term()
        return value

    def term(self) -> Fraction:
        value = self.factor()
        while self.peek() in ("*", "/"):
            op, rhs = self.take(), self.factor()
            if op == "/" and rhs == 0:
                raise ZeroDivisionError("division by zero")
            value = value * rhs if op == "*" else value / rhs
        return value

    def factor(self) -> Fraction:
        tok = self.take()
        if tok in ("-", "+"):
            value = self.factor()
            return -value if tok == "-" else value
        if isinstance(tok, int):
            return Fraction(tok)
        if tok == "(":
            value = self.expr()
            if self.take() != ")":
                raise CalcError("missing )")
            return value
        raise CalcError("unexpected end" if tok is None else f"unexpected {tok!r}")


def evaluate(expression: str) -> Fraction:
    """The exact value of ``expression``; ``CalcError`` or ``ZeroDivisionError`` when it has none."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalcError(f"an expression longer than {MAX_EXPRESSION_CHARS} characters")
    tokens = _tokens(expression)
    if not tokens:
        raise CalcError("empty expression")
    parser = _Parser(tokens)
    value = parser.expr()
    if parser.peek() is not None:
        raise CalcError(f"unexpected {parser.peek()!r}")
    return value


def show(value: Fraction) -> str:
    """`9716`, `-3`, `3.5`, `0.333333`: an integer as it is, else six decimals without trailing zeros."""
    if value.denominator == 1:
        return str(value.numerator)
    micro = round(value * 10**6)  # Fraction's round: half to even
    whole, rest = divmod(abs(micro), 10**6)
    text = (f"{whole}.{rest:06d}".rstrip("0").rstrip(".")) if rest else str(whole)
    return "-" + text if micro < 0 else text


def _unit(*parts) -> int:
    """A 64-bit number that is a pure function of ``parts`` (the same in every process)."""
    key = "\x1f".join(str(p) for p in parts).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")


class Calculator:
    """The environment: ``reset(**row)`` keeps the row's identity, ``calc`` is the one tool."""

    def __init__(self, error_rate: float = 0.0):
        if isinstance(error_rate, bool) or not isinstance(error_rate, (int, float)) or not 0 <= error_rate <= 1:
            raise ValueError(f"error_rate must be a number in [0, 1], not {error_rate!r}")
        self.error_rate = float(error_rate)
        self._key, self._calls = "", 0

    def reset(self, **row) -> None:
        self._key, self._calls = str(row.get("id", row.get("prompt", ""))), 0
        return None

    def calc(self, expression: str) -> str:
        """Evaluate an arithmetic expression of integers with + - * / and parentheses.

        Args:
            expression: The expression, e.g. 347*28.
        """
        k = self._calls
        self._calls += 1
        value = evaluate(expression)
        if self.error_rate > 0:
            h = _unit(self._key, k, expression.strip())
            if (h >> 11) / 2.0**53 < self.error_rate:
                shift = 1 + (h & 0xFF) % 9
                value += shift if (h >> 8) & 1 else -shift
        return show(value)
