"""Per-token log-probabilities and entropy of the sampled tokens under a temperature, and under top-k / top-p.

    logp_t = log softmax(z_t / T)[y_t]
    H_t    = -sum_v p_v log p_v,  p = softmax(z_t / T)

Source: the standard definitions of a temperature-scaled softmax policy and its Shannon entropy; no
paper equation to cite.

Convention: the trainer divides the logits by the sampling temperature T, as the sampler does, so that
log pi_old from the sampling pass and log pi from the training pass are the same quantity (TRL and
verl do the same; forgetting it makes the ratio != 1 on the very first update).
Example: logits [0, 0] at T = 1 -> logp = log 0.5 for either token and H = log 2 = 0.693.

**Truncated sampling** (``rollout.top_k`` > 0 or ``top_p`` < 1). The sampler draws y_t from the
renormalised distribution over the support S_t the truncation keeps,

    q_t(v) = exp(z_v / T) / sum_{u in S_t} exp(z_u / T)    for v in S_t (0 elsewhere),

so log q_t(y_t) = z_y / T - logsumexp_{u in S_t} z_u / T is the behaviour log-prob (what the sampler
records), and the trainer's log-probs of the same tokens -- behaviour recomputed, proximal, current,
reference -- are all renormalised over the *same* S_t, the support chosen at sampling time and stored
per token (:func:`token_logprobs_on_support`). On-policy the ratio is then exactly 1 again; with the
untruncated log softmax on the trainer's side (what TRL and verl compute) the ratio carries the kept
mass S = pi(S_t) of every token: off by up to 0.17 at top_k 50 (TRL#6789, where vLLM returns these
renormalised `processed_logprobs`). The other choice, re-truncating each policy by its own top-k/top-p,
makes the support depend on theta (not differentiable) and can leave y_t outside it (log q = -inf);
TRL's PR #7269 proposed replaying the sampling support as here (vLLM's `return_sampling_mask`) but was
closed without being merged: in TRL 1.16 the on-policy ratio under top-k/top-p is still the kept mass S. A
consequence worth knowing: a token whose support is itself alone (top-p at a confident token) has
q = 1 whatever theta, ratio 1 and no gradient -- the truncated policy cannot change there.
Example: z = log [0.5, 0.3, 0.2], S = {0, 1} -> log q(0) = log(0.5 / 0.8) = -0.470.
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


def token_logprobs_on_support(
    logits: torch.Tensor, targets: torch.Tensor, support: torch.Tensor, temperature: float = 1.0,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log q(y_t) with q = softmax(z_t / T) renormalised over the sampling support S_t, and (``with_entropy``)
    the entropy of q (module docstring, "Truncated sampling").

    ``support`` (B, T, K) long: the ids of S_t, padded with -1; a token whose ids are all -1 was not
    truncated (S_t is the vocabulary: the plain log softmax). ``logits`` (B, T, V), ``targets`` (B, T), each
    y_t in its S_t. Example: z = log [0.5, 0.3, 0.2], S = {0, 1}: log q(0) = log 0.625, H = 0.6616.
    """
    z = logits.float() / temperature
    pad = support < 0
    full = pad.all(dim=-1)  # (B, T): no truncation at this token
    pad = pad & ~full.unsqueeze(-1)  # a full token's (all -1) row gathers id 0 unmasked: finite, and unused
    zs = z.gather(-1, support.clamp(min=0)).masked_fill(pad, float("-inf"))
    log_z = torch.where(full, torch.logsumexp(z, dim=-1), torch.logsumexp(zs, dim=-1))
    logp = z.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - log_z
    if not with_entropy:
        return logp, None
    full_logq = z - log_z.unsqueeze(-1)
    full_h = -(full_logq.exp() * full_logq).sum(dim=-1)
    logq_s = (zs - log_z.unsqueeze(-1)).masked_fill(pad, 0.0)  # 0 * log 0 counts as 0
    trunc_h = -(logq_s.exp().masked_fill(pad, 0.0) * logq_s).sum(dim=-1)
    return logp, torch.where(full, full_h, trunc_h)
