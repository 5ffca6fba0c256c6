"""Sampler/trainer mismatch: truncated (or masked) importance-sampling weights, and the mismatch itself.

When the behaviour log-probs come from the sampler (vLLM in bf16, or here sampling under bf16
autocast) and the trainer recomputes them in float32, the two differ token by token, so the
"on-policy" update is in fact off-policy. Yao et al. 2025 ("Your Efficient RL Framework Secretly
Brings You Off-Policy RL Training", the truncated-importance-sampling blog post) reweight each
token's loss by the truncated ratio of the two:

    d_t   = log pi_trainer(y_t) - log pi_sampler(y_t)          (per token; 0 on padding)
    token:     w_t = exp(d_t)
    sequence:  w_t = exp(sum_{s in o_i} d_s)  for every token t of o_i   (product of token ratios)
    *_truncate: w <- min(w, C)         (and max(w, C_low) when a lower cap is given)
    *_mask:     w <- w if C_low <= w <= C else 0

The weights are detached and multiply the per-token policy loss before aggregation; the PPO ratio
itself is computed against the *trainer's* recomputed log-probs (verl's "decoupled" mode: three
policies, sampler / old trainer / current). A masked token keeps its place in the normaliser.

Framework conventions (checked against their source):
- TRL (``GRPOConfig.vllm_importance_sampling_mode``): exactly these four modes
  (``token_truncate``, ``token_mask``, ``sequence_truncate``, ``sequence_mask``), with
  ``vllm_importance_sampling_clip_max`` (default 3.0) and ``..._clip_min`` (default None); the mode's
  default is ``sequence_mask``. The sequence ratio is exp(sum of token log-differences), as here.
  Mask modes set the weight to 0 (the token stays in the denominator), as here.
- verl (``algorithm.rollout_correction``): ``rollout_is: token | sequence`` truncates from above only
  at ``rollout_is_threshold`` (default 2.0); masking is a separate *rejection sampling* option
  ``rollout_rs`` (e.g. ``token_k1`` with lower/upper ratio bounds, ``seq_sum_k1``, ``seq_mean_k3``) that
  edits ``response_mask``, so a rejected token also leaves the denominator: unlike here and TRL.
- rlvr's default cap is 2.0 (verl's); TRL's is 3.0.

Mismatch statistics (:func:`mismatch_stats`), over valid tokens, independent of the mode so runs with
different modes compare: mean and max |d_t|, and the token ratio exp(d_t) at p1 / p50 / p99
(``torch.quantile``, linear interpolation).

Worked example (the unit tests): d = [log 3, log 0.5] in one sequence with C = 2: token_truncate
-> [2, 0.5], token_mask -> [0, 0.5]; the sequence ratio 1.5 is kept by both sequence modes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rlvr_cli.algo.policy_loss import MAX_LOG_RATIO

IS_MODES = ("none", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


@dataclass
class ISCorrection:
    weights: torch.Tensor  # (B, T) detached weights, 0 on padding (1 on valid tokens for mode none)
    corrected: torch.Tensor  # (B, T) bool: valid tokens whose weight was truncated or masked
    stats: dict[str, float]  # mismatch_stats(...) plus is_corrected_frac and is_weight_mean
    weight_sum: float = 0.0  # the weights' float64 sum over valid tokens, before the cast to ``weights``' dtype


def mismatch_stats(trainer_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """mean / max |log pi_sampler - log pi_trainer| and the token ratio's p1 / p50 / p99 over valid tokens.

    Empty dict when no token is valid. Example: d = [0.1, -0.3] -> abs mean 0.2, abs max 0.3.
    """
    valid = mask > 0
    return log_ratio_stats((trainer_logp.detach() - sampler_logp.detach()).to(torch.float64)[valid])


def log_ratio_stats(d: torch.Tensor) -> dict[str, float]:
    """:func:`mismatch_stats` of the valid tokens' log-differences ``d`` (1-D float64), e.g. every
    process's tokens gathered (the quantiles are of the whole batch, whichever process holds a row)."""
    if d.numel() == 0:
        return {}
    ratio = torch.exp(d.clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO))
    q = torch.quantile(ratio, torch.tensor([0.01, 0.5, 0.99], dtype=torch.float64))
    return {
        "mismatch_abs_mean": float(d.abs().mean()),
        "mismatch_abs_max": float(d.abs().max()),
        "is_ratio_p01": float(q[0]),
        "is_ratio_p50": float(q[1]),
        "is_ratio_p99": float(q[2]),
    }


def is_correction_weights(
    trainer_logp: torch.Tensor,
    sampler_logp: torch.Tensor,
    mask: torch.Tensor,
    mode: str,
    cap: float = 2.0,
    cap_low: float | None = None,
) -> ISCorrection:
    """Importance weights pi_trainer / pi_sampler (B, T) of ``mode`` in :data:`IS_MODES` with cap C.

    ``trainer_logp`` are the trainer's recomputed behaviour log-probs (no gradient), ``sampler_logp``
    the sampler's, ``mask`` (B, T) the tokens that count. ``cap_low`` (optional, < 1 < cap) is TRL's
    C_min. The log-difference is clamped to +-MAX_LOG_RATIO before exp (finite weights).
    """
    if mode not in IS_MODES:
        raise ValueError(f"unknown is_correction mode {mode!r}; choose from {list(IS_MODES)}")
    if not cap > 1:
        raise ValueError(f"cap must be > 1, got {cap}")
    if cap_low is not None and not 0 < cap_low < 1:
        raise ValueError(f"cap_low must be in (0, 1), got {cap_low}")
    m = (mask > 0).to(torch.float64)
    d = (trainer_logp.detach() - sampler_logp.detach()).to(torch.float64) * m
    if mode.startswith("sequence"):
        d = d.sum(dim=1, keepdim=True).expand_as(d)
    raw = torch.exp(d.clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO))
    low = 0.0 if cap_low is None else cap_low
    if mode == "none":
        w = torch.ones_like(raw)
    elif mode.endswith("truncate"):
        w = raw.clamp(min=low, max=cap)
    else:
        w = torch.where((raw > cap) | (raw < low), torch.zeros_like(raw), raw)
    w = w * m
    corrected = (w != raw) & (m > 0) if mode != "none" else torch.zeros_like(m, dtype=torch.bool)
    stats = mismatch_stats(trainer_logp, sampler_logp, mask)
    n, weight_sum = float(m.sum()), float(w.sum())
    if n > 0:
        stats["is_corrected_frac"] = float(corrected.sum()) / n
        stats["is_weight_mean"] = weight_sum / n
    return ISCorrection(w.to(trainer_logp.dtype), corrected, stats, weight_sum)
