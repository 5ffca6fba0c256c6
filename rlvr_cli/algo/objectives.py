"""Policy objectives beyond PPO's clip: CISPO, SAPO and GMPO, per token, before aggregation.

Notation as :mod:`rlvr_cli.algo.policy_loss`: rho_t = exp(log rho_t) from :data:`~rlvr_cli.algo.policy_loss.RATIOS` (token or
GSPO's sequence ratio), A the advantage of the token's sequence, sg() the stop-gradient. Each function
returns the per-token loss (minimised; aggregate it with :mod:`rlvr_cli.algo.aggregation`) and the
tokens whose gradient the objective limits on either side, like PPO's clip flags.

**CISPO** (MiniMax 2025, "MiniMax-M1", arXiv 2506.13585, §3.1): clip the importance weight, not the
update, and keep the weight out of the gradient:

    loss_t = -sg(clip(rho_t, 1 - eps_low, 1 + eps_high)) * A * log pi_t
    d loss_t / d log pi_t = -clip(rho_t, 1 - eps_low, 1 + eps_high) * A         on *every* token

PPO's clip zeroes the gradient of a token whose ratio left the band on the advantage's side (a rare
token the update made much likelier); CISPO keeps it, with its weight capped at 1 + eps_high. The
paper sets no lower bound (eps_low^IS large) and tunes only eps_high^IS. Conventions differ:
- TRL ``loss_type="cispo"``: weight = min(rho, epsilon_high), so ``epsilon_high`` is the cap itself,
  not 1 + eps (ScaleRL's eps_max = 5, arXiv 2510.13786); left unset it falls back to ``epsilon`` = 0.2,
  which caps every weight at 0.2. No lower bound. Token mean over the global batch. rho is the token
  ratio unless ``importance_sampling_level="sequence"`` (TRL then warns).
- verl ``compute_policy_loss_cispo`` (``loss_mode=cispo``): weight = clamp(rho, 1 - clip_ratio_low,
  1 + clip_ratio_high); its example script sets clip_ratio_low = 10 (no lower bound) and
  clip_ratio_high = 0.2. Aggregation: ``loss_agg_mode``.
- here: the bounds 1 - eps_low and 1 + eps_high as verl; ``eps_low=None`` is no lower bound.
Both anchors multiply by log pi itself, so the logged loss is -w A log pi (not 0 on-policy); so here.

**SAPO** (Gao et al. 2025, Qwen, "Soft Adaptive Policy Optimization", arXiv 2511.20347): a smooth gate
instead of the clip, with one temperature per advantage sign:

    f_tau(rho) = (4 / tau) * sigmoid(tau * (rho - 1)),    tau = tau_pos if A > 0 else tau_neg
    loss_t = -f_tau(rho_t) * A
    d loss_t / d log rho_t = -A * rho_t * w_tau(rho_t),   w_tau = 4 s (1 - s),  s = sigmoid(tau (rho - 1))

w_tau(1) = 1 for every tau: on-policy, SAPO's gradient is the plain policy gradient. Off-policy it
decays smoothly on *both* sides of 1, w_tau(rho) <= 4 exp(-tau |rho - 1|). Limits (the unit tests):
tau -> 0 gives w -> 1 everywhere, the unclipped surrogate; tau -> infinity gives w -> 1[rho = 1], the
hard clip's eps -> 0 limit taken on both sides. At a fixed eps > 0, SAPO never becomes PPO's clip: on
the side PPO clips (A > 0 and rho > 1 + eps, A < 0 and rho < 1 - eps) its gradient tends to PPO's
zero as tau grows, but elsewhere off rho = 1 it tends to zero too, where PPO keeps the full gradient.
The gate has one shape in tau * (rho - 1): it is at half height where |rho - 1| = 1.7627 / tau.
Defaults tau_pos = 1.0, tau_neg = 1.05: the paper's, TRL's ``sapo_temperature_pos/neg`` and verl's
``actor.tau_pos/tau_neg``. verl uses the token ratio, TRL the one ``importance_sampling_level`` selects
(token by default); both aggregate as GRPO (mean over sequences of token means; verl's
``compute_policy_loss_sapo`` forces ``seq-mean-token-mean`` whatever ``loss_agg_mode`` says). A = 0 takes tau_neg in both, and here; it has no gradient either way.

**GMPO** (Zhao et al. 2025, "Geometric-Mean Policy Optimization", arXiv 2507.20673): a sequence's
token ratios combined by their geometric mean, each first clipped in log space on the advantage's side:

    x_t = min(log rho_t, eps_high) if A > 0,  max(log rho_t, -eps_low) if A < 0
    s_i = exp(mean_{t in o_i} x_t)                  (geometric mean of the clipped token ratios)
    loss_i = -A_i * s_i

A clipped token has zero gradient; the others get -A_i s_i / |o_i| * grad log pi_t, so one outlier
token moves its sequence's ratio by rho_t^(1/|o_i|), not by rho_t. loss_i is broadcast to every token
of o_i, so that ``seq_mean_token_mean`` aggregation is exactly (1/N) sum_i loss_i (as GSPO in
:mod:`rlvr_cli.algo.policy_loss`); verl's ``compute_policy_loss_geo_mean`` (``loss_mode=geo_mean``)
averages over sequences too, ignoring ``loss_agg_mode``. The authors' setting (their README in verl's
``examples/gmpo_trainer``: clip_ratio_low = clip_ratio_high = 0.4) is the log-space range (e^-0.4,
e^0.4), eps_low = eps_high = 0.4 here. TRL has no GMPO. Convention: verl leaves log rho unclamped; here the mean is clamped to +-MAX_LOG_RATIO.

Worked examples (the first tests): CISPO rho = 1.5, A = +1, eps_high = 0.2: PPO's gradient is 0,
CISPO's d loss / d log pi = -1.2. SAPO rho = 1, A = +1, tau = 1: loss -(4/1) * 1/2 = -2, d loss / d
log rho = -1. GMPO log-ratios [0.6, -0.2], A = +1, eps = 0.4: x = [0.4, -0.2], s = exp(0.1) =
1.10517, loss -1.10517 on both tokens, gradient [0, -1.10517 / 2 = -0.55259].
"""

