"""Verifier `math`: the final answer, extracted, then compared with the reference by value.

Extraction (see :mod:`rlvr_cli.rewards.extract`): after the task's marker if it has one, otherwise the
methods of ``reward.extract`` in order (default: the last ``\\boxed{}``, then GSM8K's ``####``, then the
last number). An extracted answer longer than ``MAX_ANSWER_CHARS`` is ``unparseable``.

Comparison. Plain numbers on both sides (``-1,234.5``, ``3/4``, ``1.5e3``) are compared here, in
Python, without sympy (the fast path). Everything else is parsed with math-verify's LaTeX parser
(gold first, prediction second: the order matters there) and compared with the rules below, then
by ``math_verify.verify`` (sympy underneath) for what the rules do not cover.

What counts as equal (decisions, each with a test in ``tests/rewards/test_math_answer.py``):

- Exact numbers are equal only when exactly equal: ``1/2 = 0.5 = \\frac{2}{4} = \\dfrac12``,
  ``2\\sqrt{2} = \\sqrt{8}``. Compared at 60 significant digits, *relative* to their size, and when
  they agree there, not equal if sympy can show that their difference is not zero
  (``10^{10^{10}} + 1`` is not ``10^{10^{10}}``, though no 60-digit value tells them apart).
  math-verify instead rounds to 6 decimal places or chops tiny differences to zero, which makes
  ``1/2004!`` equal ``1/2006!`` and ``10^{-7}`` equal ``2\\cdot 10^{-7}``: both are ``incorrect`` here.
- A decimal is an approximation: when either side contains one, the two match if
  ``|a - b| <= rel_tol * max(|a|, |b|)`` (``rel_tol`` 5e-6: agreement to about 6 significant digits).
  So ``0.333333 = 1/3`` but ``0.33 != 1/3``; a decimal gold is taken at face value (``3.14 != \\pi``).
- A percent sign is a unit and is dropped: ``50\\% = 50``; ``0.5`` is *not* ``50\\%`` (math-verify
  accepts both). Units in ``\\text{}`` and ``^\\circ`` are dropped by math-verify's normalisation.
- An equation in the prediction against a gold that is not one (the known "right-hand side only"
  false positive): a leading variable is dropped (``x = 5`` answers ``5``), and *every* other side of
  the chain must equal the gold: ``x = 2+3 = 5`` is correct for 5, but ``1+1 = 3`` is ``incorrect``
  for 3 (math-verify compares only the last right-hand side). A gold assignment ``x = 5`` accepts a
  bare ``5``. An inequality never answers a number.
- Sets, tuples, intervals and matrices of numbers are compared element by element with the same
  number rules; a set must have exactly the gold's elements (``\\{1, 2\\}`` for ``\\{1, 2, 3\\}`` and
  ``2`` for ``\\pm 2`` are ``incorrect``: partial answers are wrong), a tuple also their order;
  an interval its ends and their openness.
- A LaTeX answer that does not parse is ``unparseable``: the comparison never falls back to some other
  number found in the text (math-verify's parser does, turning a broken ``\\frac{1}{2`` into ``2``).
- Text answers (``\\text{Monday}``) are compared case-insensitively by math-verify's symbol rule.
- A gold that does not parse is compared to the answer as normalised text.

Known residue: inside mixed structures math-verify decides (e.g. an interval against a tuple), and it
rounds decimals there to 6 places. ``verify`` here has no time limit: sympy can take unbounded time or
memory on hostile LaTeX (``9^{9^{9^{9}}}``), so untrusted responses go through the worker pool.
"""

from __future__ import annotations

import logging
import re
from fractions import Fraction

from rlvr_cli.rewards import outcome as oc
from rlvr_cli.rewards.extract import DEFAULT_EXTRACT, extract_answer, join_digit_groups
from rlvr_cli.rewards.outcome import Outcome

IN_PROCESS_SAFE = False
MAX_ANSWER_CHARS = 1000
DEFAULT_REL_TOL = 5e-6
EXACT_DIGITS = 60

