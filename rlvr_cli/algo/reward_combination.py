"""GDPO: normalise each reward term within its group, then sum, instead of normalising the sum.

With K reward terms r_k (correctness, format, ...) and weights w_k, GRPO normalises the weighted sum
r = sum_k w_k r_k within each group (:func:`rlvr_cli.algo.advantages.group_advantages`). GDPO ("GDPO:
Group reward-Decoupled Normalization Policy Optimization for Multi-reward RL Optimization", arXiv
2601.05242; code github.com/NVlabs/GDPO) normalises each term first, then normalises the sum over the batch:

    A_k,i = (r_k,i - mean_group(r_k)) / (std_group(r_k) + eps)      each term, within its group
    A_i   = sum_k w_k A_k,i
    Ahat_i = (A_i - mean_batch(A)) / (std_batch(A) + eps)           over every sample of the batch

Why: distinct reward combinations collapse to the same GRPO advantage. Two prompts of two samples,
terms (correct, format): rewards (1, 0), (0, 0) sum to [1, 0]; (1, 1), (0, 0) to [2, 0]; after the
group std both are [+0.707, -0.707]. GDPO keeps the second one twice as strong.

Only the std makes the difference: centring is linear, so with no std (Dr. GRPO's ``scale: none``)
the decoupled sum equals the centred sum and GDPO is inert; with one term it is GRPO followed by the
batch normalisation. The per-term step here is rlvr's ``group_mean`` / ``group_std``, with its
conventions (Bessel std, eps added to the std, a zero-spread term gives exactly 0). The batch mean of
the sum is 0 by construction (each term's advantages sum to 0 within a group), so the last step is a
division by the batch std; a group whose terms all have zero spread keeps A = 0 exactly.

Framework conventions:
- TRL ``multi_objective_aggregation="normalize_then_sum"`` (default ``"sum_then_normalize"``): the
  three steps above, eps = 1e-4, Bessel std (``nanstd``), the batch statistics over the sequences of
  the whole generation batch; ``scale_rewards`` does not apply to the per-term step.
- verl ``compute_gdpo_outcome_advantage`` (``adv_estimator=gdpo``, terms named by
  ``algorithm.gdpo_reward_keys``, weights ``gdpo_reward_weights``): the per-term step is its GRPO
  advantage (eps 1e-6; ``norm_adv_by_std_in_grpo`` applies), and the batch step is ``masked_whiten``
  over *tokens*, so a long response weighs more in the batch mean and std than a short one.

Worked example (the first test), weights [1, 1]: prompt 0 terms (1, 0), (0, 0); prompt 1 terms
(1, 1), (0, 0). Term advantages (G = 2, std 0.7071): prompt 0 [+0.7071, -0.7071] and [0, 0]; prompt 1
[+0.7071, -0.7071] twice. Sums [0.7071, -0.7071, 1.4142, -1.4142]; batch mean 0, Bessel std
sqrt((0.5 + 0.5 + 2 + 2) / 3) = 1.2910 -> [0.5477, -0.5477, 1.0954, -1.0954] (GRPO on the sums:
[0.7071, -0.7071, 0.7071, -0.7071]).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rlvr_cli.algo.advantages import ZERO_SPREAD_ATOL, group_advantages, zero_spread_groups


def decoupled_group_advantages(
    term_rewards: torch.Tensor,
    weights: Sequence[float] | torch.Tensor,
    eps: float = 1e-6,
    batch_normalize: bool = True,
    zero_spread_atol: float = ZERO_SPREAD_ATOL,
) -> torch.Tensor:
    """GDPO advantages (P, G) float32 from per-term rewards (P prompts, G responses, K terms).

    arXiv 2601.05242 (module docstring). ``weights`` (K,) are the w_k; ``batch_normalize=False``
    stops after the weighted sum of the per-term group advantages.
    """
    if term_rewards.dim() != 3:
        raise ValueError(f"term_rewards must be (prompts, group, terms), got shape {tuple(term_rewards.shape)}")
    r = term_rewards.to(torch.float64)
    w = torch.as_tensor(weights, dtype=torch.float64)
    if w.shape != (r.shape[2],):
        raise ValueError(f"need one weight per reward term: {r.shape[2]} terms, weights of shape {tuple(w.shape)}")
    k_terms = range(r.shape[2])
    per_term = torch.stack(
        [group_advantages(r[:, :, k], "group_mean", "group_std", eps, zero_spread_atol).double() for k in k_terms], dim=2
    )
    adv = (per_term * w).sum(dim=2)
    if batch_normalize:
        if adv.numel() < 2:
            return torch.zeros_like(adv, dtype=torch.float32)
        std = adv.flatten().std(unbiased=True)
        adv = torch.zeros_like(adv) if std <= zero_spread_atol else (adv - adv.mean()) / (std + eps)
    silent = torch.stack([zero_spread_groups(r[:, :, k], zero_spread_atol) for k in k_terms], dim=1).all(dim=1)
    adv = torch.where(silent.unsqueeze(1), torch.zeros_like(adv), adv)
    return adv.to(torch.float32)