from __future__ import annotations

import torch

from rlvr_cli.algo.policy_loss import MAX_LOG_RATIO, SurrogateOut


def without_dual_clip(loss: torch.Tensor, ratio: torch.Tensor, clip_low: torch.Tensor,
                      clip_high: torch.Tensor) -> SurrogateOut:
    """The record of an objective without PPO's dual clip: ``ratio`` (B, T) detached (GMPO: the sequence's
    clipped geometric-mean ratio s_i), ``clip_low`` / ``clip_high`` (B, T) bool the tokens the objective limits
    because rho is low / high (see each function)."""
    return SurrogateOut(loss, ratio, clip_low, clip_high, torch.zeros_like(clip_low))


def _ratio(log_ratio: torch.Tensor) -> torch.Tensor:
    return torch.exp(log_ratio.clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO))


def cispo_surrogate(
    logp: torch.Tensor,
    log_ratio: torch.Tensor,
    advantages: torch.Tensor,
    eps_low: float | None,
    eps_high: float,
) -> SurrogateOut:
    """CISPO per-token loss -sg(clip(rho, 1 - eps_low, 1 + eps_high)) * A * log pi (arXiv 2506.13585 §3.1).

    ``logp`` (B, T) the current log-probs (with gradient), ``log_ratio`` (B, T) from :data:`~rlvr_cli.algo.policy_loss.RATIOS`,
    ``advantages`` (B, T) or (B, 1). ``eps_low=None``: no lower bound (the paper, TRL). Flags: the
    weight was capped (below / above); unlike PPO's, a flagged token keeps a gradient. Example: rho =
    1.5, A = 1, eps_high = 0.2 -> d loss / d log pi = -1.2.
    """
    if eps_low is not None and not 0 <= eps_low < 1:
        raise ValueError(f"eps_low must be in [0, 1) or None, got {eps_low}")
    if eps_high < 0:
        raise ValueError(f"eps_high must be >= 0, got {eps_high}")
    advantages = advantages.expand_as(logp)
    ratio = _ratio(log_ratio).detach()
    low = 0.0 if eps_low is None else 1.0 - eps_low
    weight = ratio.clamp(min=low, max=1.0 + eps_high)
    loss = -weight * advantages * logp
    return without_dual_clip(loss, ratio, ratio < low, ratio > 1.0 + eps_high)


