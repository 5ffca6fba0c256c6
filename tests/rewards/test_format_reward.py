"""rlvr_cli/rewards/format_reward.py: the `format` reward's rules, one case each."""

from __future__ import annotations

from rlvr_cli.rewards.format_reward import after_think, explicit_methods, format_reward


def test_a_think_block_must_be_leading_single_and_not_empty():
    assert after_think("<think>so 12</think> # 12") == " # 12"
    assert after_think("  <think>x</think>y") == "y"
    assert after_think("12 <think>x</think>") is None  # not leading
    assert after_think("<think>a</think><think>b</think>") is None  # two blocks
    assert after_think("<think>  </think> # 12") is None  # nothing thought
    assert after_think("<think>x") is None


def test_the_marker_and_a_readable_answer_after_it():
    assert format_reward("347+285 # 632", "integer", "#") == 1.0
    assert format_reward("347+285 # 6a", "integer", "#") == 0.0  # marker, no readable integer
    assert format_reward("632", "integer", "#") == 0.0  # no marker
    assert format_reward("<think>add</think># 632", "integer", "#", think=True) == 1.0
    assert format_reward("# 632", "integer", "#", think=True) == 0.0


def test_without_a_marker_the_last_number_fallback_does_not_count():
    assert explicit_methods(["boxed", "last_number"]) == ("boxed",)
    assert explicit_methods(["last_number"]) != ()  # the explicit defaults then
    assert format_reward("the answer is 12", "math", "", extract=["boxed", "last_number"]) == 0.0
    assert format_reward("the answer is \\boxed{12}", "math", "", extract=["boxed", "last_number"]) == 1.0
    assert format_reward("```python\nprint(1)\n```", "code", "") == 1.0
    assert format_reward("print(1)", "code", "") == 0.0
