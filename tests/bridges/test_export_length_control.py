"""`rlvr export` names every length control it cannot carry (reward.length_control), for both targets."""

from __future__ import annotations

import pytest

from rlvr_cli.bridges import export_recipe
from rlvr_cli.recipe.load import load_recipe

KNOBS = ("brevity_bonus", "group_length_penalty", "incorrect_offset")


@pytest.mark.parametrize("target", ["trl", "verl"])
def test_one_warning_per_control_set(target):
    r = load_recipe("dr_grpo", ["reward.length_control.brevity_bonus=1", "reward.length_control.incorrect_offset=-1"])
    named = [w.split(": ", 1)[0] for w in export_recipe(r, target).warnings]
    assert [n for n in named if n.startswith("reward.length_control")] == [
        "reward.length_control.brevity_bonus", "reward.length_control.incorrect_offset"]
    assert all("not exported" in w for w in export_recipe(r, target).warnings if "length_control" in w)


@pytest.mark.parametrize("target", ["trl", "verl"])
def test_no_warning_without_controls(target):
    assert not [w for w in export_recipe(load_recipe("grpo"), target).warnings if "length_control" in w]


@pytest.mark.parametrize("target", ["trl", "verl"])
@pytest.mark.parametrize("arm, knob", [("brevity_bonus", "brevity_bonus"), ("length_penalty", "group_length_penalty"),
                                       ("offset_dr_grpo", "incorrect_offset")])
def test_experiment_arms(target, arm, knob):
    r = load_recipe(f"recipes/experiments/length_check/{arm}.yaml")
    named = [w.split(": ", 1)[0] for w in export_recipe(r, target).warnings if "length_control" in w]
    assert named == [f"reward.length_control.{knob}"]