def sapo_gate_weight(ratio: torch.Tensor, tau: torch.Tensor | float) -> torch.Tensor:
    """w_tau(rho) = 4 s (1 - s), s = sigmoid(tau (rho - 1)): SAPO's gradient relative to the unclipped
    surrogate's (arXiv 2511.20347). Example: w(1) = 1 for every tau; w_1(2) = 4 * 0.7311 * 0.2689 = 0.7864.
    """
    x = tau * (ratio - 1.0)
    return 4.0 * torch.sigmoid(x) * torch.sigmoid(-x)  # = 4 s (1 - s), without cancelling in 1 - s


def sapo_surrogate(
    log_ratio: torch.Tensor, advantages: torch.Tensor, tau_pos: float = 1.0, tau_neg: float = 1.05
) -> SurrogateOut:
    """SAPO per-token loss -(4 / tau) sigmoid(tau (rho - 1)) * A, tau = tau_pos if A > 0 else tau_neg
    (arXiv 2511.20347). ``log_ratio`` (B, T) from :data:`~rlvr_cli.algo.policy_loss.RATIOS`; ``advantages`` (B, T) or (B, 1). No
    token is clipped: both flags are all False. Example: rho = 1, A = 1, tau = 1 -> loss -2, gradient -1.
    """
    if not (tau_pos > 0 and tau_neg > 0):
        raise ValueError(f"SAPO temperatures must be > 0, got tau_pos={tau_pos}, tau_neg={tau_neg}")
    advantages = advantages.expand_as(log_ratio)
    ratio = _ratio(log_ratio)
    tau = torch.where(advantages > 0, torch.full_like(ratio, tau_pos), torch.full_like(ratio, tau_neg))
    loss = -(4.0 / tau) * torch.sigmoid(tau * (ratio - 1.0)) * advantages
    none = torch.zeros_like(ratio, dtype=torch.bool)
    return without_dual_clip(loss, ratio.detach(), none, none.clone())


def gmpo_surrogate(
    log_ratio: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float = 0.4,
    eps_high: float = 0.4,
) -> SurrogateOut:
    """GMPO: loss_i = -A_i * exp(mean_{t in o_i} x_t), x_t = log rho_t clipped in log space on A's side
    (arXiv 2507.20673), broadcast to every unmasked token of o_i (0 elsewhere).

    ``log_ratio`` (B, T): *token* log-ratios (the geometric mean is GMPO's own sequence level);
    ``advantages`` (B, 1) or (B, T), constant along a row; ``mask`` (B, T). Aggregate with
    ``seq_mean_token_mean``. Flags: tokens whose log-ratio was clipped (zero gradient), A < 0 below /
    A > 0 above. Example: log-ratios [0.6, -0.2], A = 1, eps 0.4 -> s = exp(0.1), loss -1.10517.
    """
    if eps_low < 0 or eps_high < 0:
        raise ValueError(f"GMPO log-space bounds must be >= 0, got eps_low={eps_low}, eps_high={eps_high}")
    m = mask.to(log_ratio.dtype)
    advantages = advantages.expand_as(log_ratio)
    lengths = m.sum(dim=1, keepdim=True).clamp(min=1.0)
    adv_seq = (advantages * m).sum(dim=1, keepdim=True) / lengths  # A_i (constant along the row)
    pos, neg = adv_seq > 0, adv_seq < 0
    clipped = torch.where(pos, log_ratio.clamp(max=eps_high), log_ratio)
    clipped = torch.where(neg, log_ratio.clamp(min=-eps_low), clipped)
    mean_log = ((clipped * m).sum(dim=1, keepdim=True) / lengths).clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO)
    s = torch.exp(mean_log)
    loss = (-adv_seq * s).expand_as(log_ratio) * m
    lr = log_ratio.detach()
    valid = m > 0
    clip_low = neg & (lr < -eps_low) & valid
    clip_high = pos & (lr > eps_high) & valid
    return without_dual_clip(loss, s.detach().expand_as(log_ratio) * m, clip_low, clip_high)

