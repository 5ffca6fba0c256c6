"""Group-relative advantages: the baseline and the scale, two independent axes.

GRPO (Shao et al. 2024, DeepSeekMath, arXiv:2402.03300, §4.1.2 outcome supervision, used in eq. 3)
replaces PPO's critic by the group's statistics: for a prompt q with G sampled responses and rewards
r_1..r_G,

    A_i = (r_i - mean(r)) / (std(r) + eps)            every token of o_i gets A_i

Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-Like Training", arXiv:2503.20783, §3.1 and Fig. 1)
drops the division by std, which weights easy and hard prompts (low spread) more than medium ones:
``A_i = r_i - mean(r)``. RLOO (Ahmadian et al. 2024, "Back to Basics", arXiv:2402.14740, the RLOO
estimator of §3) uses the leave-one-out mean: ``A_i = r_i - mean_{j != i} r_j``, which equals
``G/(G-1) * (r_i - mean(r))``. LitePPO-style ``batch_std`` (Liu et al. 2025, "Tricks or Traps?",
arXiv:2508.08221, §4.1) divides by one std over all rewards of the batch instead of each group's.

Conventions (they differ between frameworks): the std is Bessel-corrected (n - 1 in the denominator,
as ``torch.std``); eps is added to the std, not to the variance. A group whose rewards have zero spread
(max - min <= ``zero_spread_atol``) gets A = 0 *exactly* whenever a baseline or a std is involved: float
noise in a constant group must not turn into advantages of +-1000 after dividing by a std of 1e-9.
Likewise a std at or below ``zero_spread_atol`` (e.g. ``batch_std`` of a batch of equal rewards) gives
A = 0 instead of a division by ~0.

Worked example (the first unit test): rewards [1, 0, 0, 1] in one group.
mean 0.5, Bessel std sqrt(1/3) = 0.5774, so ``group_std`` gives [+0.866, -0.866, -0.866, +0.866] and
``none`` gives [+0.5, -0.5, -0.5, +0.5].

**No baseline** (``baseline="none"``, ``scale="none"``): A_i = r_i, plain REINFORCE on the raw reward
(Williams 1992), the floor of every ablation ladder. A constant group keeps its nonzero advantages
(every correct answer is pushed up, however easy the prompt). Neither anchor offers it: TRL always
subtracts the group mean; verl's closest estimators (``reinforce_plus_plus``, ``remax``) whiten or
subtract a greedy baseline.

**MaxRL** (Tajwar et al. 2026, "Maximum Likelihood Reinforcement Learning", arXiv 2602.02710) for
binary rewards: maximum likelihood of success, log p = -sum_{k>=1} (1 - p)^k / k, truncated at order T,
J_T = -sum_{k=1..T} (1 - p)^k / k (T = 1 is pass@1 up to a constant, T -> infinity is log p). With K of
the G samples correct, its estimator averages the score of the correct samples, (1/K) sum_{i correct}
grad log pi(o_i) (its Theorem 1), minus the group's mean score as a control variate:

    A_i = r_i / mean(r) - 1 = (r_i - mean(r)) / mean(r)          (0 when no sample is correct)

GRPO's centring divided by the group's *mean* instead of its std, the 1/p weighting of maximum
likelihood: the correct answer of a prompt solved once in 16 samples gets A = 15 (GRPO: 3.75), of one
solved 8 times A = 1 (GRPO: 0.97). Exact expectation over all 2^G outcomes (the unit tests): without
the control variate (A_i = r_i / mean(r)) the estimator is unbiased for grad J_G; with it, and A = 0
for a group with no correct sample, for grad J_{G-1} (the control variate dropped from all-fail
groups is worth one order). G = 1 keeps the raw reward: order 1, REINFORCE (the control variate
would be the sample's own score and cancel it). Conventions: the MaxRL authors' code
(``compute_maxrl_outcome_advantage`` in github.com/tajwarfahim/maxrl, a verl fork;
``adv_estimator=maxrl``) divides by mean + eps with eps = 1e-6, as here, zeroes all-fail groups, as
here, and gives a single-sample group mean 0, i.e. A = r / eps = 1e6 * r; neither TRL nor verl's main
branch has MaxRL.
Example: [1, 0, 0, 0] -> mean 0.25 -> [3, -1, -1, -1]; [0, 0, 0, 0] -> 0.
"""

from __future__ import annotations

import torch

ZERO_SPREAD_ATOL = 1e-6


def zero_spread_groups(rewards: torch.Tensor, atol: float = ZERO_SPREAD_ATOL) -> torch.Tensor:
    """Boolean (P,) mask of groups whose rewards (P, G) are all equal up to ``atol``.

    rlvr's convention, not a paper's: such a group gets A = 0 exactly (docs/design.md §5); it is also
    the "zero-gradient" group DAPO's dynamic sampling drops (arXiv:2503.14476 §3.2).
    """
    return (rewards.max(dim=1).values - rewards.min(dim=1).values) <= atol


