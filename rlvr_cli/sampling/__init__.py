"""The rollout sampler: batched autoregressive sampling with a KV cache, for any causal LM.

This package is the seam where another rollout backend (e.g. vLLM) would plug in: :func:`generate`
takes token-id prompts and returns plain token-id lists, finish reasons and log-probs (:class:`Samples`).
How one token is decoded is the decoder's business: the model's own ``forward`` (:class:`_Generic`,
any model) or the step written out for Llama-family and GPT-2 models (:mod:`.decode_step`).

One prefill over the distinct left-padded prompts (a group's G copies of a prompt share it), then
one forward per new token over the rows still generating (finished rows are dropped from the batch
and its cache, so a batch of mostly short answers does not pay for its longest one). It records, for
every sampled token, its log-probability under the distribution it was drawn from: log softmax(z/T)[y]
at the sampling temperature, renormalised over the tokens top-k / top-p keep when they truncate, and
then also that support, per token (:class:`TokenSupport`), so that the trainer computes the same
quantity (:func:`rlvr_cli.algo.logprobs.token_logprobs_on_support`) and the behaviour log-probs can be
reused when the numerics match (float32, no autocast). Without truncation (top_p 1, top_k 0) the
recorded log-prob is the plain log softmax, computed exactly as before truncation was accounted for.

Randomness: with ``row_keys`` (one int64 key per row, :mod:`rlvr_cli.keyed_random`) the t-th draw of a
row is the inverse-CDF sample of its t-th keyed uniform, a function of the row's key alone: a row
samples the same tokens whatever batch it sits in, which rows finished before it, or which process
drew it (the trainer's rollouts and evaluation use keys). Without keys everything random goes
through one ``torch.Generator``: the same generator seed gives the same samples.
"""

from __future__ import annotations

import inspect
from contextlib import nullcontext
from dataclasses import dataclass, field

import torch

from rlvr_cli.errors import UserError
from rlvr_cli.keyed_random import sample_inverse_cdf, uniforms
from rlvr_cli.sampling.decode_step import StaticDecoder, output_cache, static_decode_supported

__all__ = ["DROP_FINISHED_AT", "Samples", "TokenSupport", "cache_kwarg", "filter_logits", "generate",
           "static_decode_supported"]


@dataclass
class TokenSupport:
    """The tokens each draw of one response could take under top-k / top-p: token t's support is
    ``ids[offsets[t]:offsets[t + 1]]`` (``offsets`` the running sum of ``sizes``); size 0 means the draw
    was not truncated (the whole vocabulary). Kept compactly: a batch's supports are what the trainer
    renormalises its log-probs over (rlvr_cli/algo/logprobs.py)."""

    ids: torch.Tensor
    """int32 (sum of sizes,): every token's support ids, token after token."""
    sizes: torch.Tensor
    """int32 (tokens,): the size of each token's support; 0 = not truncated."""

    def padded(self, width: int, k: int) -> torch.Tensor:
        """(width, k) long: row t the ids of token t's support padded with -1 (all -1: not truncated, or past
        the response's end)."""
        out = torch.full((width, k), -1, dtype=torch.long)
        n = len(self.sizes)
        if n and len(self.ids):
            sizes = self.sizes.long()
            rows = torch.repeat_interleave(torch.arange(n), sizes)
            starts = torch.cumsum(sizes, 0) - sizes
            cols = torch.arange(len(self.ids)) - torch.repeat_interleave(starts, sizes)
            out[rows, cols] = self.ids.long()
        return out

    @property
    def widest(self) -> int:
        return int(self.sizes.max()) if len(self.sizes) else 0


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
    supports: list[TokenSupport] = field(default_factory=list)
    """Each response's sampling supports when top-k / top-p truncate and log-probs are requested (else empty)."""


