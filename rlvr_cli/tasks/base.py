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


FINGERPRINT_TRAIN_DRAWS = 256
"""Training prompts a generated task's fingerprint hashes (drawn with ``random.Random(0)``)."""


def data_fingerprint(task: Task) -> str:
    """``blake2b:<hex>`` of the rows a task serves, so that two runs can be shown to use the same data.

    A task with its own ``data_fingerprint()`` (a file-backed one hashes its rows) says it; otherwise the
    held-out problems and the first :data:`FINGERPRINT_TRAIN_DRAWS` training prompts of a fixed draw are
    hashed (id, prompt and gold answer each), which changes with the task's settings and its generator.
    """
    import hashlib
    import json

    own = getattr(task, "data_fingerprint", None)
    if callable(own):
        return own()
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{task.name}\0{task.verifier}\0{task.answer_marker}\0".encode())
    rows = [*task.eval_problems(), *task.train_problems(random.Random(0), FINGERPRINT_TRAIN_DRAWS)]
    for p in rows:
        h.update(json.dumps([p.id, p.prompt, p.reference], ensure_ascii=False).encode("utf-8") + b"\n")
    return "blake2b:" + h.hexdigest()
