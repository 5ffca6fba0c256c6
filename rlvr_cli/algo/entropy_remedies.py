"""Token selections against entropy collapse: the top-entropy mask, Clip-Cov and KL-Cov.

**Top-entropy mask** (Wang et al. 2025, "Beyond the 80/20 Rule", arXiv 2506.01939, §4 eq. for
J_HighEnt): the policy gradient flows only through the tokens whose entropy is in the top ``q`` of the
batch (q = 0.2 in the paper):

    tau_q = quantile_{1-q}( {H_t : t valid in the batch} )
    m_t   = 1[H_t >= tau_q] * valid_t
    loss  = sum_t m_t * l_t / Z        with Z the ordinary normaliser over *all* valid tokens

The mask multiplies the numerator only; the denominator keeps every valid token. The paper writes
the objective with 1 / sum_i |o_i| outside the indicator, and TRL does the same
(``GRPOTrainer.get_high_entropy_mask`` with ``threshold = 1 - top_entropy_quantile``, then
``per_token_loss * entropy_mask`` aggregated with the unmasked completion mask). The consequence:
the gradient of the kept tokens is not scaled up; q = 0.2 is a 5x smaller step, not a reweighting.
Conventions: the quantile is ``torch.quantile`` (linear interpolation) and ties at tau are kept
(>=), as TRL, so floor(1 + q * (N - 1)) of N distinct entropies survive (more with ties): about a
fraction q; q = 1 keeps every token. TRL computes tau per forward micro-batch (gathered across
ranks) from the current policy's entropies; which tokens form "the batch" here is the caller's
choice (:func:`top_entropy_mask` sees only what it is passed).

**Clip-Cov and KL-Cov** (Cui et al. 2025, "The Entropy Mechanism of Reinforcement Learning for
Reasoning Language Models", arXiv 2505.22617, §5): the entropy change of a softmax policy is driven
by the covariance of log pi and the advantage, so both methods act on the few tokens of highest
centred covariance, computed per token over the valid tokens of the batch:

    cov_t = (log pi_t - mean(log pi)) * (A_t - mean(A))          (both means over valid tokens)

- Clip-Cov: draw uniformly at random n = max(1, floor(clip_ratio * N)) tokens among those with
  lb <= cov_t <= ub and detach their gradient (the loss value stays, its gradient is 0).
- KL-Cov: take the top n = max(1, floor(kl_ratio * N)) tokens by cov_t and add
  coef * |log pi_t - log pi_old_t| to their loss.

Defaults are those of the paper's released scripts (verl ``recipe/entropy/7b_clip_cov.sh`` and
``7b_kl_cov.sh``): clip_ratio 2e-4, lb 1, ub 5; kl_ratio 2e-3, coef 1. Differences from verl's
``compute_policy_loss_clip_cov`` / ``compute_policy_loss_kl_cov`` (``verl/trainer/ppo/core_algos.py``):

1. verl's Clip-Cov candidates are the open interval lb < cov < ub and exclude tokens where PPO's clip
   is already active; here the interval is closed and the exclusion is the caller's ``exclude``
   argument (pass the surrogate's clip flags to match verl).
2. verl's Clip-Cov multiplies the selected tokens' loss by 0 (value and gradient); here the value is
   kept and only the gradient is cut (:func:`detach_selected`): the gradient is the same, the logged
   loss is not.
3. verl draws with ``torch.randperm`` from the global RNG; here a passed ``torch.Generator`` makes the
   selection reproducible.
4. verl's KL-Cov drops PPO's clip for *every* token (its loss is -A * rho, plus the penalty on the
   selected ones) and its released Clip-Cov script sets the clip to 1/1 (ratio range [0, 2]); here
   both are added to whatever surrogate ``loss.clip`` defines, so the remedy is one orthogonal axis.
5. verl's KL-Cov default coefficient in its config tree is ``ppo_kl_coef: 0.1`` (the function's own
   fallback is 1.0, the script's value 1); rlvr's default is the script's 1.
6. verl computes the covariance and the top-k per micro-batch (each call of the loss); here it is
   over whatever the caller passes.
7. At least one token is always selected (verl's ``max(..., 1)``): at rlvr's scale (~10^3 tokens per
   minibatch) the paper's fractions select exactly one token per minibatch.

KL-Cov is inert on-policy: with one pass and one minibatch log pi = log pi_old, the penalty is 0 and
so is its gradient (d|x|/dx at 0 is 0 in torch) -- when the two agree bit for bit. When log pi_old
comes from another code path (the sampler's KV-cache pass) they can differ by round-off, and then
d|x|/dx = sign(x) gives the selected token a full coef-sized gradient of random sign.
Clip-Cov is not inert: it cuts gradients even on-policy.

Worked example (the unit tests): log pi = [-1, -3], A = [1, -1] -> means -2 and 0 ->
cov = [(1)(1), (-1)(-1)] = [1, 1].
"""

from __future__ import annotations

import math

import torch


