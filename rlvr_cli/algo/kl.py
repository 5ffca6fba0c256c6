"""KL to the reference policy: three per-token estimators and the two places it can go.

Estimators (Schulman 2020, "Approximating KL Divergence", http://joschu.net/blog/kl-approx.html: a
note with no arXiv id), for tokens sampled from pi, with
d = logp_ref - logp (per token):

    k1 = -d                    unbiased for KL(pi || pi_ref), can be negative, high variance
    k2 = d^2 / 2               biased, always >= 0, low variance
    k3 = exp(d) - 1 - d        unbiased, always >= 0 (GRPO's choice, arXiv:2402.03300 eq. 4)

Placement is a separate switch:
- in the loss (GRPO): + beta * KL_t, aggregated like the policy loss (:mod:`rlvr_cli.algo.aggregation`);
- in the reward (PPO-RLHF, Ouyang et al. 2022, arXiv:2203.02155 eq. 2): r_i <- r_i - beta * sum_t k1_t before advantages
  (see :func:`kl_penalized_rewards`), so the penalty is a return, not a per-token gradient term.

Convention: d is clamped to +-MAX_KL_LOG_RATIO before exp, so k3 of a diverged policy is large but
finite (never inf or NaN); log the max KL beside the mean, since the mean hides a single runaway token.
"""

from __future__ import annotations

import torch

MAX_KL_LOG_RATIO = 20.0


def kl_k1(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k1 = logp - logp_ref (Schulman 2020's k1, joschu.net/blog/kl-approx.html).

    Example: logp = log 0.5, ref = log 0.25 -> log 2 = 0.693.
    """
    return logp - ref_logp


def kl_k2(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k2 = (logp_ref - logp)^2 / 2 (Schulman 2020's k2). Example: d = -log 2 -> 0.240."""
    return 0.5 * (ref_logp - logp) ** 2


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k3 = exp(d) - 1 - d with d = clamp(logp_ref - logp) (GRPO, arXiv:2402.03300 eq. 4; Schulman 2020 k3).
    Example: d = -log 2 -> 0.5 - 1 + 0.693 = 0.193.

    Computed as ``expm1(d) - d``: the same value, but ``exp(d) - 1`` loses the d^2/2 term to rounding
    when |d| is small (float32 gave k3 ~ -6e-8 at |d| ~ 1e-4), whereas ``expm1(d) >= d`` survives rounding.
    """
    d = (ref_logp - logp).clamp(-MAX_KL_LOG_RATIO, MAX_KL_LOG_RATIO)
    return torch.expm1(d) - d


KL_ESTIMATORS = {"k1": kl_k1, "k2": kl_k2, "k3": kl_k3}


def kl_penalized_rewards(
    rewards: torch.Tensor, logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor, beta: float
) -> torch.Tensor:
    """KL in the reward (InstructGPT, arXiv:2203.02155 eq. 2): r_i - beta * sum_t m_it * k1_it. ``rewards``
    (B,), the rest (B, T) -> (B,).

    Example: r = 1, beta = 0.1, k1 per token [0.5, 0.5] -> 1 - 0.1 * 1.0 = 0.9.
    """
    return rewards - beta * (kl_k1(logp, ref_logp) * mask).sum(dim=1)