_PLAIN_NUMBER = re.compile(
    r"(?P<sign>[+-]?)(?P<int>\d{1,3}(?:,\d{3})+|\d{1,300})?(?P<frac>\.\d{1,300})?(?:[eE](?P<exp>[+-]?\d{1,4}))?"
)
_PLAIN_RATIO = re.compile(r"([+-]?\d{1,300})\s*/\s*(\d{1,300})")
_PERCENT = re.compile(r"\\?%")


# --- the fast path: plain numbers --------------------------------------------------------------
def plain_number(text: str) -> tuple[Fraction, bool] | None:
    """(exact value, is a decimal) of a plain number, or None. `1,234.5` -> (2469/2, True)."""
    text = join_digit_groups(text)
    if text is None:
        return None
    text = text.replace(" ", "")
    m = _PLAIN_RATIO.fullmatch(text)
    if m:
        den = int(m.group(2))
        return (Fraction(int(m.group(1)), den), False) if den else None
    m = _PLAIN_NUMBER.fullmatch(text)
    if not m or not (m.group("int") or m.group("frac")):
        return None
    value = Fraction((m.group("int") or "0").replace(",", "") + (m.group("frac") or ""))
    if m.group("exp"):
        value *= Fraction(10) ** int(m.group("exp"))
    if m.group("sign") == "-":
        value = -value
    return value, bool(m.group("frac") or m.group("exp"))


def numbers_match(gold, pred, approximate: bool, rel_tol: float) -> bool:
    """Exact equality, or the relative tolerance when a decimal is involved (works for Fractions and mpmath-like floats)."""
    if not approximate:
        return gold == pred
    if isinstance(gold, Fraction) and isinstance(pred, Fraction):
        rel_tol = Fraction(rel_tol)  # exact: a float times 10**9999 would overflow
    return abs(gold - pred) <= rel_tol * max(abs(gold), abs(pred))


def format_fraction(value: Fraction) -> str:
    """`3/4`; beyond Python's 4300-digit int -> str limit, a 30-digit scientific form (`~1.0e+9999`)."""
    try:
        return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
    except ValueError:
        from mpmath import mp, mpf

        with mp.workdps(30):
            return "~" + mp.nstr(mpf(value.numerator) / value.denominator, 30)


# --- the sympy path ----------------------------------------------------------------------------
_mv = None


def _math_verify():
    """math-verify, imported on first use (it pulls in sympy and an ANTLR parser: about a second)."""
    global _mv
    if _mv is None:
        import math_verify

        for name in ("math_verify", "latex2sympy2_extended"):
            logging.getLogger(name).setLevel(logging.ERROR)
        _mv = math_verify
    return _mv


def normalize(text: str) -> str:
    """Drop what is a unit, not a value: the percent sign (see the module docstring)."""
    return _PERCENT.sub("", text).strip()


def parse_latex(text: str):
    """The answer as a sympy object, or None. The text is parsed as the content of one ``\\boxed{}``, and
    only that match is tried (``first_match``, no fallback), so a failed parse is a failure."""
    mv = _math_verify()
    config = [mv.LatexExtractionConfig(boxed_match_priority=0, try_extract_without_anchor=False)]
    try:
        found = mv.parse(
            "\\boxed{" + text + "}",
            extraction_config=config,
            fallback_mode="no_fallback",
            extraction_mode="first_match",
            parsing_timeout=None,
        )
    except RecursionError:
        return None
    return found[0] if found else None


def _is_relation(expr) -> bool:
    from latex2sympy2_extended.logic import And
    from sympy.core.relational import Relational

    if isinstance(expr, Relational):
        return True
    return isinstance(expr, And) and all(isinstance(a, Relational) for a in expr._unsorted_args)


def equation_sides(expr) -> list | None:
    """Sides of an equation or chain `a = b = c` ([a, b, c]); None for inequalities and other relations."""
    from latex2sympy2_extended.logic import And
    from sympy import Eq

    if isinstance(expr, Eq):
        return [expr.lhs, expr.rhs]
    if isinstance(expr, And) and all(isinstance(a, Eq) for a in expr._unsorted_args):
        sides = []
        for eq in expr._unsorted_args:
            if not sides:
                sides.append(eq.lhs)
            sides.append(eq.rhs)
        return sides
    return None


def _is_variable(expr) -> bool:
    from latex2sympy2_extended import is_expr_of_only_symbols

    return bool(is_expr_of_only_symbols(expr))


