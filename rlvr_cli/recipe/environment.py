"""The recipe's ``environment:`` section: multi-turn rollouts with tools, and what the loss does with the
tokens the model did not write (docs/tools.md).

A trajectory alternates model turns and environment replies: the model writes until it has written a
tool call (or stops), the environment's reply is appended as tokens of origin *environment*, and the
model goes on from there, up to ``max_turns`` model turns. The interface is TRL's
(``GRPOTrainer(environment_factory=..., tools=[...])``): a class built once per trajectory, ``reset(**row)``,
its public methods are the tools, an optional ``get_reward()``; or plain functions as tools.

The loss knobs (``env_tokens``, ``kl_on_env_tokens``, ``divisor_counts_env_tokens``, ``void_turn_filter``)
are the ablation axis: every framework masks environment tokens from the policy loss by fiat, prime-rl's
``echo`` trains them with a small cross-entropy weight, TRL's ``grpo`` and ``dr_grpo`` losses disagree on
whether they count in the length divisor, and SimpleTIR (arXiv 2509.02479) drops trajectories with a
void turn.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from rlvr_cli.recipe.strict import Strict

EnvTokenLoss = Literal["mask", "train", "echo"]
TruncateSide = Literal["right", "left", "middle"]
CallProtocol = Literal["auto", "tags", "hermes"]


class EnvironmentSpec(Strict):
    """Tools in the loop (null = single-turn, as before)."""

    factory: str | None = None
    """TRL's ``environment_factory``: `file.py:Class`, `module:Class` or a built-in (`builtin:calculator`); one object per trajectory, ``reset(**row)`` at its start, its public methods the tools, ``get_reward()`` (optional) added to the reward."""
    tools: list[str] = Field(default_factory=list, max_length=64)
    """TRL's ``tools``: plain functions (`file.py:function`), callable beside or instead of a factory's methods."""
    options: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments of the factory (e.g. the built-in calculator's `error_rate`)."""
    protocol: CallProtocol = "auto"
    """How a call is written: `tags` is `<NAME>ARGS</NAME>` (the built-in tokenizer's alphabet), `hermes` is `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (Qwen/Hermes chat models); `auto`: tags on the built-in models, hermes otherwise."""
    max_turns: int = Field(3, ge=1, le=64)
    """Model turns per trajectory (verl's ``max_assistant_turns``): at most max_turns - 1 tool calls; a call in the last turn gets no reply."""
    tool_timeout_s: float = Field(5.0, gt=0, le=3600)
    """Seconds a tool may run; past it the turn ends with a timeout note shown to the model and the run goes on."""
    max_output_tokens: int = Field(32, ge=1, le=1_000_000)
    """Tokens of one tool reply (verl's ``max_tool_response_length``); a longer reply is cut, with a note."""
    truncate_side: TruncateSide = "right"
    """Which part of a long reply is cut (verl's ``tool_response_truncate_side``): `right` keeps the start, `left` the end, `middle` both ends."""
    call_cost: float = Field(0.0, ge=0, le=1e4)
    """Subtracted from a trajectory's reward per tool call (the price of a call)."""
    env_tokens: EnvTokenLoss = "mask"
    """Environment tokens in the policy loss: `mask` leaves them out (every anchor's default), `train` treats them as the model's own, `echo` adds their cross-entropy at weight echo_weight (prime-rl's echo)."""
    echo_weight: float = Field(0.1, ge=0, le=1e4)
    """alpha of `echo`: the loss gains -alpha * mean log pi(environment token)."""
    kl_on_env_tokens: bool = False
    """Whether the KL to the reference (kl.placement: loss) also covers environment tokens (TRL #2723)."""
    divisor_counts_env_tokens: bool = False
    """Whether the length divisor of the loss aggregation (|o| or the token count) counts environment tokens."""
    void_turn_filter: bool = False
    """SimpleTIR's filter: a trajectory with a void turn (a model turn that is neither a call nor an answer) is left out of the loss."""
