"""What a task is: a prompt source with held-out prompts, a gold answer per prompt and a verifier name.

A task is deterministic by seed: the held-out set is fixed by the task's own ``split_seed`` (shared by
every run, so evaluations line up across runs and seeds), and training prompts come from a
``random.Random`` that the caller seeds per step. Training prompts never come from the held-out set.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Problem:
    """One prompt and what the verifier needs to score a response to it."""

    id: str
    """Stable identity (same prompt -> same id in every run); seeds per-sample spurious rewards."""
    prompt: str
    reference: str
    """The gold answer as the task's verifier reads it (an integer, a LaTeX answer, a countdown spec as JSON)."""
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


class Task(Protocol):
    name: str
    answer_marker: str
    """Text that precedes the final answer in a well-formed response (`#` for the built-in tasks)."""
    verifier: str
    """Name of the verifier that decides correctness (accuracy is always measured with it)."""

    def eval_problems(self) -> list[Problem]:
        """The held-out prompts, in a fixed order."""

    def train_problems(self, rng: random.Random, n: int) -> list[Problem]:
        """``n`` training prompts drawn with ``rng`` (never from the held-out set)."""

    def incorrect_reference(self, problem: Problem) -> str:
        """A fixed wrong answer for the prompt (the spurious `incorrect` reward's label)."""


class TraceTask(Task, Protocol):
    """A built-in task that can also write supervised traces (the warm start's SFT data)."""

    def trace(self, problem: Problem, rng: random.Random) -> str:
        """One supervised response, possibly carrying a deliberate mistake; ends without EOS."""


def stable_hash(text: str) -> int:
    """A 64-bit hash of a string that is the same in every process (unlike ``hash``)."""
    import hashlib

    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")
