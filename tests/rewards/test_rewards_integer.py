"""Verifier `integer`: the arithmetic task's marker format, and the extraction chain without a marker."""

import pytest

from rlvr_cli.rewards import verify

C, I, U, E = "correct", "incorrect", "unparseable", "error"


@pytest.mark.parametrize(
    "response, expected, answer",
    [
        ("#632", C, "632"),
        ("12,13,6#632", C, "632"),
        ("7+5=12,4+8+1=13,3+2+1=6#632", C, "632"),
        ("12,13,6#632=632=632", C, "632"),  # redundant checks restating the answer
        ("=632=632#632", C, "632"),  # checks before the marker are not read
        ("#0632", C, "632"),  # leading zeros do not matter
        ("#+632", C, "632"),
        ("#631", I, "631"),
        ("#632=631", I, "632"),  # a check that contradicts the answer
        ("#632=63", I, "632"),  # a check cut short by the length limit
        ("12#999#632", C, "632"),  # the LAST marker counts
        ("12#632#999", I, "999"),
        ("#632 ", C, "632"),
        ("632", U, None),  # no marker
        ("#", U, None),
        ("#632 wait", U, None),  # the built-in format is exact
        ("#6 32", U, None),
        ("#632.0", U, None),
        ("#" + "9" * 2000, U, None),  # more digits than any answer: not read
    ],
)
def test_marker_format(response, expected, answer):
    out = verify("integer", response, "632", marker="#")
    assert (out.outcome, out.answer) == (expected, answer)
    assert out.reward == (1.0 if expected == C else 0.0)


@pytest.mark.parametrize(
    "response, gold, expected, answer",
    [
        ("so the total is \\boxed{18}.", "18", C, "18"),
        ("Janet has 3 eggs ... #### 18", "18", C, "18"),
        ("She earns $18 a day.", "18", C, "18"),  # the last number
        ("\\boxed{\\$1,234}", "1234", C, "1234"),
        ("\\boxed{18.00}", "18", C, "18"),  # a zero fraction is an integer
        ("\\boxed{18.5}", "18", I, "18.5"),  # a number, but not the integer
        ("\\boxed{-7}", "-7", C, "-7"),
        ("\\boxed{7}", "-7", I, "7"),
        ("\\boxed{eighteen}", "18", U, None),
        ("\\boxed{18 \\text{ dollars}}", "18", U, None),  # units: use the math verifier
        ("no number at all", "18", U, None),
        ("\\boxed{18", "18", U, None),  # a broken box: no fallback to the last number
        ("\\boxed{12} then 18", "18", I, "12"),  # the box wins over a later number
    ],
)
def test_extraction_chain_without_marker(response, gold, expected, answer):
    out = verify("integer", response, gold)
    assert (out.outcome, out.answer) == (expected, answer)


def test_extraction_methods_are_configurable():
    assert verify("integer", "It is 18.", "18", extract=("boxed",)).outcome == U
    assert verify("integer", "#### 17\nlater \\boxed{18}", "18", extract=("gsm8k", "boxed")).outcome == I
    assert verify("integer", "#### 17\nlater \\boxed{18}", "18", extract=("boxed", "gsm8k")).outcome == C


def test_a_reference_that_is_not_an_integer_is_a_checker_error():
    assert verify("integer", "#3", "three", marker="#").outcome == E
    assert verify("integer", "#1234", "1,234", marker="#").outcome == C
