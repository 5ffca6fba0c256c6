"""The sampler's written-out decode step on each model family it covers, against the generic path and
`model.generate`, interleaved A/B on the bench batch.

    python bench/bench_families.py                   # 6 repetitions, every family, default EOS and fixed length
    python bench/bench_families.py --reps 3 --families qwen2 qwen3 --modes fixed
    python bench/bench_families.py --device cuda --autocast bf16   # on a GPU (bench/gpu_check.sh runs it)

Each family is a model from a config at the bench config's size (bench/bench_config.py: vocabulary 23,
hidden 128, 4 layers of 4 query heads, SwiGLU 512; randomly initialised after `torch.manual_seed(0)`),
on the bench batch (8 prompts x 8 responses, at most 32 new tokens, temperature 1, keyed draws as the
trainer samples):

- `llama`: the bench model itself (4 key/value heads);
- `llama_gqa`: grouped-query attention, 2 key/value heads (Llama 3's layout);
- `qwen2`: Qwen2 / Qwen2.5, 2 key/value heads and biases on q/k/v;
- `qwen3`: Qwen3, 2 key/value heads and an RMSNorm over each head's q and k.

Three samplers per family and mode, each making --calls sampling calls per repetition (the same seeds),
in an order that swaps every repetition: rlvr's sampler with the
written-out step (`decoder="static"`), the same sampler through the model's own `forward`
(`decoder="generic"`: what a Llama with grouped-query attention, Qwen2 and Qwen3 took before the
step covered them) and `model.generate` (do_sample, top-k off, KV cache; `min_new_tokens` for fixed
length). Printed: valid completion tokens (up to and including the first EOS) per second of each,
the median and range of the per-repetition ratios static / generic and static / generate (of wall
time, and of this process's CPU time, which other load disturbs less), and
whether static and generic drew the same tokens and log-probabilities bit for bit (they must).
--autocast bf16 / fp16 samples all three under autocast (as `rollout.sample_autocast`, or `model.dtype`
on a GPU, does); --device cuda runs on the GPU (float32 weights), where the bit-for-bit check is the
point: the tests check it on the CPU only. Not a test; the figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import bench_config as bc  # noqa: E402
from bench_vs_trl import valid_tokens  # noqa: E402

P, G, NEW = 8, 8, 32  # the bench batch of bench/bench_vs_trl.py
FAMILIES = ("llama", "llama_gqa", "qwen2", "qwen3")


def family_model(name: str):
    """The bench-sized model of family ``name``, in eval mode, float32."""
    import transformers as tf

    dims = dict(bc.SHAPE)
    common = dict(hidden_act="silu", rms_norm_eps=1e-6, initializer_range=0.02, pad_token_id=bc.PAD,
                  bos_token_id=bc.BOS, eos_token_id=bc.EOS, use_cache=True)
    if name == "llama":
        return bc.model(0).eval()
    if name == "llama_gqa":
        cfg, cls = tf.LlamaConfig(**{**dims, "num_key_value_heads": 2}, **common), tf.LlamaForCausalLM
    elif name == "qwen2":
        cfg, cls = tf.Qwen2Config(**{**dims, "num_key_value_heads": 2}, **common), tf.Qwen2ForCausalLM
    elif name == "qwen3":
        cfg, cls = tf.Qwen3Config(**{**dims, "num_key_value_heads": 2}, head_dim=32, **common), tf.Qwen3ForCausalLM
    else:
        raise ValueError(f"unknown family {name!r}: one of {FAMILIES}")
    torch.manual_seed(0)
    m = cls(cfg).to(torch.float32).eval()
    for k, v in (("pad_token_id", bc.PAD), ("bos_token_id", bc.BOS), ("eos_token_id", bc.EOS)):
        setattr(m.generation_config, k, v)
    return m


def measure(name: str, fixed: bool, reps: int, calls: int, tok, device: str = "cpu", amp=None) -> dict:
    from rlvr_cli.keyed_random import row_keys, stream_key
    from rlvr_cli.sampling import generate, static_decode_supported

    model = family_model(name).to(device)
    if not static_decode_supported(model):
        print(f"error: {name}: the written-out decode step does not cover this model", file=sys.stderr)
        sys.exit(2)
    problems = bc.rows(P, 0)
    ids = [tok(r["prompt"])["input_ids"] for r in problems for _ in range(G)]
    enc = tok([r["prompt"] for r in problems for _ in range(G)], return_tensors="pt", padding=True).to(device)
    autocast = torch.autocast(device, dtype=amp) if amp is not None else contextlib.nullcontext()
    same = True

    def ours(decoder: str, s: int):
        keys = row_keys(stream_key(s, "bench"), [(i, j) for i in range(P) for j in range(G)])
        return generate(model, ids, max_new_tokens=NEW, eos_token_id=bc.EOS, pad_token_id=bc.PAD, row_keys=keys,
                        ignore_eos=fixed, decoder=decoder, autocast_dtype=amp)

    def theirs(s: int) -> int:
        torch.manual_seed(s)
        with torch.no_grad(), autocast:
            out = model.generate(**enc, do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=NEW,
                                 eos_token_id=bc.EOS, pad_token_id=bc.PAD, **({"min_new_tokens": NEW} if fixed else {}))
        return valid_tokens(out[:, enc["input_ids"].shape[1]:])  # a host number: the device has finished

    rate: dict = {"static": [], "generic": [], "generate": []}
    cpu: dict = {k: [] for k in rate}  # tokens per second of this process's CPU time (less disturbed by load)
    for i in range(reps + 1):  # the first round warms every path up and is not counted
        got = {}
        order = list(rate) if i % 2 else list(rate)[::-1]
        for which in order:
            t0, c0, n = time.perf_counter(), time.process_time(), 0
            for c in range(calls):  # the same calls (seeds) for every sampler
                if which == "generate":
                    n += theirs(i * calls + c)
                else:
                    out = got[which, c] = ours(which, i * calls + c)
                    n += out.gen_tokens if fixed else sum(len(r) for r in out.response_ids)
            if i:
                rate[which].append(n / (time.perf_counter() - t0))
                cpu[which].append(n / (time.process_time() - c0))
        same &= all(got["static", c].response_ids == got["generic", c].response_ids
                    and got["static", c].logprobs == got["generic", c].logprobs for c in range(calls))
    def ratio(a: str, b: str, r: dict = rate) -> list[float]:  # per repetition
        return [x / y for x, y in zip(r[a], r[b])]

    return {"tokens_per_s": {k: statistics.median(v) for k, v in rate.items()},
            "static_over_generic": ratio("static", "generic"), "static_over_generate": ratio("static", "generate"),
            "cpu_static_over_generic": ratio("static", "generic", cpu),
            "cpu_static_over_generate": ratio("static", "generate", cpu), "bit_for_bit": same}


def summary(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f}x ({min(xs):.2f}-{max(xs):.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=6, help="interleaved repetitions, after one warm-up (default 6)")
    ap.add_argument("--calls", type=int, default=4, help="sampling calls per sampler and repetition (default 4)")
    ap.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    ap.add_argument("--modes", nargs="+", choices=("default", "fixed"), default=["default", "fixed"])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--autocast", choices=("none", "bf16", "fp16"), default="none")
    args = ap.parse_args()
    if args.reps < 1 or args.calls < 1:
        ap.error("--reps and --calls: at least 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda: no CUDA device here", file=sys.stderr)
        sys.exit(2)
    amp = {"none": None, "bf16": torch.bfloat16, "fp16": torch.float16}[args.autocast]
    torch.set_num_threads(1)
    tok = bc.tokenizer()
    where = torch.cuda.get_device_name() if args.device == "cuda" else "1 thread"
    print(f"torch {torch.__version__}, {where}, autocast {args.autocast}; {args.reps} repetitions (+1 warm-up) of {args.calls} calls per "
          "sampler, family and mode")
    rows = []
    for name in args.families:
        for mode in args.modes:
            r = measure(name, mode == "fixed", args.reps, args.calls, tok, args.device, amp)
            t = r["tokens_per_s"]
            rows.append((name, mode, r))
            print(f"{name:10s} {mode:7s} static {t['static']:8,.0f}  generic {t['generic']:8,.0f}  generate "
                  f"{t['generate']:8,.0f} tokens/s | static/generic {summary(r['static_over_generic'])}  "
                  f"static/generate {summary(r['static_over_generate'])} | per CPU second: static/generic "
                  f"{summary(r['cpu_static_over_generic'])}  static/generate {summary(r['cpu_static_over_generate'])}"
                  f" | bit for bit: {r['bit_for_bit']}", flush=True)
    if not all(r["bit_for_bit"] for _, _, r in rows):
        print("error: the written-out step drew different samples from the generic path", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
