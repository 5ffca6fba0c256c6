"""The rollout sampler: batched autoregressive sampling with a KV cache, for any causal LM.

One prefill over the distinct left-padded prompts (a group's G copies of a prompt share it), then
one forward per new token over the rows still generating (finished rows are dropped from the batch
and its cache, so a batch of mostly short answers does not pay for its longest one). It records, for every sampled token, its log-probability
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
import torch.nn.functional as F

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


FUSE_MAX_BYTES = 256 * 2**20
"""The written-out Llama-family step fuses q/k/v and gate/up into one matmul each (fewer calls, which is
what pays on small models) by copying those weights once per `generate` call; above this many bytes of
copies (a 0.5B model's would be 0.9 GB in float32) it calls the projections one by one instead. The
samples are the same either way (tested)."""

DROP_FINISHED_AT = 0.25
"""Drop finished rows from the decoded batch once this fraction of it has finished (one cache re-index
per such batch instead of one per finishing row; the rows kept meanwhile are decoded and ignored)."""


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
        self.cache = _output_cache(out)

    def select(self, idx: torch.Tensor) -> None:
        self.cache.batch_select_indices(idx)

    def step(self, tok: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        with self.amp:
            out = self.model(input_ids=tok.unsqueeze(-1), attention_mask=mask.long(), position_ids=pos.unsqueeze(-1),
                             use_cache=True, **{self.kw: self.cache})
        self.cache = _output_cache(out)
        return out.logits[:, -1, :].float()


class _Static:
    """A decode step written out for Llama-family (Llama, Qwen2, Qwen3) and GPT-2 models, over a preallocated
    KV cache.

    The same operations as the ``transformers`` modules (same order, same kernels: `F.linear` / `addmm`,
    `scaled_dot_product_attention` over exactly the keys written so far) without their per-call Python
    work: no cache objects, no mask builders, no `torch.cat` of the cache per token. The cache is one
    buffer per layer of shape [2, B, key/value heads, prompt + max_new, head_dim], filled from the prefill; a new
    token's keys and values are written in place.
    """

    def __init__(self, model, out, batch: int, total: int, amp):
        self.model, self.cfg, self.amp = model, model.config, amp
        legacy = _output_cache(out)
        self.kv = []
        for layer in range(self.cfg.num_hidden_layers if hasattr(self.cfg, "num_hidden_layers") else self.cfg.n_layer):
            k, v = _cache_layer(legacy, layer)
            buf = k.new_empty((2, k.shape[0], k.shape[1], total, k.shape[3]))
            buf[0, :, :, : k.shape[2]] = k
            buf[1, :, :, : v.shape[2]] = v
            self.kv.append(buf)
        self.slot = k.shape[2]  # where the next token's keys go
        if self.cfg.model_type in LLAMA_LIKE:
            rot = model.model.rotary_emb
            pos = torch.arange(total + 1, device=k.device)[None]
            emb = model.model.embed_tokens.weight  # RoPE's dtype is the embeddings' (autocast casts neither)
            self.cos, self.sin = (t[0] for t in rot(emb, pos))  # the same formula, tabulated once
            attn = model.model.layers[0].self_attn
            self.heads = (self.cfg.num_attention_heads, self.cfg.num_key_value_heads, attn.head_dim)
            self.qk_norm = hasattr(attn, "q_norm")  # Qwen3: RMSNorm over each head's q and k before RoPE
            self.use_gqa_kernel = _gqa_rule() if self.heads[1] < self.heads[0] else None
            layers = model.model.layers
            copied = [attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight, layers[0].mlp.gate_proj.weight,
                      layers[0].mlp.up_proj.weight]
            self.fuse = sum(w.numel() * w.element_size() for w in copied) * len(layers) <= FUSE_MAX_BYTES
            if self.fuse:  # q/k/v and gate/up as one matmul each (each output column the same dot product)
                self.qkv = [torch.cat([x.self_attn.q_proj.weight, x.self_attn.k_proj.weight,
                                       x.self_attn.v_proj.weight]) for x in layers]
                self.qkv_bias = [None if x.self_attn.q_proj.bias is None else
                                 torch.cat([x.self_attn.q_proj.bias, x.self_attn.k_proj.bias,
                                            x.self_attn.v_proj.bias]) for x in layers]
                self.gate_up = [torch.cat([x.mlp.gate_proj.weight, x.mlp.up_proj.weight]) for x in layers]
                self.gate_up_bias = [None if x.mlp.gate_proj.bias is None else
                                     torch.cat([x.mlp.gate_proj.bias, x.mlp.up_proj.bias]) for x in layers]

    def select(self, idx: torch.Tensor) -> None:
        kv = []
        for buf in self.kv:  # only the slots written so far are copied (the rest is never read before written)
            new = buf.new_empty((2, len(idx), *buf.shape[2:]))
            torch.index_select(buf[:, :, :, : self.slot], 1, idx, out=new[:, :, :, : self.slot])
            kv.append(new)
        self.kv = kv
        self.unmasked = None

    unmasked: bool | None = None
    """Whether no key of the decoded rows is masked: only the prompts' padding is, so this holds from one
    `select` to the next (every generated slot is attended)."""

    def step(self, tok: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        s = self.slot
        self.slot += 1
        keep = mask[:, None, None, : s + 1]
        if self.unmasked is None:
            self.unmasked = bool(keep.all())
        if self.unmasked:
            keep = None  # what transformers passes when no key is masked
        with self.amp:
            if self.cfg.model_type in LLAMA_LIKE:
                return self._llama(tok, pos, s, keep)
            return self._gpt2(tok, pos, s, keep)

    def _attend(self, q, k, v, layer: int, s: int, keep, scale: float) -> torch.Tensor:
        """Attention of one new token ([b, heads, 1, hd] q; [b, kv heads, 1, hd] k, v) over the cache.

        Grouped-query attention (fewer key/value heads) as `transformers`' `sdpa` attention runs it at one
        query token, deciding with its own rule (`use_gqa_in_sdpa`: no key masked, on the CPU and CUDA):
        SDPA's `enable_gqa`, else the query heads of each key/value head packed as its queries
        (`pack_gqa`). The two round differently (by up to ~5e-7 in a log-prob), so the choice must be
        transformers'.
        """
        buf = self.kv[layer]
        buf[0, :, :, s : s + 1] = k
        buf[1, :, :, s : s + 1] = v
        keys, values = buf[0, :, :, : s + 1], buf[1, :, :, : s + 1]
        b, nh, _, hd = q.shape
        nkv = keys.shape[1]
        if nkv == nh:
            o = F.scaled_dot_product_attention(q, keys, values, attn_mask=keep, scale=scale)
        elif self.use_gqa_kernel(keep, keys, values):
            o = F.scaled_dot_product_attention(q, keys, values, scale=scale, enable_gqa=True)
        else:
            o = F.scaled_dot_product_attention(q.reshape(b, nkv, nh // nkv, hd), keys, values, attn_mask=keep,
                                               scale=scale)
        return o.reshape(b, nh, 1, hd).transpose(1, 2).reshape(b, 1, -1)

    def _llama(self, tok, pos, s, keep):
        """Llama, Qwen2 (q/k/v biases) and Qwen3 (q/k norms): one decoder step of `transformers`' modules."""
        m = self.model.model
        nh, nkv, hd = self.heads
        b = tok.shape[0]
        cos, sin = self.cos[pos][:, None, None, :], self.sin[pos][:, None, None, :]  # over [b, 1, heads, hd]
        x = m.embed_tokens(tok[:, None])
        for i, layer in enumerate(m.layers):
            a = layer.self_attn
            h = layer.input_layernorm(x)
            if self.fuse:
                qkv = F.linear(h, self.qkv[i], self.qkv_bias[i]).view(b, 1, nh + 2 * nkv, hd)  # q, k, v heads
                q, k, v = qkv[:, :, :nh], qkv[:, :, nh : nh + nkv], qkv[:, :, nh + nkv :]
            else:
                q, k, v = (p(h).view(b, 1, -1, hd) for p in (a.q_proj, a.k_proj, a.v_proj))
            if self.qk_norm:
                q, k = a.q_norm(q), a.k_norm(k)
            if self.fuse and not self.qk_norm:  # q and k rotated together (the same elementwise operations)
                qk = qkv[:, :, : nh + nkv]
                qk = qk * cos + _rotate_half(qk) * sin
                q, k = qk[:, :, :nh], qk[:, :, nh:]
            else:
                q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
            o = self._attend(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), i, s, keep, a.scaling)
            x = x + F.linear(o, a.o_proj.weight, a.o_proj.bias)
            h = layer.post_attention_layernorm(x)
            if self.fuse:
                gate, up = F.linear(h, self.gate_up[i], self.gate_up_bias[i]).chunk(2, dim=-1)
            else:
                gate, up = layer.mlp.gate_proj(h), layer.mlp.up_proj(h)
            x = x + F.linear(F.silu(gate) * up, layer.mlp.down_proj.weight, layer.mlp.down_proj.bias)
        return self.model.lm_head(m.norm(x))[:, -1, :].float()

    def _gpt2(self, tok, pos, s, keep):
        m, c = self.model.transformer, self.cfg
        nh = c.n_head
        hd = c.n_embd // nh
        b = tok.shape[0]
        x = m.wte(tok[:, None]) + m.wpe(pos[:, None])
        for i, block in enumerate(m.h):
            a = block.attn
            h = block.ln_1(x)
            qkv = torch.addmm(a.c_attn.bias, h.view(b, -1), a.c_attn.weight).view(b, 1, -1)
            q, k, v = (t.view(b, 1, nh, hd).transpose(1, 2) for t in qkv.split(a.split_size, dim=2))
            o = self._attend(q, k, v, i, s, keep, a.scaling)
            x = torch.addmm(a.c_proj.bias, o.view(b, -1), a.c_proj.weight).view(b, 1, -1) + x
            h = block.ln_2(x)
            mlp = block.mlp
            h = mlp.act(torch.addmm(mlp.c_fc.bias, h.view(b, -1), mlp.c_fc.weight))
            x = x + torch.addmm(mlp.c_proj.bias, h, mlp.c_proj.weight).view(b, 1, -1)
        return self.model.lm_head(m.ln_f(x))[:, -1, :].float()


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _cache_layer(cache, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    if hasattr(cache, "layers"):
        return cache.layers[layer].keys, cache.layers[layer].values
    return cache[layer]


def _gqa_rule():
    """`transformers`' rule for grouped-query attention in `sdpa` (None where this transformers has no
    `pack_gqa`: it repeats the keys instead, which the written-out step does not repeat)."""
    try:
        from transformers.integrations.sdpa_attention import pack_gqa, use_gqa_in_sdpa  # noqa: F401
    except ImportError:
        return None
    return use_gqa_in_sdpa


LLAMA_LIKE = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}
"""The Llama-family models the written-out decode step covers (model_type -> class): RMSNorm, RoPE, SwiGLU."""


