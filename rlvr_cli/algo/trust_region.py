"""DPPO: a trust region on the token's probability instead of PPO's ratio clip.

"Rethinking the Trust Region in LLM Reinforcement Learning" (DPPO, arXiv 2602.04879; code
github.com/sail-sg/Stable-RL). PPO's ratio clip over-constrains rare tokens (1e-5 -> 1e-3 is a
ratio of 100, a negligible change of the distribution) and under-constrains likely ones (0.99 -> 0.8
is a ratio of 0.81, inside a 0.2 band, a large change). DPPO masks a token by a divergence between the
old and the new policy restricted to that token, the two-outcome ("binary") distribution
{y_t, not y_t} with p = pi(y_t), p_old = pi_old(y_t):

    TV:  D_TV = |p - p_old|
    KL:  D_KL = p_old log(p_old / p) + (1 - p_old) log((1 - p_old) / (1 - p))

and only in the direction the advantage pushes (as PPO's clip acts on one side only):

    keep_t = (p - p_old <= delta_high)               A > 0, TV     (may not rise by more than delta_high)
             (p - p_old >= -delta_low)               A <= 0, TV    (may not fall by more than delta_low)
             (D_KL <= delta_high) or (p <= p_old)    A > 0, KL
             (D_KL <= delta_low) or (p >= p_old)     A <= 0, KL
    loss_t = -A * sg(min(rho_t, C)) * log pi_t * keep_t

so a kept token has PPO's unclipped gradient -A rho_t grad log pi_t (rho truncated at C, truncated
importance sampling in place of dual clip, paper §5.4), a masked one none. The mask multiplies the
numerator only: a masked token stays in the aggregation's denominator (as verl).

Defaults are verl's (``compute_policy_loss_dppo_tv`` / ``compute_policy_loss_dppo_kl``, ``loss_mode=
dppo_tv`` / ``dppo_kl``, which read delta from ``clip_ratio_low/high``): its DPPO example script uses
delta = 0.15 (TV) and 0.05 (KL), ``loss_agg_mode=seq-mean-token-sum-norm``, no std in the advantage
(``norm_adv_by_std_in_grpo=False``) and C = 10000 (``clip_ratio_c``). Pitfall there: the function's own
fallback for C is 20, but ``ActorConfig.clip_ratio_c`` defaults to 3.0 (dual clip's c), so a verl run
that does not set it truncates at 3. The paper recommends a large C (§5.4); rlvr's default is 20.
verl's binary KL adds 1e-8 inside the log of 1 - p; so here. A = 0 takes the A <= 0 side as verl (it
has no gradient either way). TRL has no DPPO.

Worked example (the first test): p_old = 0.5, p = 0.7 (rho = 1.4), A = +1: TV 0.2 > 0.15 -> masked
(PPO at eps 0.2 clips it too); p_old = 0.01, p = 0.05 (rho = 5), A = +1: TV 0.04 -> kept, gradient -5,
where PPO's clip cuts it; p_old = 0.99, p = 0.8 (rho = 0.808), A = -1: TV 0.19 > 0.15 -> masked, where
PPO at eps 0.2 keeps it.
"""

from __future__ import annotations

import torch

from rlvr_cli.algo.objectives import without_dual_clip
from rlvr_cli.algo.policy_loss import MAX_LOG_RATIO, SurrogateOut

DIVERGENCES = ("tv", "kl")
KL_EPS = 1e-8


def binary_kl(old_logp: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    """KL(Bernoulli(p_old) || Bernoulli(p)) of the sampled token, p = exp(logp); (B, T) -> (B, T), float64.

    Example: p_old = 0.5, p = 0.7 -> 0.5 log(0.5/0.7) + 0.5 log(0.5/0.3) = 0.08718.
    """
    lp, lo = logp.detach().to(torch.float64), old_logp.detach().to(torch.float64)
    p, po = lp.exp(), lo.exp()
    return po * (lo - lp) + (1.0 - po) * torch.log((1.0 - po + KL_EPS) / (1.0 - p + KL_EPS))


def dppo_keep_mask(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    divergence: str,
    delta_low: float,
    delta_high: float,
) -> torch.Tensor:
    """Bool (B, T): tokens inside DPPO's trust region on the advantage's side (module docstring).

    ``divergence`` in :data:`DIVERGENCES`. Example (TV, delta 0.15): p_old 0.5 -> p 0.7 with A > 0 is
    masked; p_old 0.01 -> p 0.05 with A > 0 is kept.
    """
    if divergence not in DIVERGENCES:
        raise ValueError(f"unknown DPPO divergence {divergence!r}; choose from {list(DIVERGENCES)}")
    if delta_low < 0 or delta_high < 0:
        raise ValueError(f"DPPO bounds must be >= 0, got delta_low={delta_low}, delta_high={delta_high}")
    pos = advantages.expand_as(logp) > 0
    p = logp.detach().to(torch.float64).exp()
    po = old_logp.detach().to(torch.float64).exp()
    if divergence == "tv":
        keep_pos = (p - po) <= delta_high
        keep_neg = (p - po) >= -delta_low
    else:
        d = binary_kl(old_logp, logp)
        keep_pos = (d <= delta_high) | (p <= po)
        keep_neg = (d <= delta_low) | (p >= po)
    return torch.where(pos, keep_pos, keep_neg)


def dppo_surrogate(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    divergence: str,
    delta_low: float,
    delta_high: float,
    is_cap: float = 20.0,
) -> SurrogateOut:
    """DPPO per-token loss -A * sg(min(rho, C)) * log pi on the kept tokens, 0 on the masked ones.

    arXiv 2602.04879 (module docstring); ``logp`` (B, T) with gradient, ``old_logp`` (B, T),
    ``advantages`` (B, T) or (B, 1); C = ``is_cap``. Flags: masked tokens, A <= 0 (``clip_low``) and
    A > 0 (``clip_high``): zero gradient, like PPO's clip flags.
    """
    if not is_cap > 0:
        raise ValueError(f"is_cap must be > 0, got {is_cap}")
    advantages = advantages.expand_as(logp)
    keep = dppo_keep_mask(logp, old_logp, advantages, divergence, delta_low, delta_high)
    ratio = torch.exp((logp.detach() - old_logp.detach()).clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO))
    weight = ratio.clamp(max=is_cap)
    loss = -advantages * weight * logp * keep.to(logp.dtype)
    pos = advantages > 0
    return without_dual_clip(loss, ratio, ~keep & ~pos, ~keep & pos)
