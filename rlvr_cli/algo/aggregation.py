"""Loss aggregation: how per-token losses become one number, i.e. the length divisor.

With per-token losses l_it, mask m_it (response tokens left after every mask), |o_i| = sum_t m_it:

    seq_mean_token_mean      (GRPO, arXiv:2402.03300 eq. 3):  1/N_seq * sum_i 1/|o_i| * sum_t m_it l_it
    token_mean               (DAPO, arXiv:2503.14476 §3.3):   sum_it m_it l_it / sum_it m_it
    seq_mean_token_sum_norm  (Dr. GRPO, arXiv:2503.20783 §3.1, Fig. 1): sum_it m_it l_it / (N_seq * L)

N_seq counts sequences with at least one unmasked token, so a masked (e.g. truncated) sequence leaves
the numerator and the denominator alike. L is a recipe constant (default: max new tokens), never the
padded batch length, which would make the loss scale depend on the longest response in the batch.

Each mode is written as per-token weights w_it plus a normaliser Z, loss = sum_it w_it l_it / Z, with Z
computed once over the whole optimiser batch. A micro-batch then contributes sum over its own tokens
of w_it l_it / Z and the micro-batch gradients add up to the full-batch gradient exactly, however the
batch is split (and Z is a count, so it can be all-reduced across data-parallel ranks).

Worked example: token losses [2] and [1, 1, 1] give 5/4 = 1.25 (token_mean), (2 + 1)/2 = 1.5
(seq_mean_token_mean) and 5/(2L) (seq_mean_token_sum_norm).
"""

from __future__ import annotations

import torch


def aggregation_weights(mask: torch.Tensor, mode: str, length_constant: int | None = None) -> torch.Tensor:
    """Per-token weights w (B, T) of ``mode``; ``mask`` (B, T) is 1 on tokens that count.

    Sources per mode: GRPO arXiv:2402.03300 eq. 3; DAPO arXiv:2503.14476 §3.3; Dr. GRPO arXiv:2503.20783 §3.1.
    """
    mask = mask.to(torch.float32)
    if mode == "token_mean":
        return mask
    if mode == "seq_mean_token_mean":
        lengths = mask.sum(dim=1, keepdim=True)
        return mask / lengths.clamp(min=1.0)
    if mode == "seq_mean_token_sum_norm":
        if not length_constant or length_constant < 1:
            raise ValueError("seq_mean_token_sum_norm needs a positive length_constant L")
        return mask / float(length_constant)
    raise ValueError(f"unknown aggregation mode {mode!r}; choose from {sorted(AGGREGATIONS)}")


def aggregation_normalizer(mask: torch.Tensor, mode: str) -> float:
    """Z of ``mode`` over a whole optimiser batch: a token count for token_mean, else a sequence count.

    The denominators of GRPO (arXiv:2402.03300 eq. 3), DAPO (arXiv:2503.14476 §3.3) and Dr. GRPO
    (arXiv:2503.20783 §3.1) written as counts, so micro-batches and data-parallel ranks can share them.
    """
    if mode == "token_mean":
        return float(mask.sum())
    if mode in ("seq_mean_token_mean", "seq_mean_token_sum_norm"):
        return float((mask.sum(dim=1) > 0).sum())
    raise ValueError(f"unknown aggregation mode {mode!r}; choose from {sorted(AGGREGATIONS)}")


def aggregate(
    token_values: torch.Tensor,
    mask: torch.Tensor,
    mode: str,
    length_constant: int | None = None,
    normalizer: float | None = None,
    divisor_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """sum_it w_it * v_it / Z; pass the full batch's ``normalizer`` when ``token_values`` is a micro-batch.

    The outer averages of GRPO (arXiv:2402.03300 eq. 3), DAPO (arXiv:2503.14476 §3.3) and Dr. GRPO
    (arXiv:2503.20783 §3.1).

    ``divisor_mask`` (default ``mask``): the tokens |o_i| and Z count when they are not the tokens that
    carry loss (a multi-turn trajectory's environment tokens: rlvr_cli/algo/env_tokens.py); then
    w_it = mask_it * (w of the divisor's row i): 1/|o_i|_D, 1 or 1/L.

    Returns 0 (with gradient) when nothing is left to average (Z = 0), e.g. every response masked.
    """
    if divisor_mask is not None:
        z = aggregation_normalizer(divisor_mask, mode) if normalizer is None else normalizer
        per_row = aggregation_weights(torch.ones_like(divisor_mask), mode, length_constant)
        if mode == "seq_mean_token_mean":
            per_row = 1.0 / divisor_mask.to(torch.float32).sum(dim=1, keepdim=True).clamp(min=1.0)
        weighted = (mask.to(torch.float32) * per_row * token_values).sum()
        return weighted / z if z > 0 else weighted * 0.0
    z = aggregation_normalizer(mask, mode) if normalizer is None else normalizer
    weighted = (aggregation_weights(mask, mode, length_constant) * token_values).sum()
    return weighted / z if z > 0 else weighted * 0.0


AGGREGATIONS = ("seq_mean_token_mean", "token_mean", "seq_mean_token_sum_norm")
