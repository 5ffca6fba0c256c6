"""Corrections for batches sampled by another policy than the one trained: stale (``rollout.staleness``)
or sampled with other numerics. docs/async.md gives the recipe switches; here are the formulas.

Three policies, per token of a sampled response: the behaviour pi_b that drew it (its log-probs are
the sampler's), the proximal pi_prox (the weights at the start of this step's update: on-policy it is
pi_b) and the current pi_theta (changing during the update).

**Decoupled PPO** (AReaL: Fu et al. 2025, arXiv 2505.24298, §5 "decoupled PPO objective"; the
decoupling of the proximal from the behaviour policy is Hilton et al. 2021, arXiv 2110.00641):

    u_t = pi_theta(y_t) / pi_prox(y_t)          (the ratio PPO clips: a trust region around pi_prox)
    w_t = sg(pi_prox(y_t) / pi_b(y_t)), capped  (the importance weight for having sampled from pi_b)
    loss_t = -w_t * min(u_t A, clip(u_t, 1 - eps_low, 1 + eps_high) A)

Clipping against pi_b instead (plain PPO on a stale batch) makes the trust region as wide as the
staleness: tokens whose pi_b is far from pi_prox start clipped and never move. The cap is a
convention the frameworks differ on: AReaL masks w_t > cap (``behav_imp_weight_cap``, now its
``rejection_sampling`` with action mask; clamp truncates), the token staying in the denominator; verl
truncates (``rollout_is``; its rejection ``rollout_rs`` removes the token from the denominator too);
here ``rollout.is_correction``'s modes, whose weight is pi_old / pi_sampler with pi_old the recomputed
(proximal) log-probs: :func:`decoupled_ppo_loss` is exactly that composition.

**M2PO** (Zheng et al. 2025, "Prosperity before Collapse", arXiv 2510.01161, Algorithm 1): instead of
clipping each ratio, bound the second moment of the log importance ratio over the batch,

    M2 = mean_t (log r_t)^2,   r_t = pi(y_t) / pi_b(y_t),

by masking the tokens of largest (log r_t)^2 until the mean over the kept ones is <= tau (0.04 in
the paper and AReaL's ``m2_threshold``): only extreme outliers lose their gradient, where PPO's clip
at 1 +- 0.2 cuts many informative high-entropy tokens of a stale batch. Conventions differ:
- the denominator: here a masked token keeps its place in the loss's denominator (the paper's
  footnote); AReaL removes it (``_apply_m2po_masking`` replaces the loss mask, and its PPO loss divides
  by the kept tokens' count), so its per-token weight grows by N / N_kept.
- which r: here log pi_prox - log pi_b, once per step before the updates (as slime pre-computes the
  mask from the recomputed and the rollout log-probs), so the mask does not depend on how the batch is
  split into minibatches; Trinity-RFT recomputes it in every loss call from the current pi_theta.
- which tokens: here every loss token (AReaL's formula over all N tokens); the paper's final version
  (and Trinity-RFT) counts only the tokens on the clip's side (A > 0 with r > 1, A < 0 with r < 1).
- ties: the sort is stable (the earlier token is kept first).
The paper trains the unclipped surrogate under the mask; here the mask multiplies whatever
``loss.objective`` computes (widen ``loss.clip`` for the paper's objective).

**KL to the behaviour policy** (prime-rl's ``kl_tau``): loss_t += coef * KL_t(pi_theta || pi_b) with
one of the KL estimators of :mod:`rlvr_cli.algo.kl` (d = log pi_b - log pi_theta), on every loss token.
prime-rl's term today is kl_tau * d^2 on every loss token (its ``default_loss_fn``), which is k2 = d^2 / 2
at coef = 2 * kl_tau: it pulls each token back in proportion to its log-ratio. Its earlier term was
kl_tau * (-d), k1 here (gradient grad log pi_theta whatever the distance: a push down on every sampled
token, zero in expectation only on-policy), on the tokens its ``kl_mask_type`` chose.

Worked examples (the unit tests): decoupled, u = 1.5, A = +1, eps 0.2, pi_prox / pi_b = 3 with the
token_mask cap 2 -> weight 0 (loss 0); with token_truncate -> weight 2, loss -2.4. M2PO tau = 0.04,
log r = [0.1, -0.1, 0.5, 0.0]: squares [0.01, 0.01, 0.25, 0]; the mean of all, 0.0675 > tau; without
0.25 it is 0.0067 <= tau: token 3 is masked. Behaviour KL k2 at log pi = log 0.5, log pi_b = log 0.25:
(log 2)^2 / 2 = 0.2402.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rlvr_cli.algo.is_correction import ISCorrection, is_correction_weights
from rlvr_cli.algo.kl import KL_ESTIMATORS
from rlvr_cli.algo.policy_loss import SurrogateOut, clipped_surrogate, token_log_ratio


def decoupled_ppo_loss(
    logp: torch.Tensor,
    prox_logp: torch.Tensor,
    behaviour_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps: tuple[float, float] = (0.2, 0.2),
    mode: str = "token_mask",
    cap: float = 2.0,
) -> tuple[torch.Tensor, SurrogateOut, ISCorrection]:
    """Per-token decoupled PPO loss -w_t * min(u_t A, clip(u_t) A) (AReaL, arXiv 2505.24298 §5; module docstring).

    ``logp`` (B, T) pi_theta with gradient, ``prox_logp`` / ``behaviour_logp`` (B, T) no gradient,
    ``advantages`` (B, 1) or (B, T), ``mask`` (B, T); ``eps`` = (eps_low, eps_high) of the clip; the weight
    pi_prox / pi_b by ``mode`` of :data:`rlvr_cli.algo.is_correction.IS_MODES` with ``cap`` (AReaL: token_mask;
    verl: token_truncate; no lower cap, as AReaL). Example: u = 1.5, A = 1, w = 3, token_truncate cap 2 -> -2.4.
    """
    sur = clipped_surrogate(token_log_ratio(logp, prox_logp, mask), advantages, *eps)
    weights = is_correction_weights(prox_logp, behaviour_logp, mask, mode, cap)
    return sur.loss * weights.weights, sur, weights


@dataclass
class M2POMask:
    keep: torch.Tensor
    """(N,) bool: the tokens whose policy loss counts."""
    second_moment: float
    """M2 over all N tokens, before masking (0 when N = 0)."""
    second_moment_kept: float
    """M2 over the kept tokens (<= tau)."""


def m2po_mask(log_ratio: torch.Tensor, threshold: float = 0.04) -> M2POMask:
    """M2PO's mask (arXiv 2510.01161, Algorithm 1): keep the most tokens, smallest (log r)^2 first, whose mean
    (log r)^2 is <= ``threshold``; ``log_ratio`` (N,) the loss tokens' log pi - log pi_b.

    Example: log r = [0.1, -0.1, 0.5, 0.0], tau 0.04 -> keep [True, True, False, True] (module docstring).
    """
    if not threshold > 0:
        raise ValueError(f"m2_threshold must be > 0, got {threshold}")
    m2 = log_ratio.detach().to(torch.float64).square()
    n = m2.numel()
    if n == 0:
        return M2POMask(torch.zeros(0, dtype=torch.bool, device=log_ratio.device), 0.0, 0.0)
    before = float(m2.mean())
    if before <= threshold:
        return M2POMask(torch.ones(n, dtype=torch.bool, device=log_ratio.device), before, before)
    values, order = torch.sort(m2, stable=True)
    prefix_mean = values.cumsum(0) / torch.arange(1, n + 1, dtype=torch.float64, device=m2.device)
    kept = int((prefix_mean <= threshold).sum())  # the prefix means of sorted values only grow: a prefix
    keep = torch.zeros(n, dtype=torch.bool, device=log_ratio.device)
    keep[order[:kept]] = True
    return M2POMask(keep, before, float(prefix_mean[kept - 1]) if kept else 0.0)


def behaviour_kl(logp: torch.Tensor, behaviour_logp: torch.Tensor, estimator: str = "k1") -> torch.Tensor:
    """KL_t(pi_theta || pi_b) per token by ``estimator`` (k1, k2, k3 of :mod:`rlvr_cli.algo.kl`), the loss term of
    the KL to the behaviour policy (prime-rl ``kl_tau``; module docstring). ``logp`` (B, T) with gradient.

    Example: log pi = log 0.5, log pi_b = log 0.25: k1 = log 2 = 0.6931, k2 = 0.2402, k3 = 0.5 - 1 + log 2 = 0.1931.
    """
    return KL_ESTIMATORS[estimator](logp, behaviour_logp.detach())
