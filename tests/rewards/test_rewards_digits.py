"""Numbers at the edges, for the integer and math verifiers alike (the decisions are in docs/tasks.md "Numbers at the edges").

- an answer too large for a float (``1e9999``) is a number that is not the gold: ``incorrect``, never ``error``;
- a digit of any script (fullwidth, Arabic-Indic, Devanagari, mathematical bold) is that digit: the value counts;
- a space inside a number is a thousands separator only in the SI form (``1 234 567``); ``4 2`` is two
  numbers, not one: ``unparseable``.
"""

import pytest

from rlvr_cli.rewards import verify

VERIFIERS = ["integer", "math"]


@pytest.mark.parametrize("verifier", VERIFIERS)
@pytest.mark.parametrize("response", ["#### 1e9999", "\\boxed{1e9999}", "#### -1e9999", "#### 1.5e9999"])
def test_a_number_beyond_float_is_incorrect_not_an_error(verifier, response):
    out = verify(verifier, response, "42")
    expected = "unparseable" if verifier == "integer" else "incorrect"  # the integer verifier reads no exponents
    assert out.outcome == expected, out.detail


def test_a_huge_answer_equal_to_a_huge_gold_is_correct():
    out = verify("math", "#### 1e9999", "1e9999")
    assert out.outcome == "correct" and out.answer.startswith("~1.0e+9999")
    assert verify("math", "#### 1e9999", "1.0001e9999").outcome == "incorrect"


@pytest.mark.parametrize("verifier", VERIFIERS)
@pytest.mark.parametrize("digits", ["４２", "٤٢", "۴۲", "४२", "𝟒𝟐", "4٢"])
def test_digits_of_any_script_are_digits(verifier, digits):
    out = verify(verifier, f"#### {digits}", "42")
    assert out.outcome == "correct", out.detail
    assert verify(verifier, f"#### {digits}", "43").outcome == "incorrect"


def test_the_canonical_answer_is_ascii_so_votes_agree():
    assert verify("integer", "#### ４２", "42").answer == verify("integer", "#### 42", "42").answer == "42"


@pytest.mark.parametrize("verifier", VERIFIERS)
@pytest.mark.parametrize("response", ["#### 4 2", "\\boxed{4 2}", "#### 1 23", "#### 12 345 6", "#### 4\u20032"])
def test_digits_split_by_spaces_are_not_one_number(verifier, response):
    for gold in ("42", "6", "123", "123456"):
        out = verify(verifier, response, gold)
        assert out.outcome == "unparseable", (gold, out.outcome, out.detail)


@pytest.mark.parametrize("verifier", VERIFIERS)
@pytest.mark.parametrize("response", ["#### 1 234 567", "#### 1\u202f234\u202f567", "#### 1\u00a0234\u00a0567", "#### 1,234,567"])
def test_si_thousands_grouping_is_one_number(verifier, response):
    assert verify(verifier, response, "1234567").outcome == "correct"