def baseline_group_mean(rewards: torch.Tensor) -> torch.Tensor:
    """GRPO baseline: b_i = mean_j r_j over the group (arXiv:2402.03300 §4.1.2). Shapes (P, G) -> (P, G)."""
    return rewards.mean(dim=1, keepdim=True).expand_as(rewards)


def baseline_leave_one_out(rewards: torch.Tensor) -> torch.Tensor:
    """RLOO baseline (arXiv:2402.14740 §3): b_i = (sum_j r_j - r_i) / (G - 1).

    Shapes (P, G) -> (P, G); needs G >= 2.
    """
    g = rewards.shape[1]
    if g < 2:
        raise ValueError("leave-one-out needs a group of at least 2")
    return (rewards.sum(dim=1, keepdim=True) - rewards) / (g - 1)


def baseline_none(rewards: torch.Tensor) -> torch.Tensor:
    """No baseline: b_i = 0 (plain REINFORCE on the raw reward; Williams 1992, no arXiv id)."""
    return torch.zeros_like(rewards)


BASELINES = {
    "group_mean": baseline_group_mean,
    "leave_one_out": baseline_leave_one_out,
    "none": baseline_none,
}


def scale_group_std(rewards: torch.Tensor) -> torch.Tensor:
    """GRPO scale (arXiv:2402.03300 §4.1.2): std_j r_j within each group, Bessel-corrected. (P, G) -> (P, 1)."""
    return rewards.std(dim=1, unbiased=True, keepdim=True)


def scale_batch_std(rewards: torch.Tensor) -> torch.Tensor:
    """One Bessel std over every reward in the batch (LitePPO's batch-level scale, arXiv:2508.08221 §4.1).

    Shapes (P, G) -> (1, 1).
    """
    if rewards.numel() < 2:
        return torch.zeros(1, 1, dtype=rewards.dtype, device=rewards.device)
    return rewards.flatten().std(unbiased=True).reshape(1, 1)


def scale_none(rewards: torch.Tensor) -> None:
    """Dr. GRPO (arXiv:2503.20783 §3.1): no division."""
    return None


def scale_group_mean(rewards: torch.Tensor) -> torch.Tensor:
    """MaxRL's divisor (arXiv 2602.02710, Theorem 1): mean_j r_j of each group. (P, G) -> (P, 1).

    :func:`group_advantages` gives A = 0 where it is 0 (an all-fail group), as the authors' code.
    """
    return rewards.mean(dim=1, keepdim=True)


SCALES = {"group_std": scale_group_std, "batch_std": scale_batch_std, "none": scale_none, "mean": scale_group_mean}


def maxrl_advantages(rewards: torch.Tensor, eps: float = 1e-6, zero_mean_atol: float = ZERO_SPREAD_ATOL) -> torch.Tensor:
    """MaxRL: A_i = (r_i - mean(r)) / (mean(r) + eps) for binary rewards (P, G) -> (P, G) float32.

    arXiv 2602.02710, Theorem 1 (module docstring). A group of mean <= ``zero_mean_atol`` (no correct
    sample) gets 0; G = 1 keeps the raw reward (order-1 MaxRL is REINFORCE). Example: [1, 0, 0, 0] ->
    [3, -1, -1, -1] (2.99999 with eps = 1e-6, exactly 3 with eps = 0).
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be (prompts, group), got shape {tuple(rewards.shape)}")
    r = rewards.to(torch.float64)
    if not torch.all((r == 0) | (r == 1)):
        raise ValueError("MaxRL needs binary rewards (0 or 1): it divides by the group's success rate")
    if r.shape[1] == 1:
        return r.to(torch.float32)
    m = scale_group_mean(r)
    adv = torch.where(m <= zero_mean_atol, torch.zeros_like(r), (r - baseline_group_mean(r)) / (m + eps))
    return adv.to(torch.float32)


def group_advantages(
    rewards: torch.Tensor,
    baseline: str = "group_mean",
    scale: str = "group_std",
    eps: float = 1e-6,
    zero_spread_atol: float = ZERO_SPREAD_ATOL,
) -> torch.Tensor:
    """A_i = (r_i - b_i) / (s + eps) for rewards of shape (P prompts, G responses) -> (P, G).

    GRPO (arXiv:2402.03300 §4.1.2) with b = group mean and s = group std; the other baselines and
    scales are cited on their functions.

    ``baseline`` in :data:`BASELINES`, ``scale`` in :data:`SCALES`. Groups with zero spread get exactly
    0 when a group baseline is used; a std <= ``zero_spread_atol`` gives 0 instead of dividing by it.
    With ``baseline="none", scale="none"``, A = r (plain REINFORCE).
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be (prompts, group), got shape {tuple(rewards.shape)}")
    rewards = rewards.to(torch.float64)  # the statistics in float64: cheap, and no cancellation noise
    adv = rewards - BASELINES[baseline](rewards)
    s = SCALES[scale](rewards)
    if s is not None:
        adv = torch.where(s <= zero_spread_atol, torch.zeros_like(adv), adv / (s + eps))
    if baseline != "none":
        adv = torch.where(zero_spread_groups(rewards, zero_spread_atol).unsqueeze(1), torch.zeros_like(adv), adv)
    return adv.to(torch.float32)
