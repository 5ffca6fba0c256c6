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
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

SHAPE = dict(vocab_size=23, hidden_size=128, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4,
             intermediate_size=512, max_position_embeddings=256)
SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]
CHARS = list("0123456789+-*= \nQA:")
PAD, BOS, EOS = 0, 1, 2
_LAST_INT = re.compile(r"-?\d+")


def tokenizer():
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(SPECIALS + CHARS)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")  # one token per character
    core.decoder = decoders.Fuse()
    core.post_processor = processors.TemplateProcessing(single="<bos> $A", pair="<bos> $A $B",
                                                        special_tokens=[("<bos>", BOS)])
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>",
                                   unk_token="<unk>", padding_side="left", truncation_side="left",
                                   clean_up_tokenization_spaces=False,
                                   model_max_length=SHAPE["max_position_embeddings"])


def model(seed: int = 0):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(**SHAPE, hidden_act="silu", rms_norm_eps=1e-6, tie_word_embeddings=False,
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


def export(directory: str | Path, seed: int = 0) -> Path:
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    model(seed).save_pretrained(d)
    tokenizer().save_pretrained(d)
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


def linear_shapes() -> list[tuple[int, int, int]]:
    """(in, out, count) of every matmul a token passes through: per layer q, k, v, o, gate, up, down; the head."""
    e, f, n = SHAPE["hidden_size"], SHAPE["intermediate_size"], SHAPE["num_hidden_layers"]
    return [(e, e, 4 * n), (e, f, 2 * n), (f, e, n), (e, SHAPE["vocab_size"], 1)]


def flops_per_token(context: int) -> float:
    """Forward FLOPs of one token: 2 per multiply-add of the linear layers, plus QK^T and PV over ``context`` keys."""
    linear = sum(i * o * c for i, o, c in linear_shapes())
    attention = 2 * context * SHAPE["hidden_size"] * SHAPE["num_hidden_layers"]
    return 2.0 * (linear + attention)


def step_flops(rows_: int, prompt: int, new: int) -> dict:
    """Model FLOPs of one GRPO step (fixed-length completions): sampling, reference forward, policy forward+backward.

    Sampling: a prefill of ``prompt`` tokens and ``new`` decode steps per row. Reference: one forward
    over prompt + completion. Policy: forward plus backward (twice the forward: input and weight
    gradients), so three forwards' worth.
    """
    seq = prompt + new
    sample = rows_ * (prompt * flops_per_token(prompt / 2) + sum(flops_per_token(prompt + t) for t in range(new)))
    forward = rows_ * seq * flops_per_token(seq / 2)
    return {"sample": sample, "reference": forward, "policy": 3 * forward, "total": sample + 4 * forward}


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "export":
        sys.exit("usage: python bench/bench_config.py export DIR")
    print(f"wrote {export(sys.argv[2])}")
