"""The built-in tiny model: a real ``transformers`` Llama built from a config (about 0.34M parameters).

d_model 96, 3 layers, 4 heads, SwiGLU width 256, tied embeddings, RoPE, a character vocabulary of
~65. Small enough that a warm start and an RL run take minutes on one CPU core; an ordinary
``LlamaForCausalLM`` so the same code paths serve a hub model.
"""

from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM

TINY_ARCH = dict(
    hidden_size=96,
    intermediate_size=256,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=4,
    max_position_embeddings=512,
    tie_word_embeddings=True,
    rms_norm_eps=1e-5,
)


def tiny_config(tokenizer) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **TINY_ARCH,
    )


def build_tiny_model(tokenizer, seed: int = 0) -> LlamaForCausalLM:
    """A freshly initialised tiny Llama (deterministic for a seed)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(tiny_config(tokenizer))
    return model
