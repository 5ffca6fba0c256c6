"""The ``environment:`` section carried to TRL and verl, and every knob they have no counterpart for.

Read from TRL (``grpo_trainer.py``, ``grpo_config.py`` at f2cd577, 2026-07) and verl
(``verl/trainer/config/rollout/rollout.yaml``, ``verl/experimental/agent_loop/tool_agent_loop.py`` at
b178a3c, 2026-01):

| rlvr `environment.` | TRL | verl (`actor_rollout_ref.rollout.`) |
|---|---|---|
| `factory`, `options` | `GRPOTrainer(environment_factory=...)`, called with no arguments (options: `functools.partial`) | `multi_turn.tool_config_path`: a YAML of `BaseTool` classes; no environment object (not written by the export) |
| `tools` | `GRPOTrainer(tools=[...])` | `BaseTool`s in the tool config |
| `max_turns` | `max_tool_calling_iterations = max_turns - 1` | `multi_turn.max_assistant_turns` |
| `protocol` | the chat template's tool calls (`hermes` for Qwen) | `multi_turn.format: hermes` |
| `max_output_tokens`, `truncate_side` | none (warned) | `multi_turn.max_tool_response_length` (characters), `tool_response_truncate_side` (named by the side *kept*: rlvr's `right` is verl's `left`) |
| `tool_timeout_s` | none (warned) | none (warned) |
| `env_tokens`, `echo_weight`, `kl_on_env_tokens`, `divisor_counts_env_tokens`, `void_turn_filter`, `call_cost` | none: both always mask environment tokens from the loss and its KL, and count only the model's tokens (warned unless rlvr does the same) | the same |
"""

from __future__ import annotations

from rlvr_cli.bridges.base import Warnings

VERL_SIDE = {"right": "left", "left": "right", "middle": "middle"}
"""rlvr's ``truncate_side`` names the side *cut*; verl's ``tool_response_truncate_side`` the side kept
(``tool_agent_loop.py``: `left` keeps ``text[:n]``)."""

LOSS_KNOBS = (
    ("env_tokens", lambda e: e.env_tokens != "mask",
     "{t} masks environment (tool) tokens from the policy loss; rlvr's `{v}` has no counterpart"),
    ("kl_on_env_tokens", lambda e: e.kl_on_env_tokens,
     "{t} masks environment tokens from the KL term too; KL on them has no counterpart"),
    ("divisor_counts_env_tokens", lambda e: e.divisor_counts_env_tokens,
     "{t}'s length divisor counts the model's tokens only; counting environment tokens has no counterpart"),
    ("void_turn_filter", lambda e: e.void_turn_filter,
     "{t} has no void-turn filter (SimpleTIR): trajectories with a void turn stay in the batch"),
    ("call_cost", lambda e: e.call_cost > 0,
     "{t} has no per-call cost: subtract it in a reward function (or get_reward) from the trajectory's call count"),
)
"""The loss and reward knobs no anchor has, each (field, 'does this recipe use it', the warning)."""


def _loss_knobs(env, w: Warnings, target: str) -> None:
    for name, used, text in LOSS_KNOBS:
        if used(env):
            w.add(f"environment.{name}", text.format(t=target, v=getattr(env, name)))


def _protocol(env, model_name: str) -> str:
    if env.protocol != "auto":
        return env.protocol
    return "tags" if model_name.startswith("builtin:") else "hermes"


def _factory_text(env) -> str:
    ref = env.factory
    if ref.startswith("builtin:"):
        ref = "rlvr_cli.envs.calculator:Calculator" if ref == "builtin:calculator" else ref
    where, _, name = ref.rpartition(":")
    made = f"{name}" if not env.options else f"functools.partial({name}, **{env.options!r})"
    return f"from {where} import {name} (a .py file: import it from its folder); environment_factory={made}"


def environment_trl(r, w: Warnings, notes: list[str]) -> dict:
    """GRPOConfig's settings for ``r.environment`` (none without one), warnings and notes added."""
    env = r.environment
    if env is None:
        return {}
    if env.factory is not None:
        notes.append(f"environment.factory: GRPOTrainer(environment_factory=...): {_factory_text(env)}; TRL pools "
                     "environment objects and reuses them through reset (rlvr builds one per trajectory)")
    if env.tools:
        notes.append(f"environment.tools: GRPOTrainer(tools=[...]) with {', '.join(env.tools)} (TRL reads each "
                     "function's type hints and docstring for its schema)")
    if _protocol(env, r.model.name) == "tags":
        w.add("environment.protocol", "TRL calls tools through the chat template's tool-call format; the plain `tags` "
              "protocol (<NAME>ARGS</NAME>) has no counterpart")
    w.add("environment.tool_timeout_s", "TRL runs a tool without a time limit: a hanging tool hangs the step")
    w.add("environment.max_output_tokens", "TRL does not truncate a tool's output (truncate_side has no counterpart either)")
    _loss_knobs(env, w, "TRL")
    notes.append("environment: a tool's error reaches the model as {'error': 'message'} under TRL, "
                 "`error: ExcType: message` under rlvr")
    return {"max_tool_calling_iterations": env.max_turns - 1}


def environment_verl(r, w: Warnings, notes: list[str]) -> dict:
    """verl's Hydra overrides for ``r.environment`` (none without one), warnings and notes added."""
    env = r.environment
    if env is None:
        return {}
    key = "actor_rollout_ref.rollout."
    if _protocol(env, r.model.name) == "tags":
        w.add("environment.protocol", "verl parses tool calls in a chat format (multi_turn.format: hermes, "
              "llama3_json, ...); the plain `tags` protocol has no counterpart (exported as hermes)")
    if not r.model.name.startswith("builtin:"):
        w.add("environment.max_output_tokens", f"verl's max_tool_response_length counts characters, rlvr's limit "
              f"tokens; exported as {env.max_output_tokens} characters (equal only on a character tokenizer)")
    w.add("environment.tool_timeout_s", "verl's tool agent loop sets no time limit on a tool call")
    w.add("environment.factory", "verl has no environment object with reset/get_reward: its tools are BaseTool "
          "classes (create, execute, calc_reward, release) listed in a tool config, which the export does not write")
    _loss_knobs(env, w, "verl")
    notes.append(f"environment: set {key}multi_turn.tool_config_path to a tool config YAML (tools: - class_name: "
                 "<your BaseTool>, config: {type: native}, tool_schema: {type: function, function: {name, description, "
                 "parameters}}) wrapping " + (env.factory or ", ".join(env.tools)))
    return {
        f"{key}multi_turn.enable": True,
        f"{key}multi_turn.max_assistant_turns": env.max_turns,
        f"{key}multi_turn.max_tool_response_length": env.max_output_tokens,
        f"{key}multi_turn.tool_response_truncate_side": VERL_SIDE[env.truncate_side],
        f"{key}multi_turn.format": "hermes",
        f"{key}agent.default_agent_loop": "tool_agent",
    }