def cache_kwarg(model) -> str:
    """Name of the KV-cache argument of ``model.forward`` (`cache` in new transformers, else `past_key_values`)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # a peft model passes it on
    params = inspect.signature(base.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


DROP_FINISHED_AT = 0.25
"""Drop finished rows from the decoded batch once this fraction of it has finished (one cache re-index
per such batch instead of one per finishing row; the rows kept meanwhile are decoded and ignored)."""


def filter_logits(logits: torch.Tensor, top_p: float = 1.0, top_k: int = 0) -> torch.Tensor:
    """Mask logits outside the top-k and outside the smallest set with cumulative probability >= top_p.

    Ties, against transformers' warpers: top-k keeps every token tied with the k-th logit (as
    ``TopKLogitsWarper``). Top-p walks the tokens by descending logit with a *stable* sort, so among
    tokens of exactly equal logits it keeps the lowest ids; ``TopPLogitsWarper`` sorts ascending (not
    stably) and keeps the end of that order, for a short tie the highest ids. Both keep the same number
    of tokens and the same mass, so the policy is the same up to a relabelling of the tied tokens, but
    the kept ids (and so a sampled token) can differ. Where the mass before a token equals top_p
    exactly, float rounding can make either keep one token more than the other (the two compare
    cumulative sums from opposite ends). Example: 20 equal logits, top_p 0.27 -> ids 0..5 here, six of
    the ids (for a short tie the last ones) in transformers.
    """
    if top_k and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, idx = torch.sort(logits, descending=True, stable=True, dim=-1)
        probs = torch.softmax(sorted_logits, dim=-1)
        # drop a token when the mass before it already reaches top_p (the first token is always kept)
        drop = (probs.cumsum(dim=-1) - probs) >= top_p
        sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
        logits = torch.full_like(logits, float("-inf")).scatter(-1, idx, sorted_logits)
    return logits


def _left_pad(prompt_ids: list[list[int]], pad_token_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    b, width = len(prompt_ids), max(len(p) for p in prompt_ids)
    ids = torch.full((b, width), pad_token_id, dtype=torch.long)
    mask = torch.zeros((b, width), dtype=torch.long)
    for i, p in enumerate(prompt_ids):
        if len(p) == 0:
            raise ValueError("empty prompt")
        ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long)
        mask[i, width - len(p) :] = 1
    return ids.to(device), mask.to(device)


class _Generic:
    """Decode through ``model.forward`` with the library's own (dynamic) KV cache: any causal LM."""

    def __init__(self, model, out, batch: int, total: int, amp):
        self.model, self.kw, self.amp = model, cache_kwarg(model), amp
        self.cache = output_cache(out)

    def select(self, idx: torch.Tensor) -> None:
        self.cache.batch_select_indices(idx)

    def step(self, tok: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        with self.amp:
            out = self.model(input_ids=tok.unsqueeze(-1), attention_mask=mask.long(), position_ids=pos.unsqueeze(-1),
                             use_cache=True, **{self.kw: self.cache})
        self.cache = output_cache(out)
        return out.logits[:, -1, :].float()


@dataclass(frozen=True)
class SamplingOptions:
    """How :func:`generate` samples: everything but the model, the prompts and the source of randomness."""

    max_new_tokens: int
    eos_token_id: int | list[int]
    pad_token_id: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    greedy: bool = False
    """Take the argmax instead of sampling."""
    suppress_ids: list[int] | None = None
    """Forbidden until ``suppress_until`` tokens have been generated (budget forcing's minimum thinking)."""
    suppress_until: int = 0
    ignore_eos: bool = False
    """Keep sampling after an EOS (an ordinary response token): every response has ``max_new_tokens``
    tokens (finish reason `length`), fixed work per batch for benchmarks."""
    return_logprobs: bool = True
    autocast_dtype: torch.dtype | None = None
    decoder: str = "auto"
    """`static` (the written-out decode step over a preallocated cache, `static_decode_supported` models
    only), `generic` (``model.forward`` with its own cache) or `auto` (static where supported)."""


@dataclass
class Prefilled:
    """The state decoding starts from (:func:`prefill`)."""

    decoder: "StaticDecoder | _Generic"
    logits: torch.Tensor
    """(B, V) float32: the next-token logits after each row's prompt."""
    full_mask: torch.Tensor
    """(B, width + max_new_tokens) bool: the attention mask of every slot the cache will hold."""
    next_pos: torch.Tensor
    """(B,) the position of each row's first new token."""
    width: int
    """The longest prompt: new token t fills cache slot ``width + t``."""


def prefill(model, prompt_ids: list[list[int]], options: "SamplingOptions", static: bool) -> Prefilled:
    """Run the prompts through ``model`` once and set up the KV cache for ``options.max_new_tokens`` more
    tokens (the static decoder when ``static``), for :func:`generate` and the multi-turn sampler alike.

    A group repeats its prompt G times: each distinct prompt is prefilled once and its cache copied to its
    rows. A prompt that leaves no room for ``max_new_tokens`` in the model's positions is a ``UserError``."""
    device = next(model.parameters()).device
    b = len(prompt_ids)
    width = max(len(p) for p in prompt_ids)
    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if isinstance(limit, int) and width + options.max_new_tokens > limit:
        raise UserError(
            f"max_new_tokens: a prompt of {width} tokens plus {options.max_new_tokens} new tokens exceeds the "
            f"model's {limit} positions"
        )
    distinct: dict[tuple, int] = {}
    rows_of = torch.tensor([distinct.setdefault(tuple(p), len(distinct)) for p in prompt_ids], device=device)
    ids, mask = _left_pad([list(p) for p in distinct], options.pad_token_id, device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    dtype = options.autocast_dtype
    amp = torch.autocast(device.type, dtype=dtype) if dtype is not None else nullcontext()
    with amp:
        out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1)
    logits = out.logits[:, -1, :].float()
    total = width + options.max_new_tokens
    dec = (StaticDecoder if static else _Generic)(model, out, b, total, amp)
    del out
    if len(distinct) < b:
        dec.select(rows_of)
        logits, mask, positions = logits[rows_of], mask[rows_of], positions[rows_of]
    full_mask = torch.ones((b, total), dtype=torch.bool, device=device)
    full_mask[:, :width] = mask.bool()
    return Prefilled(dec, logits, full_mask, positions[:, -1] + 1, width)


@torch.inference_mode()  # no autograd bookkeeping at all: every output is a Python list
def generate(
    model,
    prompt_ids: list[list[int]],
    options: SamplingOptions,
    *,
    generator: torch.Generator | None = None,
    row_keys: torch.Tensor | None = None,
) -> Samples:
    """Sample one response per prompt (repeat a prompt G times for a group).

    ``options``: the sampling settings (:class:`SamplingOptions`, each field documented there).

    Finished rows are dropped from the batch only when at least a quarter of it has finished (one
    cache re-index per quarter instead of one per finishing row); the rows kept meanwhile are decoded
    and ignored. Tokens are drawn only for the unfinished rows, in batch order, so the random stream is
    the one a batch of exactly those rows would use.

    ``row_keys`` (int64, one per prompt) replaces ``generator``: row i's t-th token is drawn with
    ``uniforms(row_keys[i], t)`` by the inverse CDF.
    """
    device = next(model.parameters()).device
    b = len(prompt_ids)
    if b == 0:
        return Samples([], [], [], [], 0)
    if options.decoder not in ("auto", "static", "generic"):
        raise ValueError(f"decoder must be auto, static or generic, not {options.decoder!r}")
    static_ok = static_decode_supported(model)
    if options.decoder == "static" and not static_ok:
        raise ValueError(f"the static decoder does not support {type(model).__name__}")
    eos = {options.eos_token_id} if isinstance(options.eos_token_id, int) else set(options.eos_token_id)
    eos_t = torch.tensor(sorted(eos), device=device)
    keys = None
    if row_keys is not None:
        if len(row_keys) != b:
            raise ValueError(f"row_keys: {len(row_keys)} keys for {b} prompts")
        keys = torch.as_tensor(row_keys, dtype=torch.long).to(device)
        # every draw of this call at once, [original row, t]: the same values as uniforms(keys, t) step by step
        table = uniforms(keys[:, None], torch.arange(options.max_new_tokens, device=device))
    pre = prefill(model, prompt_ids, options, static_ok and options.decoder != "generic")
    dec, logits, full_mask, next_pos, width = pre.decoder, pre.logits, pre.full_mask, pre.next_pos, pre.width

    tokens = torch.zeros((options.max_new_tokens, b), dtype=torch.long, device=device)  # [t, original row]
    logps = torch.zeros((options.max_new_tokens, b), dtype=torch.float32, device=device)
    lengths = torch.full((b,), options.max_new_tokens, dtype=torch.long, device=device)
    ended = torch.zeros(b, dtype=torch.bool, device=device)  # finished at EOS
    rows = torch.arange(b, device=device)  # original row of each row in the decoded batch
    live = torch.ones(b, dtype=torch.bool, device=device)  # rows of the decoded batch still generating
    n_live = b
    truncating = options.return_logprobs and not options.greedy and (options.top_k or options.top_p < 1.0)
    support_steps = []  # per step: (original rows, support sizes, flat ids) of the rows it drew for
    suppress = torch.tensor(options.suppress_ids, device=device, dtype=torch.long) if options.suppress_ids else None
    gen_tokens = 0
    for t in range(options.max_new_tokens):
        if n_live < live.numel():
            sel = torch.nonzero(live).flatten()
            z, own = logits[sel], rows[sel]
        else:
            sel, z, own = None, logits, rows
        if options.temperature != 1.0:  # z / 1 is z: skip the operation, not the rounding
            z = z / options.temperature
        if suppress is not None and t < options.suppress_until:
            z[:, suppress] = float("-inf")
        if options.greedy:
            tok = z.argmax(dim=-1)
        else:
            z = filter_logits(z, options.top_p, options.top_k)  # z itself when nothing truncates
            probs = torch.softmax(z, dim=-1)
            if keys is not None:  # each row's own counter-based stream: independent of the batch it is in
                tok = sample_inverse_cdf(probs, table[own, t])
            else:
                tok = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
            if truncating:
                support_steps.append(_supports_of(z, own))
        tokens[t].index_copy_(0, own, tok)
        if options.return_logprobs:  # under the distribution the token was drawn from (truncated, renormalised)
            logps[t].index_copy_(0, own, torch.log_softmax(z, dim=-1).gather(-1, tok.unsqueeze(-1)).squeeze(-1))
        gen_tokens += tok.numel()
        last = t == options.max_new_tokens - 1
        if not options.ignore_eos:
            done = torch.isin(tok, eos_t)
            n_done = int(done.sum())
            if n_done:
                lengths[own[done]] = t + 1
                ended[own[done]] = True
                n_live -= n_done
                if n_live == 0 or last:
                    break
                if sel is None:
                    live = ~done
                else:
                    live[sel[done]] = False
                if n_live <= (1 - DROP_FINISHED_AT) * live.numel():  # drop the finished rows from the batch
                    idx = torch.nonzero(live).flatten()
                    dec.select(idx)
                    rows, next_pos, full_mask = rows[idx], next_pos[idx], full_mask[idx]
                    live = live[idx]
        if last:
            break
        # the token fed to each decoded row (finished rows get their last token; their output is ignored)
        fed = tok if tok.numel() == rows.numel() else tokens[t].index_select(0, rows)
        logits = dec.step(fed, next_pos, full_mask[:, : width + t + 1])
        next_pos = next_pos + 1
    lens = lengths.tolist()
    tok_rows = tokens.t().tolist()
    lp_rows = logps.t().tolist() if options.return_logprobs else []
    return Samples(
        prompt_ids=[list(p) for p in prompt_ids],
        response_ids=[r[:n] for r, n in zip(tok_rows, lens)],
        finish_reasons=["eos" if e else "length" for e in ended.tolist()],
        logprobs=[r[:n] for r, n in zip(lp_rows, lens)] if options.return_logprobs else [],
        gen_tokens=gen_tokens,
        supports=_row_supports(support_steps, lens) if truncating else [],
    )


def _supports_of(z: torch.Tensor, own: torch.Tensor) -> tuple[list[int], torch.Tensor, torch.Tensor]:
    """One decode step's supports: the kept (finite) logits of each drawn row of ``z`` (n, V), as the rows'
    original indices, their support sizes (0 where nothing was cut) and the flat kept ids."""
    kept = torch.isfinite(z)
    sizes = kept.sum(dim=-1)
    whole = sizes == z.shape[-1]
    kept[whole] = False  # untruncated draws store no ids
    sizes = sizes.masked_fill(whole, 0)
    return own.tolist(), sizes.to(torch.int32).cpu(), kept.nonzero()[:, 1].to(torch.int32).cpu()


def _row_supports(steps, lengths: list[int]) -> list[TokenSupport]:
    """Each response's :class:`TokenSupport` from the decode steps' records, cut to its length."""
    ids: list[list[torch.Tensor]] = [[] for _ in lengths]
    sizes: list[list[int]] = [[] for _ in lengths]
    for own, step_sizes, flat in steps:
        for row, chunk, n in zip(own, flat.split(step_sizes.tolist()), step_sizes.tolist()):
            if len(sizes[row]) < lengths[row]:  # a row kept in the batch after it finished draws ignored tokens
                ids[row].append(chunk)
                sizes[row].append(n)
    return [TokenSupport(torch.cat(i) if i else torch.zeros(0, dtype=torch.int32), torch.tensor(n, dtype=torch.int32))
            for i, n in zip(ids, sizes)]
