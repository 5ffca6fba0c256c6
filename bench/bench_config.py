"""The "bench config" of the TRL comparison, in code: tokenizer, model, prompts, reward, FLOP count.

A 1,055,616-parameter Llama built from a config (vocabulary 23, hidden 128, 4 layers, 4 heads of 32,
SwiGLU 512, RoPE theta 1e4, untied head), randomly initialised by ``transformers`` after
``torch.manual_seed(seed)``; a character tokenizer (ids: pad 0, bos 1, eos 2, unk 3, then the
digits, ``+-*=``, space, newline, ``QA:``) that prepends ``<bos>`` and pads on the left; prompts
``Q: {a}{op}{b}=`` with a, b, op drawn from ``random.Random(seed)`` in that order; reward 1 when the
last integer of the completion equals the answer. The same definition as the TRL baseline this
benchmark was first run against, so ``export`` writes exactly its seed-0 weights (the benchmark
checks this against a model built in memory before timing anything).

    python bench/bench_config.py export DIR     # the model and tokenizer, loadable as `model.name: DIR`

A second shape, ``0.5b``, is for the GPU comparison (``bench/bench_vs_trl.py --device cuda``): the
dimensions of a 0.5B-class model (Qwen2.5-0.5B's: hidden 896, 24 layers, 14 query and 2 key/value
heads of 64, SwiGLU 4864, tied embeddings, a 151,936-row vocabulary; 494M parameters) in a Llama
built from a config. Its tokenizer is the same character tokenizer with the vocabulary padded by
filler tokens ``<f23>``, ``<f24>``, ... that no prompt contains but the model can sample, so the
embedding, the head and the log-softmax over the vocabulary cost what a real model's do.

:data:`GRPO_RECIPE` is rlvr's side of the comparison: the recipe that sets every field TRL's
``GRPOTrainer`` sets differently by default (``bench/bench_vs_trl.py`` writes it with
:func:`write_recipe` and passes model.name, task.path and task.eval_path).
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

SHAPES = {
    "bench": dict(vocab_size=23, hidden_size=128, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4,
                  intermediate_size=512, max_position_embeddings=256, tie_word_embeddings=False),
    "0.5b": dict(vocab_size=151936, hidden_size=896, num_hidden_layers=24, num_attention_heads=14,
                 num_key_value_heads=2, intermediate_size=4864, max_position_embeddings=256, tie_word_embeddings=True),
}
SHAPE = SHAPES["bench"]
SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]
CHARS = list("0123456789+-*= \nQA:")
PAD, BOS, EOS = 0, 1, 2
_LAST_INT = re.compile(r"-?\d+")


GRPO_RECIPE = {
    "extends": "grpo",  # k3 KL in the loss (beta 0.04), token ratio clipped at 0.2, seq_mean_token_mean
    "description": "bench config (1.06M Llama from a config, char tokenizer, 8x8, 32 new tokens, fp32, 1 thread)",
    "name": "bench_grpo", "seed": 0, "steps": 4, "device": "cpu", "threads": 1,
    "model": {"dtype": "float32"},
    "task": {"name": "dataset", "question_field": "prompt", "answer_field": "answer", "answer_extraction": "none",
             "prompt_template": "{prompt}",  # exactly the bench text; the tokenizer prepends <bos>
             "verifier": "integer"},
    "rollout": {"group_size": 8, "prompts_per_step": 8, "max_new_tokens": 32, "temperature": 1.0, "top_p": 1.0,
                "top_k": 0},
    "advantage": {"baseline": "group_mean", "scale": "group_std", "eps": 1.0e-4},  # TRL adds 1e-4 to the group std
    "kl": {"placement": "loss", "estimator": "k3", "beta": 0.04},
    "reward": {"extract": ["last_number"],
               "truncated_is_incorrect": False},  # a 32-token completion is scored like any other
    "optim": {"lr": 1.0e-5, "schedule": "constant", "warmup_steps": 0, "betas": [0.9, 0.999], "adam_eps": 1.0e-8,
              "weight_decay": 0.0, "grad_clip": 1.0, "mu": 1, "minibatches": 1,
              "micro_batches": 4},  # bench_vs_trl sets micro_batches
    "eval": {"every": 100000, "at_start": False, "n": 1, "num_prompts": 1},
    "checkpoint": {"every": 0},
}


def write_recipe(path: str | Path) -> Path:
    """Write :data:`GRPO_RECIPE` as a recipe file at ``path``; return the path."""
    import yaml

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(GRPO_RECIPE, sort_keys=False), encoding="utf-8")
    return path


def shape(name: str = "bench", layers: int | None = None) -> dict:
    """The model dimensions of ``name`` (a key of :data:`SHAPES`), with ``layers`` decoder layers if given."""
    if name not in SHAPES:
        raise ValueError(f"unknown shape {name!r}: one of {sorted(SHAPES)}")
    if layers is not None and layers < 1:
        raise ValueError(f"layers {layers}: at least 1")
    return {**SHAPES[name], **({"num_hidden_layers": layers} if layers else {})}


def tokenizer(vocab_size: int = len(SPECIALS) + len(CHARS)):
    """The character tokenizer; a larger ``vocab_size`` appends filler tokens ``<f23>``, ... (never in a prompt)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    base = SPECIALS + CHARS
    if vocab_size < len(base):
        raise ValueError(f"vocab_size {vocab_size}: the character tokenizer needs at least {len(base)} ids")
    vocab = {t: i for i, t in enumerate(base + [f"<f{i}>" for i in range(len(base), vocab_size)])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")  # one token per character
    core.decoder = decoders.Fuse()
    core.post_processor = processors.TemplateProcessing(single="<bos> $A", pair="<bos> $A $B",
                                                        special_tokens=[("<bos>", BOS)])
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>",
                                   unk_token="<unk>", padding_side="left", truncation_side="left",
                                   clean_up_tokenization_spaces=False,
                                   model_max_length=SHAPE["max_position_embeddings"])


