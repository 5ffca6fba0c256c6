"""builtin:calculator (rlvr_cli/envs/calculator.py): exact arithmetic without eval, errors shown to the
model, and a deterministic error rate."""

from __future__ import annotations

from fractions import Fraction

import pytest

from rlvr_cli.envs import episode_factory
from rlvr_cli.envs.calculator import CalcError, Calculator, evaluate, show
from rlvr_cli.models.tokenizer import build_char_tokenizer
from rlvr_cli.recipe.environment import EnvironmentSpec


@pytest.mark.parametrize("expression, value", [
    ("347*28", "9716"), ("1234+5678+9012", "15924"), ("2*(3+4)-5", "9"), ("7/2", "3.5"), ("1/3", "0.333333"),
    ("-2/3", "-0.666667"), ("--3", "3"), ("10-2-3", "5"), ("100/10/5", "2"), (" 6 * 7 ", "42"), ("0-5*2", "-10"),
    ("1/8", "0.125"), ("1/3000000", "0"),
])
def test_arithmetic(expression, value):
    assert show(evaluate(expression)) == value


def test_precedence_and_associativity_by_hand():
    assert evaluate("2+3*4") == 14 and evaluate("(2+3)*4") == 20
    assert evaluate("8-4-2") == 2 and evaluate("8/4/2") == 1  # left to right
    assert evaluate("6/4") == Fraction(3, 2)


@pytest.mark.parametrize("expression, says", [
    ("5/0", "division by zero"), ("5/(3-3)", "division by zero"), ("", "empty"), ("1+", "unexpected end"),
    ("(1+2", "missing )"), ("2**3", "unexpected '*'"), ("__import__('os')", "unexpected '_'"), ("1 2", "unexpected 2"),
    ("9" * 41, "longer than 40 digits"), ("1+" * 200 + "1", "longer than 256"),
])
def test_what_calc_refuses(expression, says):
    with pytest.raises((CalcError, ZeroDivisionError), match=says.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")):
        evaluate(expression)


def spec(rate: float) -> EnvironmentSpec:
    return EnvironmentSpec(factory="builtin:calculator", options={"error_rate": rate}, max_turns=64, max_output_tokens=64)


def replies(rate: float, row_id: str, n: int = 40) -> list[str]:
    ep = episode_factory(spec(rate), build_char_tokenizer(), "builtin:tiny")({})
    ep.reset({"id": row_id, "prompt": "347*28="})
    return [ep.step("<calc>347*28</calc>").text for _ in range(n)]


def test_division_by_zero_is_a_failed_call_in_the_alphabet():
    ep = episode_factory(spec(0.0), build_char_tokenizer(), "builtin:tiny")({})
    ep.reset({"id": "a"})
    reply = ep.step("<calc>5/0</calc>")
    assert reply.failed and reply.text == "<r>error: zerodivisionerror: division by zero</r>"


def test_error_rate_is_deterministic_per_row_and_call():
    a, again, other = replies(0.5, "row1"), replies(0.5, "row1"), replies(0.5, "row2")
    assert a == again  # the same row and calls: the same answers
    assert a != other  # another row: other calls are wrong
    wrong = sum(r != "<r>9716</r>" for r in a)
    assert 8 <= wrong <= 32, wrong  # about half of 40 (binomial sd 3.2)
    shifts = {abs(int(r[3:-4]) - 9716) for r in a if r != "<r>9716</r>"}
    assert shifts <= set(range(1, 10))
    assert set(replies(0.0, "row1")) == {"<r>9716</r>"} and "<r>9716</r>" not in replies(1.0, "row1")


def test_the_calculator_class_is_a_trl_environment():
    c = Calculator()
    assert c.reset(id="x", prompt="p") is None and c.calc("6*7") == "42"
    with pytest.raises(ValueError, match="error_rate"):
        Calculator(error_rate=-0.1)


def test_trl_can_read_the_calc_tools_schema():
    """TRL builds each tool's JSON schema with transformers' get_json_schema, which needs type hints and an
    Args section: the exported environment_factory=Calculator must pass it."""
    from transformers.utils import get_json_schema

    fn = get_json_schema(Calculator().calc)["function"]
    assert fn["name"] == "calc" and fn["parameters"]["required"] == ["expression"]
    assert fn["parameters"]["properties"]["expression"]["type"] == "string"