def static_decode_supported(model) -> bool:
    """Whether ``generate`` can use the written-out decode step (`_Static`) for this model.

    Llama, Qwen2 and Qwen3 (default RoPE, SiLU, every layer full attention; grouped-query attention and
    the projections' biases as configured, Qwen3's q/k norms) and GPT-2 (no cross-attention, no
    per-layer or upcast attention scaling), all with `sdpa` attention, whose operations `_Static`
    repeats exactly; every other model decodes through its own ``forward``.
    """
    cfg = getattr(model, "config", None)
    kind = getattr(cfg, "model_type", None)
    if getattr(cfg, "_attn_implementation", None) != "sdpa" or model.training:
        return False
    if kind in LLAMA_LIKE:
        rope = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
        layer_types = getattr(cfg, "layer_types", None) or ["full_attention"]
        return (type(model).__name__ == LLAMA_LIKE[kind]
                and rope.get("rope_type", rope.get("type", "default")) == "default"
                and (cfg.num_key_value_heads == cfg.num_attention_heads or _gqa_rule() is not None)
                and cfg.hidden_act == "silu" and getattr(cfg, "pretraining_tp", 1) == 1
                and not getattr(cfg, "use_sliding_window", False)
                and all(t == "full_attention" for t in layer_types))
    if kind == "gpt2":
        return (type(model).__name__ == "GPT2LMHeadModel" and not cfg.add_cross_attention
                and cfg.scale_attn_weights and not cfg.scale_attn_by_inverse_layer_idx
                and not cfg.reorder_and_upcast_attn)
    return False