def model(seed: int = 0, dims: dict = SHAPE):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(**dims, hidden_act="silu", rms_norm_eps=1e-6,
                      attention_bias=False, mlp_bias=False, initializer_range=0.02, pad_token_id=PAD,
                      bos_token_id=BOS, eos_token_id=EOS, use_cache=True)
    torch.manual_seed(seed)
    m = LlamaForCausalLM(cfg).to(torch.float32)
    for k, v in (("pad_token_id", PAD), ("bos_token_id", BOS), ("eos_token_id", EOS)):
        setattr(m.generation_config, k, v)
    return m


def rows(n: int, seed: int = 0) -> list[dict]:
    """The first n bench problems: {'prompt': 'Q: 49-97=', 'answer': '-48'}, ..."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = rng.randint(0, 99), rng.randint(0, 99)
        op = rng.choice("+-*")
        out.append({"prompt": f"Q: {a}{op}{b}=", "answer": str(a + b if op == "+" else a - b if op == "-" else a * b)})
    return out


def reward(completions, answer, **_) -> list[float]:
    """1.0 when the completion's last integer equals the answer (TRL reward-function signature)."""
    out = []
    for text, ans in zip(completions, answer):
        found = _LAST_INT.findall(text)
        out.append(1.0 if found and int(found[-1]) == int(ans) else 0.0)
    return out


def export(directory: str | Path, seed: int = 0, dims: dict = SHAPE) -> Path:
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    model(seed, dims).save_pretrained(d)
    tokenizer(dims["vocab_size"]).save_pretrained(d)
    return d


def write_task_files(directory: str | Path, train: int, seed: int = 0) -> tuple[Path, Path]:
    """train.jsonl (the first ``train`` rows) and eval.jsonl (8 further rows) for rlvr's `dataset` task."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    all_rows = rows(train + 8, seed)
    paths = (d / "train.jsonl", d / "eval.jsonl")
    for path, part in zip(paths, (all_rows[:train], all_rows[train:])):
        path.write_text("".join(json.dumps(r) + "\n" for r in part))
    return paths


def linear_shapes(dims: dict = SHAPE) -> list[tuple[int, int, int]]:
    """(in, out, count) of every matmul a token passes through: per layer q and o (hidden x hidden), k and v
    (hidden x key/value heads' width: narrower under grouped-query attention), gate, up, down; the head."""
    e, f, n = dims["hidden_size"], dims["intermediate_size"], dims["num_hidden_layers"]
    kv = e // dims["num_attention_heads"] * dims["num_key_value_heads"]
    return [(e, e, 2 * n), (e, kv, 2 * n), (e, f, 2 * n), (f, e, n), (e, dims["vocab_size"], 1)]


def flops_per_token(context: int, dims: dict = SHAPE) -> float:
    """Forward FLOPs of one token: 2 per multiply-add of the linear layers, plus QK^T and PV over ``context`` keys."""
    linear = sum(i * o * c for i, o, c in linear_shapes(dims))
    attention = 2 * context * dims["hidden_size"] * dims["num_hidden_layers"]
    return 2.0 * (linear + attention)


def step_flops(rows_: int, prompt: int, new: int, dims: dict = SHAPE) -> dict:
    """Model FLOPs of one GRPO step (fixed-length completions): sampling, reference forward, policy forward+backward.

    Sampling: a prefill of ``prompt`` tokens and ``new`` decode steps per row. Reference: one forward
    over prompt + completion. Policy: forward plus backward (twice the forward: input and weight
    gradients), so three forwards' worth.
    """
    seq = prompt + new
    sample = rows_ * (prompt * flops_per_token(prompt / 2, dims) + sum(flops_per_token(prompt + t, dims)
                                                                        for t in range(new)))
    forward = rows_ * seq * flops_per_token(seq / 2, dims)
    return {"sample": sample, "reference": forward, "policy": 3 * forward, "total": sample + 4 * forward}


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "export":
        sys.exit("usage: python bench/bench_config.py export DIR")
    print(f"wrote {export(sys.argv[2])}")