def high_entropy_threshold(entropy: torch.Tensor, mask: torch.Tensor, quantile: float) -> torch.Tensor:
    """tau_q: the (1 - q) quantile (linear interpolation) of the entropies of the valid tokens.

    ``entropy`` and ``mask`` (B, T). Returns a 0-d tensor; +inf when no token is valid (nothing kept).
    Example: entropies [0, 1, 2, 3, 4], q = 0.2 -> quantile 0.8 -> tau = 3.2.
    """
    if not 0 < quantile <= 1:
        raise ValueError(f"quantile must be in (0, 1], got {quantile}")
    valid = entropy.detach()[mask > 0].to(torch.float64)
    if valid.numel() == 0:
        return torch.tensor(math.inf, dtype=torch.float64)
    return torch.quantile(valid, 1.0 - quantile)


def top_entropy_mask(entropy: torch.Tensor, mask: torch.Tensor, quantile: float) -> torch.Tensor:
    """Bool (B, T): valid tokens with H_t >= tau_q. Multiply the policy-loss numerator by it; keep Z.

    Example: entropies [0, 1, 2, 3, 4], q = 0.2 -> tau 3.2 -> only the token with H = 4 is kept.
    """
    tau = high_entropy_threshold(entropy, mask, quantile)
    return (entropy.detach().to(torch.float64) >= tau) & (mask > 0)


def token_covariance(logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """cov_t = (log pi_t - mean log pi)(A_t - mean A), means over valid tokens; (B, T), 0 where invalid.

    ``advantages`` (B, T) or (B, 1) (broadcast over tokens, as each token of o_i carries A_i). Detached:
    the covariance selects tokens, it is not differentiated.
    """
    valid = mask > 0
    adv = advantages.detach().expand_as(logp).to(torch.float64)
    lp = logp.detach().to(torch.float64)
    n = valid.sum()
    if n == 0:
        return torch.zeros_like(lp)
    lp_mean = lp[valid].mean()
    adv_mean = adv[valid].mean()
    return torch.where(valid, (lp - lp_mean) * (adv - adv_mean), torch.zeros_like(lp))


def cov_selection_count(mask: torch.Tensor, ratio: float) -> int:
    """n = max(1, floor(ratio * N)) with N the valid tokens (0 when there are none), as verl."""
    if not 0 < ratio <= 1:
        raise ValueError(f"ratio must be in (0, 1], got {ratio}")
    n_valid = int((mask > 0).sum())
    return 0 if n_valid == 0 else max(1, int(ratio * n_valid))


def clip_cov_selection(
    cov: torch.Tensor,
    mask: torch.Tensor,
    clip_ratio: float,
    lb: float,
    ub: float,
    generator: torch.Generator,
    exclude: torch.Tensor | None = None,
) -> torch.Tensor:
    """Clip-Cov: bool (B, T) of n = max(1, floor(clip_ratio * N)) tokens drawn uniformly among valid
    tokens with lb <= cov_t <= ub (and not ``exclude``); fewer when there are fewer candidates.

    The draw is ``torch.randperm(#candidates, generator=generator)``: the same generator state gives
    the same tokens. Candidates are taken in row-major order before the permutation.
    """
    if lb > ub:
        raise ValueError(f"lb ({lb}) must be <= ub ({ub})")
    cand = (mask > 0) & (cov >= lb) & (cov <= ub)
    if exclude is not None:
        cand = cand & ~exclude.bool()
    idx = cand.flatten().nonzero().squeeze(1)
    picked = torch.zeros(cov.numel(), dtype=torch.bool, device=cov.device)
    n = min(cov_selection_count(mask, clip_ratio), idx.numel())
    if n > 0:
        perm = torch.randperm(idx.numel(), generator=generator)[:n].to(idx.device)
        picked[idx[perm]] = True
    return picked.view_as(cov)


def kl_cov_selection(cov: torch.Tensor, mask: torch.Tensor, kl_ratio: float) -> torch.Tensor:
    """KL-Cov: bool (B, T) of the n = max(1, floor(kl_ratio * N)) valid tokens of largest cov_t.

    Ties are broken by ``torch.topk`` (deterministic on CPU). A token is selected by rank alone, even
    when its covariance is negative (as verl).
    """
    n = cov_selection_count(mask, kl_ratio)
    picked = torch.zeros(cov.numel(), dtype=torch.bool, device=cov.device)
    if n == 0:
        return picked.view_as(cov)
    valid = (mask > 0).flatten()
    scores = torch.where(valid, cov.flatten(), torch.full_like(cov.flatten(), -math.inf))
    top = torch.topk(scores, n).indices
    picked[top] = True
    return picked.view_as(cov)


def kl_cov_penalty(log_ratio: torch.Tensor, selected: torch.Tensor, coef: float) -> torch.Tensor:
    """Per-token penalty coef * |log pi_t - log pi_old_t| on the selected tokens, 0 elsewhere; add it to
    the per-token loss before aggregation. Example: log-ratio 0.5, coef 1 -> 0.5 (gradient sign(0.5) = 1).
    """
    return torch.where(selected, coef * log_ratio.abs(), torch.zeros_like(log_ratio))


def detach_selected(token_loss: torch.Tensor, selected: torch.Tensor) -> torch.Tensor:
    """Clip-Cov's cut: the selected tokens keep their loss value with zero gradient."""
    return torch.where(selected, token_loss.detach(), token_loss)