def _is_plain_number(expr) -> bool:
    from sympy import Expr

    return isinstance(expr, Expr) and bool(expr.is_number) and not expr.has_free()


def sympy_numbers_equal(gold, pred, rel_tol: float) -> bool:
    """Numbers compared by value, relative to their size (exactly, unless a decimal is involved)."""
    from sympy import Float, Rational, nan, zoo

    if isinstance(gold, Rational) and isinstance(pred, Rational):
        return gold == pred
    approximate = gold.has(Float) or pred.has(Float)
    g, p = gold.evalf(EXACT_DIGITS), pred.evalf(EXACT_DIGITS)
    if any(v.has(nan, zoo) or not v.is_number or v.is_infinite for v in (g, p)) or g.has_free() or p.has_free():
        return gold == pred  # infinities and undefined values: only structurally
    if approximate:
        return bool(abs(g - p) <= rel_tol * max(abs(g), abs(p)))
    if abs(g - p) > 10 ** -(EXACT_DIGITS - 15) * max(abs(g), abs(p)):
        return False
    # Equal to 45 digits. Exact numbers can still differ further down (10^{10^{10}} and 10^{10^{10}} + 1):
    # believe the digits unless sympy's own arithmetic shows the difference is not zero.
    return (gold - pred).is_zero is not False


def structures_equal(gold, pred, rel_tol: float) -> bool | None:
    """Numbers, and sets/tuples/intervals/matrices of them, compared by the rules here; None when the
    pair is of another kind (math-verify decides then)."""
    from sympy import FiniteSet, Interval, MatrixBase, Tuple

    if _is_plain_number(gold) and _is_plain_number(pred):
        return sympy_numbers_equal(gold, pred, rel_tol)
    if isinstance(gold, Tuple) and isinstance(pred, Tuple):
        return _all_pairs(list(gold.args), list(pred.args), rel_tol)
    if isinstance(gold, MatrixBase) and isinstance(pred, MatrixBase):
        if gold.shape != pred.shape:
            return False
        return _all_pairs(list(gold), list(pred), rel_tol)
    if isinstance(gold, Interval) and isinstance(pred, Interval):
        if (gold.left_open, gold.right_open) != (pred.left_open, pred.right_open):
            return False
        return _all_pairs([gold.start, gold.end], [pred.start, pred.end], rel_tol)
    if isinstance(gold, FiniteSet) and isinstance(pred, FiniteSet):
        return _sets_equal(list(gold.args), list(pred.args), rel_tol)
    return None


def _all_pairs(golds: list, preds: list, rel_tol: float) -> bool | None:
    if len(golds) != len(preds):
        return False
    verdicts = [structures_equal(g, p, rel_tol) for g, p in zip(golds, preds)]
    if any(v is False for v in verdicts):
        return False
    return True if all(v is True for v in verdicts) else None


def _sets_equal(golds: list, preds: list, rel_tol: float) -> bool | None:
    """Every gold element matched by a distinct predicted one and nothing left over (no partial answers)."""
    if len(golds) != len(preds):
        return False
    left = list(preds)
    for g in golds:
        for k, p in enumerate(left):
            verdict = structures_equal(g, p, rel_tol)
            if verdict is None:
                return None
            if verdict:
                del left[k]
                break
        else:
            return False
    return True


def equivalent(gold, pred, rel_tol: float = DEFAULT_REL_TOL) -> bool:
    """Whether the parsed prediction equals the parsed gold (the rules of the module docstring)."""
    if _is_relation(pred) and not _is_relation(gold):
        sides = equation_sides(pred)
        if sides is None:
            return False
        if _is_variable(sides[0]):
            sides = sides[1:]
        return all(equivalent(gold, side, rel_tol) for side in sides)
    if not _is_relation(pred) and _is_relation(gold):
        sides = equation_sides(gold)
        if sides is None or not _is_variable(sides[0]):
            return False
        gold = sides[-1]
    verdict = structures_equal(gold, pred, rel_tol)
    if verdict is not None:
        return verdict
    return bool(_math_verify().verify(gold, pred, timeout_seconds=None, strict=True))


