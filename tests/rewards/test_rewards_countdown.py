"""Verifier `countdown`: a safe parser, each number at most once, the exact target."""

import json
import time

import pytest

from rlvr_cli.rewards import verify
from rlvr_cli.rewards.countdown import MAX_DEPTH

C, I, U, E = "correct", "incorrect", "unparseable", "error"
REF = json.dumps({"numbers": [3, 5, 7], "target": 22})


def check(expr: str, ref: str = REF):
    return verify("countdown", "5*3=15,15+7=22#" + expr, ref, marker="#")


@pytest.mark.parametrize(
    "expr, expected",
    [
        ("(5*3)+7", C),
        ("5*3+7", C),  # precedence
        ("7+3*5", C),
        (" ( 5 * 3 ) + 7 ", C),  # spaces
        ("(5*3)+7=22", C),  # a trailing =target
        ("(5*3)+7=23", I),  # a trailing claim that is false
        ("5*3+7+3-3", I),  # 3 used twice (given once)
        ("5*5-3", I),  # 5 used twice
        ("15+7", I),  # 15 is not given
        ("3+5+7", I),  # value 15, not 22
        ("7*3+5/5", I),  # reuse of 5 (value 22, but still wrong)
        ("7/(5-5)", I),  # division by zero (and a reuse)
        ("(7/(3-3))*5", I),
        ("22", I),  # fewer than two numbers
        ("7", I),
        ("(3+5)*7/7", I),
        ("5^3", U),  # no exponents
        ("5**3", U),
        ("9**9**9**9", U),  # never computed
        ("-3+25", U),  # unary minus
        ("3(5)+7", U),  # implicit multiplication
        ("(5*3+7", U),  # unbalanced
        ("5*3)+7", U),
        ("", U),
        ("5*3+7 the end", U),
        ("5 % 3", U),
        ("(5*3)+7=22=22", U),  # only one trailing =N
    ],
)
def test_equations(expr, expected):
    assert check(expr).outcome == expected


def test_fractions_are_allowed_mid_way():
    ref = json.dumps({"numbers": [7, 2, 4], "target": 14})
    assert check("(7/2)*4", ref).outcome == C
    assert check("7/2*4", ref).outcome == C
    ref = json.dumps({"numbers": [1, 3, 4, 6], "target": 24})
    assert check("6/(1-3/4)", ref).outcome == C  # the classic: 3/4 mid-way


def test_duplicated_numbers_may_each_be_used_once():
    ref = json.dumps({"numbers": [5, 5, 2], "target": 12})
    assert check("5+5+2", ref).outcome == C
    assert check("5+5+5-3", ref).outcome == I


def test_the_equation_is_after_the_last_marker_or_the_last_line():
    assert verify("countdown", "#3+5#(5*3)+7", REF, marker="#").outcome == C
    assert verify("countdown", "(5*3)+7", REF, marker="#").outcome == U  # no marker
    assert verify("countdown", "thinking...\n(5*3)+7", REF).outcome == C  # no marker given: last line


def test_canonical_answer_is_the_equation_without_spaces():
    assert check(" ( 5*3 ) + 7").answer == check("(5*3)+7").answer == "(5*3)+7"
    assert check("5*3*7+3").answer == "5*3*7+3"


def test_bad_reference_is_a_checker_error():
    assert check("3+5", "not json").outcome == E
    assert check("3+5", json.dumps({"numbers": [3, 5]})).outcome == E


@pytest.mark.parametrize(
    "expr",
    [
        "(" * 10_000 + "3+5" + ")" * 10_000,  # 10,000 nested parentheses
        "(" * (MAX_DEPTH + 1) + "3+5" + ")" * (MAX_DEPTH + 1),
        "3+" * 500_000 + "5",  # a 1 MB equation
        "9" * 1_000_000,  # a 1 MB number
        "3\x00+5",  # NUL byte
        b"3+\xff\xfe5".decode("utf-8", "surrogateescape"),  # invalid UTF-8, as a lenient decoder leaves it
    ],
)
def test_adversarial_equations_are_rejected_quickly(expr):
    start = time.perf_counter()
    out = check(expr)
    assert time.perf_counter() - start < 0.5  # in-process and linear: no time limit needed
    assert out.outcome == U
