"""Why the fixed-length decode cannot reach its operators' own speed: each matmul and attention call of
the written-out decode step, timed inside the sampling loop and again at once on the same tensors.

    python bench/bench_decode_locality.py            # the bench model, 64 rows x 32 tokens, 3 calls

The sampler runs as the trainer calls it (keyed draws, `ignore_eos`, the bench batch of
bench/bench_config.py). Every `F.linear` and `F.scaled_dot_product_attention` call of its decode step
is timed where it runs ("in the loop"), then called 5 more times on the very same tensors; the fastest
of those 5 is the operator with its inputs in the caches ("repeated"). The ratio is what the loop's
cache misses cost: between two calls of one layer's operator, the step reads the other layers'
weights and the whole KV cache, more than a core's L2. Medians over the calls of each kind. Not a
test: the figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import types
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import bench_config as bc  # noqa: E402
from rlvr_cli import sampling  # noqa: E402


def timed(fn, *args, **kwargs) -> tuple[object, float, float]:
    """fn's output, its time now, and the fastest of 5 more calls on the same arguments."""
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    first = time.perf_counter() - t0
    again = []
    for _ in range(5):
        t0 = time.perf_counter()
        fn(*args, **kwargs)
        again.append(time.perf_counter() - t0)
    return out, first, min(again)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=3, help="sampler calls timed (default 3)")
    args = ap.parse_args()
    if args.calls < 1:
        ap.error("--calls must be at least 1")
    torch.set_num_threads(1)
    model = bc.model(0).eval()
    tok = bc.tokenizer()
    prompts = [tok(r["prompt"])["input_ids"] for r in bc.rows(8) for _ in range(8)]
    keys = torch.arange(len(prompts), dtype=torch.long)
    times: dict[str, list[tuple[float, float]]] = defaultdict(list)

    def linear(x, w, b=None):
        out, first, again = timed(F.linear, x, w, b)
        times[f"matmul [{x.shape[0]}, {w.shape[1]}] x [{w.shape[1]}, {w.shape[0]}]"].append((first, again))
        return out

    def attention(q, k, v, **kw):
        out, first, again = timed(F.scaled_dot_product_attention, q, k, v, **kw)
        times[f"attention over {k.shape[2] // 10 * 10}-{k.shape[2] // 10 * 10 + 9} keys"].append((first, again))
        return out

    proxy = types.SimpleNamespace(**{n: getattr(F, n) for n in dir(F) if not n.startswith("__")})
    proxy.linear, proxy.scaled_dot_product_attention = linear, attention

    def sample():
        return sampling.generate(model, prompts, max_new_tokens=32, eos_token_id=bc.EOS, pad_token_id=bc.PAD,
                                 row_keys=keys, ignore_eos=True)

    sample()  # warm-up, untimed
    sampling.F = proxy
    try:
        for _ in range(args.calls):
            sample()
    finally:
        sampling.F = F
    print(f"bench model, {len(prompts)} rows x 32 new tokens, {args.calls} sampler calls; per call kind: median us "
          f"in the loop, repeated at once (fastest of 5), and their ratio")
    for name in sorted(times):
        first = statistics.median(t[0] for t in times[name]) * 1e6
        again = statistics.median(t[1] for t in times[name]) * 1e6
        print(f"  {name:38s} {len(times[name]):5d} calls  {first:7.0f} us  {again:7.0f} us  {first / again:5.2f}x")
    total_first = sum(t[0] for v in times.values() for t in v)
    total_again = sum(t[1] for v in times.values() for t in v)
    print(f"  all of them: {total_first / args.calls * 1e3:.1f} ms per call in the loop, "
          f"{total_again / args.calls * 1e3:.1f} ms repeated ({total_first / total_again:.2f}x)")


if __name__ == "__main__":
    main()
