"""Adaptive entropy coefficient: an entropy bonus switched on and steered when entropy falls to a target.

Skywork-OR1 (arXiv 2505.22312, its "adaptive entropy control"; TRL's paper index places it in §3.3)
adds -alpha_k * H to the loss, with H the mean per-token entropy, and moves the coefficient by a fixed
step after every optimiser update k, from the entropy e_k measured over that update's tokens:

    c_{k+1} = min(c_k + delta, c_max)   if e_k <= target
              max(c_k - delta, c_min)   otherwise
    alpha_{k+1} = c_{k+1} * 1[e_k <= target]          (no bonus while entropy is above the target)

So the bonus only ever acts on a collapsing policy: above the target it is off and c decays towards
c_min; at or below it, c grows by delta per update until entropy recovers. The coefficient applied at
update k+1 is fixed before its first micro-batch (every micro-batch of an update uses the same alpha).

Conventions, as TRL (``use_adaptive_entropy=True``; ``entropy_coef`` is c_0, ``entropy_target``,
``entropy_coef_delta``, ``entropy_coef_min``, ``entropy_coef_max``; defaults 0.2 nats, 0.005, 0.0,
1.0, c_0 = 0.0): e_k is the token-weighted mean over every micro-batch and rank of the update (the
same tokens as the policy loss, i.e. after the top-entropy mask), measured in the loss's own forward
pass (the policy before the update); before the first measurement e = +inf, so update 1 has no
bonus; equality counts as "at or below". verl has no adaptive coefficient (``entropy_coeff`` is
fixed). Differences from TRL's bonus itself: TRL's is always the mean per-token entropy, whatever the
loss type; rlvr's ``loss.entropy_coef`` bonus is aggregated like the policy loss.

Worked example (the first test), target 0.2, delta 0.005, c in [0, 1], c_0 = 0: e = 0.5 -> c stays 0
(clamped), alpha 0; e = 0.1 -> c = 0.005, alpha 0.005; e = 0.1 -> c = 0.010, alpha 0.010; e = 0.3 ->
c = 0.005, alpha 0.
"""

from __future__ import annotations

import math


def next_entropy_coef(
    coef: float, entropy: float, target: float, delta: float, coef_min: float = 0.0, coef_max: float = 1.0
) -> float:
    """c_{k+1} from c_k and the update's mean token entropy e_k (nats): +delta when e_k <= target, else
    -delta, clamped to [coef_min, coef_max] (arXiv 2505.22312; TRL ``use_adaptive_entropy``).

    Example: c 0.01, e 0.1, target 0.2, delta 0.005 -> 0.015; e 0.3 -> 0.005.
    """
    if delta < 0 or coef_min < 0 or coef_max < coef_min:
        raise ValueError(f"need delta >= 0 and 0 <= coef_min <= coef_max, got {delta}, {coef_min}, {coef_max}")
    if math.isnan(entropy):
        raise ValueError("entropy is NaN")
    if entropy <= target:
        return min(coef + delta, coef_max)
    return max(coef - delta, coef_min)


def applied_entropy_coef(coef: float, last_entropy: float, target: float) -> float:
    """alpha: the coefficient the next update multiplies its entropy bonus by: ``coef`` when the last
    measured entropy is at or below ``target``, else 0 (none measured yet: pass ``math.inf``).

    Example: applied_entropy_coef(0.01, 0.1, 0.2) = 0.01; applied_entropy_coef(0.01, 0.3, 0.2) = 0.
    """
    return coef if last_entropy <= target else 0.0
