"""The rollout sampler: batched autoregressive sampling with a KV cache, for any causal LM.

One prefill over the left-padded prompts, then one forward per new token over only the rows still
generating (finished rows are dropped from the batch and its cache, so a batch of mostly short
answers does not pay for its longest one). It records, for every sampled token, its log-probability
under the *untruncated* policy at the sampling temperature, log softmax(z/T)[y] -- the same quantity the
trainer computes -- so the behaviour log-probs can be reused when the numerics match (float32, no
autocast). Top-p / top-k change which token is drawn, not that recorded log-probability.

Randomness: with ``row_keys`` (one int64 key per row, :mod:`rlvr_cli.keyed_random`) the t-th draw of a
row is the inverse-CDF sample of its t-th keyed uniform, a function of the row's key alone: a row
samples the same tokens whatever batch it sits in, which rows finished before it, or which process
drew it (the trainer's rollouts and evaluation use keys). Without keys everything random goes
through one ``torch.Generator``: the same generator seed gives the same samples. This module is the seam where another rollout backend (e.g. vLLM) would plug in: it returns
plain token-id lists, finish reasons and log-probs.
"""

from __future__ import annotations

import inspect
from contextlib import nullcontext
from dataclasses import dataclass, field

import torch

from rlvr_cli.errors import UserError
from rlvr_cli.keyed_random import sample_inverse_cdf, uniforms


@dataclass
class Samples:
    prompt_ids: list[list[int]]
    response_ids: list[list[int]]
    """Generated ids, ending with EOS when the response finished (EOS counts toward |o|)."""
    finish_reasons: list[str]
    """`eos` or `length` (hit max_new_tokens without EOS: truncated)."""
    logprobs: list[list[float]] = field(default_factory=list)
    """log pi(y_t) at the sampling temperature, one per response token (empty when not requested)."""
    gen_tokens: int = 0
    """Tokens generated in all (the throughput numerator)."""


def cache_kwarg(model) -> str:
    """Name of the KV-cache argument of ``model.forward`` (`cache` in new transformers, else `past_key_values`)."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _output_cache(out):
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)


def filter_logits(logits: torch.Tensor, top_p: float = 1.0, top_k: int = 0) -> torch.Tensor:
    """Mask logits outside the top-k and outside the smallest set with cumulative probability >= top_p."""
    if top_k and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, idx = torch.sort(logits, descending=True, dim=-1)
        probs = torch.softmax(sorted_logits, dim=-1)
        # drop a token when the mass before it already reaches top_p (the first token is always kept)
        drop = (probs.cumsum(dim=-1) - probs) >= top_p
        sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
        logits = torch.full_like(logits, float("-inf")).scatter(-1, idx, sorted_logits)
    return logits


@torch.no_grad()
def generate(
    model,
    prompt_ids: list[list[int]],
    *,
    max_new_tokens: int,
    eos_token_id: int | list[int],
    pad_token_id: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int = 0,
    generator: torch.Generator | None = None,
    row_keys: torch.Tensor | None = None,
    return_logprobs: bool = True,
    autocast_dtype: torch.dtype | None = None,
    suppress_ids: list[int] | None = None,
    suppress_until: int = 0,
    greedy: bool = False,
) -> Samples:
    """Sample one response per prompt (repeat a prompt G times for a group).

    ``suppress_ids`` are forbidden until ``suppress_until`` tokens have been generated (used by budget
    forcing's minimum thinking length). ``greedy`` takes the argmax instead of sampling.
    ``row_keys`` (int64, one per prompt) replaces ``generator``: row i's t-th token is drawn with
    ``uniforms(row_keys[i], t)`` by the inverse CDF.
    """
    device = next(model.parameters()).device
    b = len(prompt_ids)
    if b == 0:
        return Samples([], [], [], [], 0)
    eos = {eos_token_id} if isinstance(eos_token_id, int) else set(eos_token_id)
    eos_t = torch.tensor(sorted(eos), device=device)
    width = max(len(p) for p in prompt_ids)
    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if isinstance(limit, int) and width + max_new_tokens > limit:
        raise UserError(
            f"max_new_tokens: a prompt of {width} tokens plus {max_new_tokens} new tokens exceeds the model's "
            f"{limit} positions"
        )
    ids = torch.full((b, width), pad_token_id, dtype=torch.long)
    mask = torch.zeros((b, width), dtype=torch.long)
    for i, p in enumerate(prompt_ids):
        if len(p) == 0:
            raise ValueError("empty prompt")
        ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long)
        mask[i, width - len(p) :] = 1
    ids, mask = ids.to(device), mask.to(device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    kw = cache_kwarg(model)
    amp = torch.autocast(device.type, dtype=autocast_dtype) if autocast_dtype is not None else nullcontext()

    responses: list[list[int]] = [[] for _ in range(b)]
    logps: list[list[float]] = [[] for _ in range(b)]
    reasons = ["length"] * b
    active = torch.arange(b, device=device)  # original row of each row still in the batch
    if row_keys is not None:
        if len(row_keys) != b:
            raise ValueError(f"row_keys: {len(row_keys)} keys for {b} prompts")
        keys = torch.as_tensor(row_keys, dtype=torch.long).to(device)
    with amp:
        out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1)
    cache = _output_cache(out)
    logits = out.logits[:, -1, :].float()
    next_pos = positions[:, -1] + 1
    suppress = torch.tensor(suppress_ids, device=device, dtype=torch.long) if suppress_ids else None
    gen_tokens = 0
    for t in range(max_new_tokens):
        z = logits / temperature
        if suppress is not None and t < suppress_until:
            z[:, suppress] = float("-inf")
        logq = torch.log_softmax(z, dim=-1)
        if greedy:
            tok = z.argmax(dim=-1)
        else:
            probs = torch.softmax(filter_logits(z, top_p, top_k), dim=-1)
            if row_keys is not None:
                tok = sample_inverse_cdf(probs, uniforms(keys, t))
            else:
                tok = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
        lp = logq.gather(-1, tok.unsqueeze(-1)).squeeze(-1) if return_logprobs else None
        gen_tokens += tok.numel()
        tok_list = tok.tolist()
        rows = active.tolist()
        lp_list = lp.tolist() if lp is not None else None
        for j, row in enumerate(rows):
            responses[row].append(tok_list[j])
            if lp_list is not None:
                logps[row].append(lp_list[j])
        done = torch.isin(tok, eos_t)
        for j in torch.nonzero(done).flatten().tolist():
            reasons[rows[j]] = "eos"
        if t == max_new_tokens - 1:
            break
        keep = ~done
        if not bool(keep.any()):
            break
        if not bool(keep.all()):
            idx = torch.nonzero(keep).flatten()
            cache.batch_select_indices(idx)
            active, tok, mask, next_pos = active[idx], tok[idx], mask[idx], next_pos[idx]
            if row_keys is not None:
                keys = keys[idx]
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
        with amp:
            out = model(
                input_ids=tok.unsqueeze(-1),
                attention_mask=mask,
                position_ids=next_pos.unsqueeze(-1),
                use_cache=True,
                **{kw: cache},
            )
        cache = _output_cache(out)
        logits = out.logits[:, -1, :].float()
        next_pos = next_pos + 1
    return Samples(
        prompt_ids=[list(p) for p in prompt_ids],
        response_ids=responses,
        finish_reasons=reasons,
        logprobs=logps if return_logprobs else [],
        gen_tokens=gen_tokens,
    )
