"""The contract between an environment and the multi-turn sampler.

The sampler (rlvr_cli/sampling/turns.py, called by rlvr_cli/train/rollouts) knows nothing of tools: for each trajectory it asks
:func:`Episode.reset` for text to append after the prompt (usually none), samples a model turn until EOS,
the token budget or one of :attr:`Episode.stop_strings` (the end of a tool call), hands the turn's text to
:meth:`Episode.step`, and appends the :class:`ToolReply`'s tokens with origin *environment*, then samples
the next turn on the same KV cache. ``step`` returning None means the turn made no call: the trajectory
ends. The environment side (loading a TRL-shaped class or plain functions, parsing a call in the
recipe's protocol, timeouts, errors shown to the model, truncation) lives in this package and is
invisible to the sampler.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

MODEL, ENVIRONMENT = 1, 0
"""Per-token origin codes in a trajectory: written by the model (sampled, with a log-prob) or appended by
the environment (prompt-like: no sampling log-prob)."""


@dataclass(frozen=True)
class ToolReply:
    """What the environment appends after a model turn that made a call."""

    text: str
    """The reply as the model will read it, already wrapped in the protocol's markers (e.g. `<r>5535</r>`)."""
    failed: bool = False
    """The tool raised, timed out, was unknown or got bad arguments (the note says which)."""
    note: str = ""
    """One line for the run's log and metrics ("timeout after 5 s", "error: ZeroDivisionError ...")."""


@dataclass
class EpisodeStats:
    """Counters of one trajectory, for the metrics (tool call frequency, failures, turns)."""

    calls: int = 0
    failures: int = 0
    turns: int = 0
    void_turns: int = 0
    """Model turns that are neither a call nor contain a final answer (SimpleTIR's void turn)."""
    notes: list[str] = field(default_factory=list)


class Episode(Protocol):
    """One trajectory's environment (TRL builds one environment_factory() object per rollout)."""

    stop_strings: tuple[str, ...]
    """Strings that end a model turn as a call (the sampler stops when the turn's text ends with one)."""
    stats: EpisodeStats

    def reset(self, row: dict) -> str | None:
        """Start the trajectory on a task row (TRL: ``reset(**row)``); text to append to the prompt, or None."""

    def step(self, turn_text: str) -> ToolReply | None:
        """The reply to a model turn (its decoded text), or None when the turn made no call."""

    def reward(self) -> float | None:
        """The environment's own reward (TRL: ``get_reward()``), None when it has none."""
