"""Per-token log-probabilities and entropy of the sampled tokens under a temperature.

    logp_t = log softmax(z_t / T)[y_t]
    H_t    = -sum_v p_v log p_v,  p = softmax(z_t / T)

Source: the standard definitions of a temperature-scaled softmax policy and its Shannon entropy; no
paper equation to cite.

Convention: the trainer divides the logits by the sampling temperature T, as the sampler does, so that
log pi_old from the sampling pass and log pi from the training pass are the same quantity (TRL and
verl do the same; forgetting it makes the ratio != 1 on the very first update).
Example: logits [0, 0] at T = 1 -> logp = log 0.5 for either token and H = log 2 = 0.693.
"""

from __future__ import annotations

import torch


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log p(y_t) = log softmax(z_t / T)[y_t] for logits (B, T, V) and targets (B, T) -> (B, T) (module docstring)."""
    logq = torch.log_softmax(logits.float() / temperature, dim=-1)
    return logq.gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def token_logprobs_and_entropy(
    logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """(log p(y_t), H_t = -sum_v p_v log p_v) for logits (B, T, V) and targets (B, T), both (B, T) (module
    docstring).
    """
    logq = torch.log_softmax(logits.float() / temperature, dim=-1)
    logp = logq.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    entropy = -(logq.exp() * logq).sum(dim=-1)
    return logp, entropy
