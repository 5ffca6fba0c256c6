"""Verifiers and rewards: is a response right, and what reward does it get.

- :mod:`~rlvr_cli.rewards.outcome`: ``Outcome`` (correct / incorrect / unparseable / timeout / error).
- One module per correctness verifier, each a pure ``check(response, reference, **options)``:
  :mod:`~rlvr_cli.rewards.integer`, :mod:`~rlvr_cli.rewards.math_answer`,
  :mod:`~rlvr_cli.rewards.countdown`, :mod:`~rlvr_cli.rewards.code_tests` (with
  :mod:`~rlvr_cli.rewards.sandbox`); answer extraction in :mod:`~rlvr_cli.rewards.extract`.
- Shaped and spurious terms: :mod:`~rlvr_cli.rewards.format_reward`, :mod:`~rlvr_cli.rewards.spurious`.
- Hard limits: :mod:`~rlvr_cli.rewards.pool` (worker processes, one deadline per check).
- :class:`Scorer`: a recipe's ``RewardSpec`` applied to a batch, with the true verifier's accuracy.
"""

from rlvr_cli.rewards.outcome import OUTCOMES, Outcome, outcome_counts
from rlvr_cli.rewards.pool import Check, VerifierPool, run_checks
from rlvr_cli.rewards.registry import VERIFIERS, verify
from rlvr_cli.rewards.scorer import Score, ScoreItem, Scorer

__all__ = [
    "OUTCOMES", "VERIFIERS", "Check", "Outcome", "Score", "ScoreItem", "Scorer", "VerifierPool",
    "outcome_counts", "run_checks", "verify",
]