@torch.inference_mode()  # no autograd bookkeeping at all (every output is a Python list): ~7% faster than no_grad
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
    ignore_eos: bool = False,
    decoder: str = "auto",
) -> Samples:
    """Sample one response per prompt (repeat a prompt G times for a group).

    ``suppress_ids`` are forbidden until ``suppress_until`` tokens have been generated (used by budget
    forcing's minimum thinking length). ``greedy`` takes the argmax instead of sampling.
    ``ignore_eos`` keeps sampling after an EOS (it stays an ordinary response token), so every
    response has exactly ``max_new_tokens`` tokens (finish reason `length`): fixed work per batch, for
    benchmarks. ``decoder``: `static` (the written-out decode step over a preallocated cache,
    `static_decode_supported` models only), `generic` (``model.forward`` with its own
    cache) or `auto` (static where supported).

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
    if decoder not in ("auto", "static", "generic"):
        raise ValueError(f"decoder must be auto, static or generic, not {decoder!r}")
    static_ok = static_decode_supported(model)
    if decoder == "static" and not static_ok:
        raise ValueError(f"the static decoder does not support {type(model).__name__}")
    eos = {eos_token_id} if isinstance(eos_token_id, int) else set(eos_token_id)
    eos_t = torch.tensor(sorted(eos), device=device)
    width = max(len(p) for p in prompt_ids)
    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if isinstance(limit, int) and width + max_new_tokens > limit:
        raise UserError(
            f"max_new_tokens: a prompt of {width} tokens plus {max_new_tokens} new tokens exceeds the model's "
            f"{limit} positions"
        )
    # a group repeats its prompt G times: prefill each distinct prompt once and copy its cache to its rows
    distinct: dict[tuple, int] = {}
    rows_of = torch.tensor([distinct.setdefault(tuple(p), len(distinct)) for p in prompt_ids], device=device)
    ids, mask = _left_pad([list(p) for p in distinct], pad_token_id, device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    amp = torch.autocast(device.type, dtype=autocast_dtype) if autocast_dtype is not None else nullcontext()
    keys = None
    if row_keys is not None:
        if len(row_keys) != b:
            raise ValueError(f"row_keys: {len(row_keys)} keys for {b} prompts")
        keys = torch.as_tensor(row_keys, dtype=torch.long).to(device)
        # every draw of this call at once, [original row, t]: the same values as uniforms(keys, t) step by step
        table = uniforms(keys[:, None], torch.arange(max_new_tokens, device=device))
    with amp:
        out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1)
    logits = out.logits[:, -1, :].float()
    total = width + max_new_tokens
    dec = (_Static if static_ok and decoder != "generic" else _Generic)(model, out, b, total, amp)
    del out
    if len(distinct) < b:
        dec.select(rows_of)
        logits, mask, positions = logits[rows_of], mask[rows_of], positions[rows_of]
    # the attention mask of every slot the cache will hold: the prompt's, then ones
    full_mask = torch.ones((b, total), dtype=torch.bool, device=device)
    full_mask[:, :width] = mask.bool()
    next_pos = positions[:, -1] + 1

    tokens = torch.zeros((max_new_tokens, b), dtype=torch.long, device=device)  # [t, original row]
    logps = torch.zeros((max_new_tokens, b), dtype=torch.float32, device=device)
    lengths = torch.full((b,), max_new_tokens, dtype=torch.long, device=device)
    ended = torch.zeros(b, dtype=torch.bool, device=device)  # finished at EOS
    rows = torch.arange(b, device=device)  # original row of each row in the decoded batch
    live = torch.ones(b, dtype=torch.bool, device=device)  # rows of the decoded batch still generating
    n_live = b
    suppress = torch.tensor(suppress_ids, device=device, dtype=torch.long) if suppress_ids else None
    gen_tokens = 0
    for t in range(max_new_tokens):
        if n_live < live.numel():
            sel = torch.nonzero(live).flatten()
            z, own = logits[sel], rows[sel]
        else:
            sel, z, own = None, logits, rows
        if temperature != 1.0:  # z / 1 is z: skip the operation, not the rounding
            z = z / temperature
        if suppress is not None and t < suppress_until:
            z[:, suppress] = float("-inf")
        if greedy:
            tok = z.argmax(dim=-1)
        else:
            probs = torch.softmax(filter_logits(z, top_p, top_k), dim=-1)
            if keys is not None:  # each row's own counter-based stream: independent of the batch it is in
                tok = sample_inverse_cdf(probs, table[own, t])
            else:
                tok = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
        tokens[t].index_copy_(0, own, tok)
        if return_logprobs:
            logps[t].index_copy_(0, own, torch.log_softmax(z, dim=-1).gather(-1, tok.unsqueeze(-1)).squeeze(-1))
        gen_tokens += tok.numel()
        last = t == max_new_tokens - 1
        if not ignore_eos:
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
    lp_rows = logps.t().tolist() if return_logprobs else []
    return Samples(
        prompt_ids=[list(p) for p in prompt_ids],
        response_ids=[r[:n] for r, n in zip(tok_rows, lens)],
        finish_reasons=["eos" if e else "length" for e in ended.tolist()],
        logprobs=[r[:n] for r, n in zip(lp_rows, lens)] if return_logprobs else [],
        gen_tokens=gen_tokens,
    )
