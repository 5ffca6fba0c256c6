"""The math of GRPO-family RLVR as pure tensor functions, one per formula, registered by name.

Each registry is keyed by exactly the names the recipe schema allows (``rlvr_cli.recipe.schema``);
``tests/test_registry.py`` checks that the two agree.
"""

from rlvr_cli.algo.advantages import BASELINES, SCALES, group_advantages
from rlvr_cli.algo.aggregation import AGGREGATIONS, aggregate, aggregation_normalizer, aggregation_weights
from rlvr_cli.algo.kl import KL_ESTIMATORS, kl_penalized_rewards
from rlvr_cli.algo.overlong import soft_overlong_penalty
from rlvr_cli.algo.passk import maj_at_k, majority_vote, mean_pass_at_k, pass_at_k
from rlvr_cli.algo.policy_loss import RATIOS, clipped_surrogate

__all__ = [
    "AGGREGATIONS", "BASELINES", "KL_ESTIMATORS", "RATIOS", "SCALES", "aggregate", "aggregation_normalizer",
    "aggregation_weights", "clipped_surrogate", "group_advantages", "kl_penalized_rewards", "maj_at_k",
    "majority_vote", "mean_pass_at_k", "pass_at_k", "soft_overlong_penalty",
]
