"""The decode step written out for Llama-family (Llama, Qwen2, Qwen3) and GPT-2 models.

:func:`rlvr_cli.sampling.generate` decodes one token per row per call of a decoder's ``step``; for the
models :func:`static_decode_supported` accepts it uses :class:`StaticDecoder`, which repeats the
``transformers`` modules' operations over a preallocated KV cache, so the samples are the ones the
model's own ``forward`` gives (tests/sampling/test_models_sampling.py compares them). Another rollout backend
replaces ``generate``, not this file.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def output_cache(out):
    """The KV cache a forward returned (`cache` in new transformers, else `past_key_values`)."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)


FUSE_MAX_BYTES = 256 * 2**20
"""The written-out Llama-family step fuses q/k/v and gate/up into one matmul each (fewer calls, which is
what pays on small models) by copying those weights once per `generate` call; above this many bytes of
copies (a 0.5B model's would be 0.9 GB in float32) it calls the projections one by one instead. The
samples are the same either way (tested)."""


class StaticDecoder:
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
        legacy = output_cache(out)
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
    """Whether ``generate`` can use the written-out decode step (:class:`StaticDecoder`) for this model.

    Llama, Qwen2 and Qwen3 (default RoPE, SiLU, every layer full attention; grouped-query attention and
    the projections' biases as configured, Qwen3's q/k norms) and GPT-2 (no cross-attention, no
    per-layer or upcast attention scaling), all with `sdpa` attention, whose operations `StaticDecoder`
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