def canonical(expr) -> str:
    """A majority-vote key: sympy's printed form with decimals turned into exact fractions (0.5 -> 1/2)."""
    from sympy import Float, Rational

    try:
        floats = expr.atoms(Float)
        if floats:
            expr = expr.xreplace({f: Rational(str(f)) for f in floats})
    except (AttributeError, TypeError, ValueError):
        pass
    try:
        return str(expr)
    except ValueError:  # an integer beyond Python's 4300-digit int -> str limit: its 30-digit float form
        return "~" + str(expr.evalf(30))


def normalized_text(text: str) -> str:
    return " ".join(text.lower().replace("\\text", "").replace("{", " ").replace("}", " ").split())


# --- the verifier --------------------------------------------------------------------------------
def extract(response: str, marker: str = "", extract: tuple[str, ...] = DEFAULT_EXTRACT, **_) -> str | None:
    """The extracted answer text (not parsed), or None (used by `format_only`)."""
    text, _how = extract_answer(response, marker, extract)
    return text


def fast_check(
    response: str,
    reference: str,
    marker: str = "",
    extract: tuple[str, ...] = DEFAULT_EXTRACT,
    rel_tol: float = DEFAULT_REL_TOL,
) -> Outcome | None:
    """The outcome when it can be decided without sympy, else None: no answer, an answer that is too
    long, or plain numbers on both sides. Linear in the response (extraction, then fixed regexes on at
    most MAX_ANSWER_CHARS characters), so the scorer runs it in-process and sends only the rest to the pool."""
    text, how = extract_answer(response, marker, extract)
    if text is None:
        return oc.unparseable(how)
    if len(text) > MAX_ANSWER_CHARS:
        return oc.unparseable(f"answer longer than {MAX_ANSWER_CHARS} characters ({how})")
    pred_text, gold_text = normalize(text), normalize(str(reference).strip().strip("$"))
    if join_digit_groups(pred_text) is None:
        return oc.unparseable(f"digits split by spaces, not one number: {pred_text[:40]!r} ({how})")
    gold_num, pred_num = plain_number(gold_text), plain_number(pred_text)
    if gold_num and pred_num:
        (g, g_dec), (p, p_dec) = gold_num, pred_num
        equal = numbers_match(g, p, g_dec or p_dec, rel_tol)
        return oc.judged(equal, format_fraction(p), f"{pred_text} vs {gold_text} ({how}, plain numbers)")
    return None


def check(
    response: str,
    reference: str,
    marker: str = "",
    extract: tuple[str, ...] = DEFAULT_EXTRACT,
    rel_tol: float = DEFAULT_REL_TOL,
) -> Outcome:
    quick = fast_check(response, reference, marker, extract, rel_tol)
    if quick is not None:
        return quick
    text, how = extract_answer(response, marker, extract)
    pred_text, gold_text = normalize(text), normalize(str(reference).strip().strip("$"))
    gold = _parse_number_or_latex(gold_text)
    pred = _parse_number_or_latex(pred_text)
    if pred is None:
        if gold is None and normalized_text(pred_text) == normalized_text(gold_text):
            return oc.correct(normalized_text(pred_text), "equal as text (neither parses)")
        return oc.unparseable(f"cannot parse {pred_text[:60]!r} ({how})", answer=normalized_text(pred_text))
    answer = canonical(pred)
    if gold is None:
        equal = normalized_text(pred_text) == normalized_text(gold_text)
        return oc.judged(equal, answer, "the reference does not parse; compared as text")
    return oc.judged(equivalent(gold, pred, rel_tol), answer, f"{pred_text[:40]} vs {gold_text[:40]} ({how})")


def _parse_number_or_latex(text: str):
    """A plain number as an exact sympy value (decimals as Floats), anything else through the LaTeX parser."""
    num = plain_number(text)
    if num is not None:
        from sympy import Float, Rational

        value, is_decimal = num
        if is_decimal and value.denominator != 1:
            return Float(value.numerator, EXACT_DIGITS) / value.denominator
        return Rational(value.numerator, value.denominator)
    return parse_latex(text)


def warm_up() -> None:
    """Import and exercise the parser once (a worker does this before it takes its first timed check)."""
    check("\\boxed{\\frac{1}{2}}", "0.5")
    check("\\boxed{x = 2+3 = 5}", "\\{1, 2\\}")
