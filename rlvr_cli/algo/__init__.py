"""The math of GRPO-family RLVR as pure tensor functions, one per formula, registered by name.

Each registry is keyed by exactly the names the recipe schema allows (``rlvr_cli.recipe.schema``);
``tests/algo/test_registry.py`` checks that the two agree.
"""

from rlvr_cli.algo.advantages import BASELINES, SCALES, group_advantages, maxrl_advantages, scale_group_mean
from rlvr_cli.algo.aggregation import AGGREGATIONS, aggregate, aggregation_normalizer, aggregation_weights
from rlvr_cli.algo.entropy_control import applied_entropy_coef, next_entropy_coef
from rlvr_cli.algo.entropy_remedies import (
    clip_cov_selection, detach_selected, kl_cov_penalty, kl_cov_selection, token_covariance, top_entropy_mask,
)
from rlvr_cli.algo.is_correction import IS_MODES, is_correction_weights, mismatch_stats
from rlvr_cli.algo.kl import KL_ESTIMATORS, kl_penalized_rewards
from rlvr_cli.algo.objectives import cispo_surrogate, gmpo_surrogate, sapo_gate_weight, sapo_surrogate
from rlvr_cli.algo.overlong import soft_overlong_penalty
from rlvr_cli.algo.passk import maj_at_k, majority_vote, mean_pass_at_k, pass_at_k
from rlvr_cli.algo.passk_objectives import passk_analytic_advantages, pkpo_rewards
from rlvr_cli.algo.policy_loss import RATIOS, clipped_surrogate
from rlvr_cli.algo.reward_combination import decoupled_group_advantages
from rlvr_cli.algo.trust_region import DIVERGENCES, binary_kl, dppo_keep_mask, dppo_surrogate

__all__ = [
    "AGGREGATIONS", "BASELINES", "DIVERGENCES", "IS_MODES", "KL_ESTIMATORS", "RATIOS", "SCALES",
    "aggregate", "aggregation_normalizer", "aggregation_weights", "applied_entropy_coef", "binary_kl",
    "cispo_surrogate", "clip_cov_selection", "clipped_surrogate", "decoupled_group_advantages", "detach_selected",
    "dppo_keep_mask", "dppo_surrogate", "gmpo_surrogate", "group_advantages", "is_correction_weights",
    "kl_cov_penalty", "kl_cov_selection", "kl_penalized_rewards", "maj_at_k", "majority_vote", "maxrl_advantages",
    "mean_pass_at_k", "mismatch_stats", "next_entropy_coef", "pass_at_k", "passk_analytic_advantages",
    "pkpo_rewards", "sapo_gate_weight", "sapo_surrogate", "scale_group_mean", "soft_overlong_penalty",
    "token_covariance", "top_entropy_mask",
]
