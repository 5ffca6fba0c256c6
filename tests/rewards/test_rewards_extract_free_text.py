"""Free-text extractors (`answer_tags`, `answer_colon` and their lenient forms) on hand-written
responses of the kind an instruct model writes, and the `format` reward that follows `reward.extract`."""

from __future__ import annotations

import pytest

from rlvr_cli.rewards.extract import extract_answer
from rlvr_cli.rewards.format_reward import format_reward
from rlvr_cli.rewards.registry import verify

CASES = [
    # response, answer_tags, answer_colon, answer_tags_lenient, answer_colon_lenient
    ("<answer>12</answer>", "12", None, "12", None),
    ("<answer> 12 </answer> and later 13", "12", None, "12", None),
    ("<answer>1</answer> then <answer>12</answer>", "12", None, "12", None),
    ("<answer>The sum is 12.</answer>", "The sum is 12", None, "12", None),
    ("<answer>6 + 6 = 12</answer>", "6 + 6 = 12", None, "6 + 6 = 12", None),  # no letters: left to the verifier
    ("Answer: 12", None, "12", None, "12"),
    ("6 + 6 = 12\n**Final Answer:** 12\nThat is all.", None, "12", None, "12"),
    ("answer:12.", None, "12", None, "12"),
    ("The answer is 12, since 6 + 6 = 12.", None, None, None, "12"),
    ("The answer is 12. To check: 12 - 6 = 6.", None, None, None, "12"),
    ("answer = 7", None, None, None, "7"),
    ("Answer: twelve", None, "twelve", None, "twelve"),
    ("6 + 4 equals 10.", None, None, None, None),
]


@pytest.mark.parametrize("response,tags,colon,tags_l,colon_l", CASES)
def test_each_extractor_on_hand_written_responses(response, tags, colon, tags_l, colon_l):
    for method, want in (("answer_tags", tags), ("answer_colon", colon), ("answer_tags_lenient", tags_l),
                         ("answer_colon_lenient", colon_l)):
        assert extract_answer(response, "", (method,))[0] == want, method


def test_a_sign_without_its_answer_ends_the_search():
    # an unclosed tag or an empty `Answer:` is unreadable: the last number is NOT tried after it
    assert extract_answer("<answer>12", "", ("answer_tags", "last_number")) == (None, "<answer> without </answer>")
    assert extract_answer("6+6=12. Answer:", "", ("answer_colon", "last_number")) == (None, "nothing after answer:")
    assert extract_answer("No tags, 12", "", ("answer_tags", "last_number")) == ("12", "last_number")


def test_strict_and_lenient_differ_in_the_integer_verdict():
    response = "The answer is 12, since 6 + 6 = 12."
    assert verify("integer", response, "12", extract=("answer_colon",)).outcome == "unparseable"
    assert verify("integer", response, "12", extract=("answer_colon_lenient",)).outcome == "correct"
    # the last number is not the answer the model stated
    stated = "The answer is 12. To check: 12 - 6 = 6."
    assert verify("integer", stated, "12", extract=("last_number",)).outcome == "incorrect"
    assert verify("integer", stated, "12", extract=("answer_colon_lenient", "last_number")).outcome == "correct"
    tagged = "<answer>The sum is 12.</answer>"
    assert verify("integer", tagged, "12", extract=("answer_tags",)).outcome == "unparseable"
    assert verify("integer", tagged, "12", extract=("answer_tags_lenient",)).outcome == "correct"


def test_format_reward_asks_for_the_recipes_explicit_methods():
    assert format_reward("Answer: 7", "integer", "", extract=("answer_colon", "last_number")) == 1.0
    assert format_reward("it is 7", "integer", "", extract=("answer_colon", "last_number")) == 0.0
    assert format_reward("<answer>7</answer>", "integer", "", extract=("answer_colon",)) == 0.0
    # with only the last-number fallback listed, the format is the default explicit one (\boxed or ####)
    assert format_reward("it is 7", "integer", "", extract=("last_number",)) == 0.0
    assert format_reward("\\boxed{7}", "integer", "", extract=("last_number",)) == 1.0


def test_extractors_are_linear_on_long_adversarial_text():
    import time

    text = "answer " * 200_000 + "answer is" + " 1" * 100_000
    t0 = time.perf_counter()
    for method in ("answer_colon", "answer_colon_lenient", "answer_tags_lenient"):
        extract_answer(text, "", (method,))
    assert time.perf_counter() - t0 < 5
