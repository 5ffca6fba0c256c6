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


SCALES = {"group_std": scale_group_std, "batch_std": scale_batch_std, "none": scale_none}


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
