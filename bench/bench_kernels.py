"""Where the results/ runs spend their time at the kernel level, and three levers that keep the same
code path, measured A/B interleaved.

    python bench/bench_kernels.py              # 6 repetitions
    python bench/bench_kernels.py --reps 3 --only floor sdpa
    python bench/bench_kernels.py --only eval_batch --recipe recipes/experiments/length/grpo.yaml

The work is what the experiments run, one thread: by default remedies/baseline.yaml, i.e.
`builtin:tiny` (GPT-2, 3 layers, 96 wide, 4 heads) on the arithmetic task, 16 prompts x 8 responses
of at most 64 new tokens, evaluated on 32 samples of 64 held-out prompts (--recipe: another one's
model, shapes and eval settings).

1. floor: one update micro-batch (the largest of the trainer's length-sorted chunks of a batch the
   sampler drew: a quarter of a 64-row minibatch) forward + backward, and one rollout (`generate`,
   keyed draws as the trainer samples), each timed (wall) and under the torch profiler: the share of
   the wall time inside operators (the rest is Python, the autograd engine, the dispatcher), the
   matmuls' share and their rate (the profiler's FLOP count / their self time), attention's share.
2. sdpa: the same two under `sdpa_kernel(SDPBackend.MATH)` (matmul + softmax) instead of the CPU
   flash-attention kernel that transformers' `sdpa` attention and the sampler's written-out decode
   step get by default: ratio of times, and the largest log-prob difference (it rounds differently).
3. denormal: `torch.set_flush_denormal(True)` (denormal floats as zero; a collapsing policy's tail
   probabilities underflow toward them) against the default: ratio, and whether every log-prob and
   sampled token is the same.
4. eval_batch: `evaluate_policy` with the recipe's eval settings in batches of --eval-sizes rows (default 256 and 128) against 512: ratio, and whether the samples are the
   same (keyed draws: they must be, whatever the batch).

Not a test: the figures depend on the machine and its load (each ratio is the median of
per-repetition ratios, A and B in alternating order).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

RECIPE = "recipes/experiments/remedies/baseline.yaml"
MATMUL = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"}


def setup(recipe: str):
    """The model, task, prompts, a drawn batch and its largest update micro-batch."""
    from rlvr_cli.models import load_model
    from rlvr_cli.recipe.load import load_recipe
    from rlvr_cli.sampling import generate
    from rlvr_cli.tasks import build_task, encode_prompt
    from rlvr_cli.train.batch import length_sorted_chunks, pack

    r = load_recipe(recipe, [])
    model, tok, _ = load_model(r.model.name)
    model.eval()
    task, ro = build_task(r.task), r.rollout
    problems = task.train_problems(random.Random(0), ro.prompts_per_step)
    prompts = [encode_prompt(tok, task, p) for p in problems for _ in range(ro.group_size)]
    keys = torch.arange(len(prompts), dtype=torch.long) * 7919

    def rollout():
        return generate(model, prompts, max_new_tokens=ro.max_new_tokens, eos_token_id=tok.eos_token_id,
                        pad_token_id=tok.pad_token_id, temperature=ro.temperature, row_keys=keys)

    resp = rollout().response_ids
    lengths = [len(p) + len(x) for p, x in zip(prompts, resp)]
    chunks = length_sorted_chunks(range(len(prompts) // r.optim.minibatches), lengths, r.optim.micro_batches)
    idx = max(chunks, key=lambda c: len(c) * max(lengths[i] for i in c))
    mb = pack([prompts[i] for i in idx], [resp[i] for i in idx], tok.pad_token_id)
    return r, model, tok, task, rollout, mb


def fwd_bwd(model, mb):
    from rlvr_cli.train.batch import response_logprobs

    logp, _ = response_logprobs(model, mb, 1.0, with_entropy=True)  # as the trainer: with the entropy
    loss = -(logp * mb.response_mask).sum() / mb.response_mask.sum()
    loss.backward()
    model.zero_grad(set_to_none=True)
    return logp.detach()


def timed(fn, calls: int = 3) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def floor(model, mb, rollout, reps: int) -> None:
    for name, fn in (("update micro-batch forward + backward", lambda: fwd_bwd(model, mb)), ("rollout", rollout)):
        fn()
        wall = statistics.median(timed(fn) for _ in range(reps))
        with torch.profiler.profile(with_flops=True) as prof:
            fn()
        ev = prof.key_averages()
        ops = sum(e.self_cpu_time_total for e in ev) / 1e6
        mm = [e for e in ev if e.key in MATMUL]
        mm_s = sum(e.self_cpu_time_total for e in mm) / 1e6
        flops = sum(e.flops or 0 for e in mm)
        attn = sum(e.self_cpu_time_total for e in ev if "scaled_dot_product" in e.key or "flash_attention" in e.key) / 1e6
        shape = f" [{mb.input_ids.shape[0]} rows x {mb.input_ids.shape[1] - 1}]" if "update" in name else ""
        print(f"{name}{shape}: {wall * 1e3:.1f} ms; inside operators {ops / wall:.0%} of it (profiled once); "
              f"matmuls {mm_s / ops:.0%} of operator time at {flops / mm_s / 1e9:.0f} GFLOP/s, attention "
              f"{attn / ops:.0%}, the rest {1 - (mm_s + attn) / ops:.0%}")


def ab(name: str, a, b, reps: int, same) -> None:
    """Interleaved A/B: ratio time(A) / time(B) per repetition; ``same(out_a, out_b)`` describes the outputs."""
    ratios, outs = [], None
    for rep in range(reps):
        got = {}
        for who, fn in (((0, a), (1, b)) if rep % 2 == 0 else ((1, b), (0, a))):
            got[who] = timed(fn)
        ratios.append(got[0] / got[1])
        if outs is None:
            outs = same(a(), b())
    print(f"{name}: {statistics.median(ratios):.3f}x (range {min(ratios):.3f}-{max(ratios):.3f}, n={reps}); {outs}")


@contextlib.contextmanager
def flush_denormal(on: bool):
    before = torch.set_flush_denormal(on)  # returns whether it is supported, not the old state
    try:
        yield before
    finally:
        torch.set_flush_denormal(False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--recipe", default=os.path.join(os.path.dirname(__file__), "..", RECIPE))
    ap.add_argument("--only", nargs="+", default=["floor", "sdpa", "denormal", "eval_batch"],
                    choices=["floor", "sdpa", "denormal", "eval_batch"])
    ap.add_argument("--eval-sizes", nargs="+", type=int, default=[256, 128], help="batch sizes set against 512")
    args = ap.parse_args()
    torch.set_num_threads(1)
    from rlvr_cli.errors import UserError

    try:
        r, model, tok, task, rollout, mb = setup(args.recipe)
    except UserError as e:  # a recipe that does not load or validate: its message names the field or file
        print(f"bench_kernels: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"{os.path.relpath(args.recipe)} shapes on {r.model.name}, 1 thread, load average {os.getloadavg()[0]:.1f}")

    def diff(x, y):
        return f"max |log-prob difference| {float((x - y).abs().max()):.1e}"

    def sampled(x, y):
        d = max((abs(p - q) for a, b in zip(x.logprobs, y.logprobs) for p, q in zip(a, b)), default=0.0)
        return f"same tokens: {x.response_ids == y.response_ids}, max |log-prob difference| {d:.1e}"

    if "floor" in args.only:
        floor(model, mb, rollout, args.reps)
    if "sdpa" in args.only:
        def math(fn):
            def run():
                with sdpa_kernel(SDPBackend.MATH):
                    return fn()
            return run

        ab("update micro-batch, math SDPA / flash", math(lambda: fwd_bwd(model, mb)), lambda: fwd_bwd(model, mb),
           args.reps, diff)
        ab("rollout, math SDPA / flash", math(rollout), rollout, args.reps, sampled)
    if "denormal" in args.only:
        def flushed(fn):
            def run():
                with flush_denormal(True):
                    return fn()
            return run

        ab("update micro-batch, flush denormals / default", flushed(lambda: fwd_bwd(model, mb)),
           lambda: fwd_bwd(model, mb), args.reps, lambda x, y: f"identical: {torch.equal(x, y)}")
        ab("rollout, flush denormals / default", flushed(rollout), rollout, args.reps, sampled)
    if "eval_batch" in args.only:
        from rlvr_cli.evaluation.core import DEFAULT_BATCH, evaluate_policy
        from rlvr_cli.rewards import Scorer

        with Scorer(r.reward, task, seed=0) as scorer:
            def evaluate(bs):
                e = r.eval
                return lambda: evaluate_policy(model, tok, task, scorer, n=e.n, num_prompts=e.num_prompts,
                                               max_new_tokens=e.max_new_tokens or r.rollout.max_new_tokens,
                                               batch_size=bs)

            for bs in args.eval_sizes:
                ab(f"evaluation, {bs}-row / {DEFAULT_BATCH}-row batches", evaluate(bs), evaluate(DEFAULT_BATCH),
                   args.reps, lambda x, y: f"same samples: {x['samples_digest'] == y['samples_digest']}")


if __name__ == "__main__":
    main()
