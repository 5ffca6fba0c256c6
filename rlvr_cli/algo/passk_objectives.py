"""pass@k as the training objective: PKPO's reward transform and the analytic pass@k advantage.

Both start from the unbiased pass@k estimator of a group of G binary rewards with c correct
(Chen et al. 2021; :func:`rlvr_cli.algo.passk.pass_at_k`), rho(n, c, k) = 1 - C(n-c, k) / C(n, k), which
is the mean over all k-subsets I of the group of max_{j in I} f_j.

**PKPO** (Walder & Karkhanis 2025, "Pass@K Policy Optimization", arXiv 2505.15201, §3, binary
rewards): averaging the pass@k policy gradient over every k-subset gives the unbiased estimator
sum_i s_i grad log pi(o_i) with s_i = k/G for a correct sample and s_i = (k/G) rho(G-1, c, k-1) for an
incorrect one. rlvr writes it as a per-sample reward in the scale of an ordinary reward,

    R_i = 1                       if o_i is correct
    R_i = rho(G - 1, c, k - 1)    otherwise (the chance that k-1 of the *other* samples hold a correct one)

so that s_i = (k/G) R_i, mean_i R_i = rho(G, c, k) (the group's pass@k estimate) and, at k = 1,
R_i = f_i: PKPO with k = 1 is the plain reward. The transformed rewards then go through the recipe's
ordinary baseline and scale (:func:`rlvr_cli.algo.advantages.group_advantages`; with ``group_mean``
and ``scale: none`` at k = 1 that is plain mean-centring). Convention: the paper's variance-reduced
leave-one-out estimators are not implemented; the group-mean baseline includes o_i itself (as
GRPO's), which biases the gradient by O(1/G) exactly as GRPO's does. Only binary rewards are defined
(the paper's continuous maxg@k transform is not implemented).

**Analytic pass@k advantage** (Chen et al. 2025, "Pass@k Training for Adaptively Balancing
Exploration and Exploitation", arXiv 2508.10751, §3.3 "analytical derivation"): split the group into
every k-subset, give each subset the reward max f (pass@k), normalise it by the subsets' mean and std,
and give each response the mean normalised reward of the subsets it belongs to. In closed form, with
N_neg = G - c,

    Rbar  = rho(G, c, k),   sigma = sqrt(Rbar (1 - Rbar))          (population std of Bernoulli rewards)
    A_pos = (1 - Rbar) / sigma
    A_neg = (1 - Rbar - C(N_neg - 1, k - 1) / C(G - 1, k - 1)) / sigma

Its numerator is exactly PKPO's R_i - mean(R); the two differ only in the divisor: the std of the
k-subset rewards (sigma) instead of the std of the R_i. At k = 1 it is GRPO's advantage with the
population std (n, not Bessel's n - 1). Convention: a group with sigma <= ``atol`` (every subset
passes or every subset fails, e.g. fewer than k wrong answers) gets A = 0 exactly, as GRPO's
zero-spread groups (:mod:`rlvr_cli.algo.advantages`).

Worked example (the unit tests): G = 4, 2 correct, k = 2. rho(4, 2, 2) = 1 - 1/6 = 5/6. PKPO: correct
R = 1, incorrect R = rho(3, 2, 1) = 2/3; mean 5/6; centred +1/6, -1/6. Analytic: sigma =
sqrt(5/36) = 0.3727; A_pos = (1/6)/sigma = 0.4472; A_neg = (1/6 - C(1,1)/C(3,1))/sigma = (1/6 - 1/3)/sigma
= -0.4472.
"""

from __future__ import annotations

import math

import torch

from rlvr_cli.algo.advantages import ZERO_SPREAD_ATOL


def _binary_counts(correct: torch.Tensor, k: int) -> tuple[torch.Tensor, int]:
    """Validate (P, G) 0/1 rewards and 1 <= k <= G; return them as float64 and G."""
    if correct.dim() != 2:
        raise ValueError(f"rewards must be (prompts, group), got shape {tuple(correct.shape)}")
    f = correct.to(torch.float64)
    if not torch.all((f == 0) | (f == 1)):
        raise ValueError("pass@k objectives need binary rewards (0 or 1)")
    g = f.shape[1]
    if not 1 <= k <= g:
        raise ValueError(f"need 1 <= k <= G, got k={k}, G={g}")
    return f, g


def _rho(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of n samples with c correct; 0 for k = 0 (no sample drawn), 1 when n - c < k."""
    if k == 0:
        return 0.0
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pkpo_rewards(correct: torch.Tensor, k: int) -> torch.Tensor:
    """PKPO per-sample rewards R (P, G) for binary rewards (P, G): 1 if correct, else rho(G-1, c, k-1)."""
    f, g = _binary_counts(correct, k)
    out = torch.empty_like(f)
    for p, c in enumerate(f.sum(dim=1).round().long().tolist()):
        out[p] = torch.where(f[p] > 0, torch.ones_like(f[p]), torch.full_like(f[p], _rho(g - 1, c, k - 1)))
    return out


def passk_analytic_advantages(correct: torch.Tensor, k: int, atol: float = ZERO_SPREAD_ATOL) -> torch.Tensor:
    """Chen et al.'s analytic pass@k advantage (P, G) for binary rewards (P, G); float32 like the others."""
    f, g = _binary_counts(correct, k)
    out = torch.zeros_like(f)
    for p, c in enumerate(f.sum(dim=1).round().long().tolist()):
        rbar = _rho(g, c, k)
        sigma = math.sqrt(max(rbar * (1.0 - rbar), 0.0))
        if sigma <= atol:
            continue
        n_neg = g - c
        p_all_wrong = math.comb(n_neg - 1, k - 1) / math.comb(g - 1, k - 1) if n_neg >= 1 else 0.0
        a_pos = (1.0 - rbar) / sigma
        a_neg = (1.0 - rbar - p_all_wrong) / sigma
        out[p] = torch.where(f[p] > 0, torch.full_like(f[p], a_pos), torch.full_like(f[p], a_neg))
    return out.to(torch.float32)
