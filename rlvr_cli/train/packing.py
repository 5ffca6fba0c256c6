"""Pack (prompt, response) token lists into tensors, and get per-token log-probs of the responses.

Layout: prompts left-padded to a common width Lp, responses right-padded to Lr:

    [pad .. pad | prompt tokens | response tokens | pad .. pad]
                 <----- Lp ----> <------- Lr ------->

so the logits that predict response token j sit at input position Lp - 1 + j for every row, and a
forward over ``input_ids[:, :-1]`` keeping only the last Lr positions (``logits_to_keep``) computes
exactly the logits the loss needs, not the prompt's.

Under top-k / top-p sampling each response token also carries its sampling support, (B, Lr, K) ids
padded with -1, and every log-prob computed on the pack is renormalised over it
(:func:`rlvr_cli.algo.logprobs.token_logprobs_on_support`), so the trainer's policies are the ones
that sampled, truncated as they sampled.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch

from rlvr_cli.algo.logprobs import token_logprobs, token_logprobs_and_entropy, token_logprobs_on_support
from rlvr_cli.sampling import TokenSupport


@dataclass
class Packed:
    input_ids: torch.Tensor  # (B, Lp + Lr)
    attention_mask: torch.Tensor  # (B, Lp + Lr)
    position_ids: torch.Tensor  # (B, Lp + Lr)
    response_ids: torch.Tensor  # (B, Lr)
    response_mask: torch.Tensor  # (B, Lr) float: 1 on real response tokens
    support: torch.Tensor | None = None  # (B, Lr, K) long: each token's sampling support, -1 padded; None: untruncated

    @property
    def response_width(self) -> int:
        return self.response_ids.shape[1]


def pack(prompt_ids: list[list[int]], response_ids: list[list[int]], pad_id: int, device=None,
         supports: list[TokenSupport] | None = None) -> Packed:
    """The rows as tensors (module docstring); ``supports``, one per row, when the responses were sampled truncated."""
    b = len(prompt_ids)
    lp = max(len(p) for p in prompt_ids)
    lr = max(1, max(len(r) for r in response_ids))
    ids = torch.full((b, lp + lr), pad_id, dtype=torch.long)
    mask = torch.zeros((b, lp + lr), dtype=torch.long)
    for i, (p, r) in enumerate(zip(prompt_ids, response_ids)):
        ids[i, lp - len(p) : lp] = torch.tensor(p, dtype=torch.long)
        mask[i, lp - len(p) : lp] = 1
        if r:
            ids[i, lp : lp + len(r)] = torch.tensor(r, dtype=torch.long)
            mask[i, lp : lp + len(r)] = 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    resp = ids[:, lp:].clone()
    resp_mask = mask[:, lp:].to(torch.float32)
    support = None
    if supports:
        k = max(1, max(sp.widest for sp in supports))
        support = torch.stack([sp.padded(lr, k) for sp in supports])
    packed = Packed(ids, mask, positions, resp, resp_mask, support)
    if device is not None:
        packed = Packed(*(t.to(device) if t is not None else None for t in (ids, mask, positions, resp, resp_mask, support)))
    return packed


def length_sorted_chunks(indices, lengths, chunks: int) -> list[torch.Tensor]:
    """Split ``indices`` into ``chunks`` groups of similar total length (less padding per forward).

    The loss normaliser is computed over the whole batch, so how it is split does not change the
    gradient; sorting only saves the compute spent on padding.
    """
    order = sorted((int(i) for i in indices), key=lambda i: lengths[i])
    return [c for c in torch.tensor(order, dtype=torch.long).tensor_split(chunks) if len(c)]


_KEEP_ARG: dict[type, str | None] = {}


def response_logits(model, packed: Packed) -> torch.Tensor:
    """Logits (B, Lr, V) that predict each response token."""
    cls = type(model)
    if cls not in _KEEP_ARG:  # a DistributedDataParallel wrapper passes the keywords to its module
        inner = getattr(model, "module", model)  # a peft model passes them on to its base model
        params = inspect.signature(getattr(inner, "get_base_model", lambda: inner)().forward).parameters
        _KEEP_ARG[cls] = next((n for n in ("logits_to_keep", "num_logits_to_keep") if n in params), None)
    lr = packed.response_width
    kwargs = {_KEEP_ARG[cls]: lr} if _KEEP_ARG[cls] else {}
    out = model(
        input_ids=packed.input_ids[:, :-1],
        attention_mask=packed.attention_mask[:, :-1],
        position_ids=packed.position_ids[:, :-1],
        use_cache=False,
        **kwargs,
    )
    return out.logits[:, -lr:, :]


def response_logprobs(model, packed: Packed, temperature: float = 1.0, with_entropy: bool = False):
    """log pi(y_t) (B, Lr) at ``temperature``, and the per-token entropy when ``with_entropy``."""
    logits = response_logits(model, packed)
    if packed.support is not None:
        return token_logprobs_on_support(logits, packed.response_ids, packed.support, temperature, with_entropy)
    if with_entropy:
        return token_logprobs_and_entropy(logits, packed.response_ids, temperature)
    return token_logprobs(logits, packed.response_ids, temperature), None
