"""DAPO's overlong reward shaping (Yu et al. 2025, arXiv:2503.14476 §3.4, eq. 13, "soft overlong punishment").

With L_max the generation limit and B the buffer:

    R_length(|o|) = 0                          if |o| <= L_max - B
                  = ((L_max - B) - |o|) / B    if L_max - B < |o| <= L_max
                  = -1                         if |o| > L_max

added to the task reward (times ``factor``). A response cut at the limit has |o| = L_max and gets -1.
DAPO's other overlong switch, *overlong filtering* (truncated responses left out of the loss), is a
mask in the trainer, not a reward.

Example: L_max = 20, B = 4 -> lengths 16, 18, 20 get 0, -0.5, -1.
"""

from __future__ import annotations

import torch


def soft_overlong_penalty(lengths: torch.Tensor, max_len: int, buffer: int, factor: float = 1.0) -> torch.Tensor:
    """R_length (DAPO, arXiv:2503.14476 eq. 13) for response lengths (B,) -> (B,) float."""
    if not 0 < buffer < max_len:
        raise ValueError(f"buffer must be in 1..max_len-1, got {buffer} with max_len {max_len}")
    lengths = lengths.to(torch.float32)
    start = max_len - buffer
    inside = (start - lengths) / buffer
    pen = torch.where(lengths <= start, torch.zeros_like(lengths), inside)
    pen = torch.where(lengths > max_len, torch.full_like(lengths, -1.0), pen)
    return factor * pen
