"""Spurious reward controls (Shao et al. 2025, "Spurious Rewards: Rethinking Training Signals in RLVR").

They test how much of an RL gain comes from the reward's information and how much from the update
itself. Accuracy is still measured with the task's true verifier beside them.

- ``random``: Bernoulli(p), drawn from a hash of (seed, term position, step, prompt id, sample
  index): the same sample gets the same reward in every rerun, independent of everything else.
- ``incorrect``: 1 only when the response's answer equals a fixed *wrong* label of the prompt
  (``task.incorrect_reference``), judged by the task's true verifier.
- ``format_only``: 1 whenever the true verifier can extract an answer at all (whatever its value);
  with the default extraction chain that includes the last-number fallback, so set
  ``reward.extract: [boxed]`` to reproduce the paper's "contains a \\boxed{}" reward.
"""

from __future__ import annotations

import hashlib

from rlvr_cli.rewards.registry import get_verifier, options_for


def random_reward(p: float, seed: int, term_index: int, step: int, problem_id: str, sample_index: int) -> float:
    key = f"random:{seed}:{term_index}:{step}:{problem_id}:{sample_index}".encode("utf-8", "surrogatepass")
    u = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") / 2**64
    return 1.0 if u < p else 0.0


def format_only_reward(response: str, verifier: str, options: dict) -> float:
    extract = get_verifier(verifier).extract
    return 0.0 if extract(response, **options_for(verifier, options)) is None else 1.0
