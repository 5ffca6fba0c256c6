"""`rlvr export` carries the environment: section (rlvr_cli/bridges/export_tools.py): TRL's
max_tool_calling_iterations and environment_factory, verl's rollout.multi_turn.*; every knob without a
counterpart is one warning naming it."""

from __future__ import annotations

import pytest

from rlvr_cli.bridges import export_recipe
from rlvr_cli.recipe.load import load_recipe

CALC = ["environment.factory=builtin:calculator", "environment.max_turns=4", "environment.max_output_tokens=16",
        "environment.truncate_side=right"]
KNOBS = ["environment.env_tokens=echo", "environment.kl_on_env_tokens=true", "environment.divisor_counts_env_tokens=true",
         "environment.void_turn_filter=true", "environment.call_cost=0.1"]


def fields(warnings: list[str]) -> set[str]:
    return {w.split(":", 1)[0] for w in warnings}


def test_trl_gets_the_turn_limit_and_the_factory():
    exp = export_recipe(load_recipe("grpo", CALC), "trl")
    assert exp.settings["max_tool_calling_iterations"] == 3  # 4 model turns = 3 tool calls
    assert any("environment_factory=Calculator" in n and "from rlvr_cli.envs.calculator import Calculator" in n for n in exp.notes)
    assert {"environment.protocol", "environment.tool_timeout_s", "environment.max_output_tokens"} <= fields(exp.warnings)
    assert not fields(exp.warnings) & {"environment.env_tokens", "environment.call_cost"}  # rlvr's defaults: TRL's own


def test_verl_gets_multi_turn_with_the_kept_side_named_its_way():
    exp = export_recipe(load_recipe("grpo", CALC), "verl")
    s = exp.settings
    assert s["actor_rollout_ref.rollout.multi_turn.enable"] is True
    assert s["actor_rollout_ref.rollout.multi_turn.max_assistant_turns"] == 4
    assert s["actor_rollout_ref.rollout.multi_turn.max_tool_response_length"] == 16
    assert s["actor_rollout_ref.rollout.multi_turn.tool_response_truncate_side"] == "left"  # keeps the start, as rlvr's right
    assert s["actor_rollout_ref.rollout.agent.default_agent_loop"] == "tool_agent"
    middle = export_recipe(load_recipe("grpo", CALC + ["environment.truncate_side=left"]), "verl")
    assert middle.settings["actor_rollout_ref.rollout.multi_turn.tool_response_truncate_side"] == "right"
    assert "environment.max_output_tokens" not in fields(exp.warnings)  # builtin: a character is a token


@pytest.mark.parametrize("target", ["trl", "verl"])
def test_each_loss_knob_without_a_counterpart_is_one_warning(target):
    exp = export_recipe(load_recipe("grpo", CALC + KNOBS), target)
    expected = {k.split("=")[0] for k in KNOBS}
    assert expected <= fields(exp.warnings)
    assert sum(w.startswith("environment.env_tokens") for w in exp.warnings) == 1


@pytest.mark.parametrize("target", ["trl", "verl"])
def test_no_environment_exports_nothing_of_it(target):
    exp = export_recipe(load_recipe("grpo"), target)
    assert not any(w.startswith("environment") for w in exp.warnings)
    assert "max_tool_calling_iterations" not in exp.settings
    assert not any("multi_turn" in k for k in exp.settings)


def test_the_cli_prints_the_warnings_and_strict_refuses(cli):
    res = cli("export", "grpo", "--to", "verl", "--set", "environment.factory=builtin:calculator",
              "--set", "environment.env_tokens=train", "--strict")
    assert res.code == 2 and "environment.env_tokens" in res.stderr and "Traceback" not in res.stderr
