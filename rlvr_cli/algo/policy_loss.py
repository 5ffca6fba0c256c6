"""Importance ratios and the clipped surrogate objective, per token.

PPO (Schulman et al. 2017, arXiv:1707.06347 eq. 7) as used by GRPO (Shao et al. 2024, arXiv:2402.03300
eq. 3), with DAPO's decoupled bounds (Yu et al. 2025, arXiv:2503.14476 §3.1, "clip-higher") and optional
dual clip (Ye et al. 2020, arXiv:1912.09729, dual-clip PPO):

    rho_t = exp(logp_t - logp_old_t)                                   (token ratio, PPO/GRPO)
    loss_t = -min(rho_t * A, clip(rho_t, 1 - eps_low, 1 + eps_high) * A)
    dual clip, A < 0 only:  loss_t = min(loss_t, -c * A)

GSPO (Zheng et al. 2025, arXiv:2507.18071 eq. 5 and 7) replaces the token ratio by one length-normalised
ratio per sequence,

    s_i = (pi(o_i|q) / pi_old(o_i|q)) ** (1/|o_i|) = exp(mean_t (logp_t - logp_old_t)),

which here is broadcast to every token of o_i, so that aggregating with ``seq_mean_token_mean`` gives
exactly GSPO's (1/G) sum_i min(s_i A_i, clip(s_i) A_i) and its gradient.

Where the clipped branch is the active one, the per-token loss is a constant and its gradient is
zero: that is what the clip fractions count. Clipping bounds the gradient, not the ratio: with several
updates per batch the ratio itself can run far outside [1-eps_low, 1+eps_high].

Convention: the log-ratio is clamped to +-MAX_LOG_RATIO before ``exp`` so that a diverged policy
yields large but finite ratios (exp(20) ~ 4.9e8) instead of inf and NaN gradients.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

MAX_LOG_RATIO = 20.0


def token_log_ratio(logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """log rho_t = logp_t - logp_old_t (PPO, arXiv:1707.06347 eq. 6; GRPO, arXiv:2402.03300 eq. 3). Shapes (B,
    T) -> (B, T); masked positions are 0.
    """
    return (logp - old_logp) * mask


def sequence_log_ratio(logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """GSPO (arXiv:2507.18071 eq. 7): log s_i = (1/|o_i|) sum_t m_t (logp_t - logp_old_t), broadcast to (B, T);
    |o_i| counts unmasked tokens.
    """
    lengths = mask.sum(dim=1, keepdim=True).clamp(min=1)
    per_seq = ((logp - old_logp) * mask).sum(dim=1, keepdim=True) / lengths
    return per_seq.expand_as(logp) * mask


RATIOS = {"token": token_log_ratio, "sequence": sequence_log_ratio}


@dataclass
class SurrogateOut:
    """What every policy objective returns (PPO's clip here, the others in :mod:`rlvr_cli.algo.objectives` and
    :mod:`rlvr_cli.algo.trust_region`). The flags carry the names of the metrics that count them
    (``clip_low`` -> ``clip_low_frac``); what each objective flags is in its docstring."""

    loss: torch.Tensor  # (B, T) per-token loss, before aggregation
    ratio: torch.Tensor  # (B, T) rho (detached)
    clip_low: torch.Tensor  # (B, T) bool: PPO: A < 0 and rho < 1 - eps_low (zero gradient)
    clip_high: torch.Tensor  # (B, T) bool: PPO: A > 0 and rho > 1 + eps_high (zero gradient)
    dual_clip: torch.Tensor  # (B, T) bool: PPO: A < 0 and rho > c (zero gradient); all False for the others


def clipped_surrogate(
    log_ratio: torch.Tensor,
    advantages: torch.Tensor,
    eps_low: float,
    eps_high: float,
    dual_clip: float | None = None,
) -> SurrogateOut:
    """Per-token PPO loss -min(rho*A, clip(rho, 1-eps_low, 1+eps_high)*A), optionally dual-clipped.

    PPO arXiv:1707.06347 eq. 7; decoupled eps_low / eps_high: DAPO arXiv:2503.14476 §3.1; the dual clip
    (A < 0: at most -c*A): arXiv:1912.09729; GSPO's sequence-level version: arXiv:2507.18071 eq. 5.

    ``log_ratio`` (B, T) from :data:`RATIOS`; ``advantages`` (B, T) or (B, 1). Example: rho = 1.5,
    A = +1, eps = 0.2 -> loss -1.2 with zero gradient; rho = 1.5, A = -1 -> loss 1.5 (unclipped side).
    """
    advantages = advantages.expand_as(log_ratio)
    ratio = torch.exp(log_ratio.clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO))
    unclipped = -ratio * advantages
    clipped = -ratio.clamp(1.0 - eps_low, 1.0 + eps_high) * advantages
    loss = torch.maximum(unclipped, clipped)
    r = ratio.detach()
    clip_low = (advantages < 0) & (r < 1.0 - eps_low)
    clip_high = (advantages > 0) & (r > 1.0 + eps_high)
    dual = torch.zeros_like(clip_low)
    if dual_clip is not None:
        capped = -dual_clip * advantages
        dual = (advantages < 0) & (r > dual_clip)
        loss = torch.where(advantages < 0, torch.minimum(loss, capped), loss)
    return SurrogateOut(loss, r, clip_low, clip_high, dual)
