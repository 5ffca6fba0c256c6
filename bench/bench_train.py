"""Rollout speed against `model.generate`, and where a training step's time goes.

    python bench/bench_train.py                      # builtin:tiny, 16 prompts x 8, 64 new tokens
    python bench/bench_train.py --model builtin:tiny-init --steps 10 --recipe grpo

1. Sampling: the same batch of P*G prompts, sampled with rlvr's sampler and with
   `transformers`' `model.generate` (do_sample, same temperature and limit, left padding), timed
   after one warm-up each; tokens/s counts generated tokens (EOS included, padding after EOS not).
   The ratio is what the lean loop buys (dropping finished rows, no logits processors).
2. Training: a short run of a recipe; the mean seconds per step and its split into sampling,
   reference (and behaviour) log-probs, forward/backward updates and verification, read from the
   run's own metrics (time_*_s).

Not a test: the figures depend on the machine and its load. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

from rlvr_cli.models import load_model  # noqa: E402
from rlvr_cli.sampling import generate  # noqa: E402
from rlvr_cli.tasks import build_task, encode_prompt  # noqa: E402


def bench_sampling(model_ref: str, prompts: int, group: int, max_new: int, repeats: int) -> dict:
    model, tok, _ = load_model(model_ref)
    task = build_task("arithmetic")
    ids = [encode_prompt(tok, task, p) for p in task.eval_problems()[:prompts] for _ in range(group)]

    def ours(seed):
        out = generate(model, ids, max_new_tokens=max_new, eos_token_id=tok.eos_token_id,
                       pad_token_id=tok.pad_token_id, generator=torch.Generator().manual_seed(seed))
        return out.gen_tokens

    width = max(len(x) for x in ids)
    batch = torch.full((len(ids), width), tok.pad_token_id)
    mask = torch.zeros_like(batch)
    for i, x in enumerate(ids):
        batch[i, width - len(x):] = torch.tensor(x)
        mask[i, width - len(x):] = 1

    def theirs(seed):
        torch.manual_seed(seed)
        with torch.no_grad():
            out = model.generate(batch, attention_mask=mask, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                                 max_new_tokens=max_new, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
        gen = out[:, width:]
        n = 0
        for row in gen.tolist():  # count up to and including the first EOS
            n += next((j + 1 for j, t in enumerate(row) if t == tok.eos_token_id), len(row))
        return n

    result = {}
    for name, fn in (("rlvr", ours), ("transformers", theirs)):
        fn(0)
        times, tokens = [], 0
        for r in range(repeats):
            t0 = time.perf_counter()
            tokens += fn(r + 1)
            times.append(time.perf_counter() - t0)
        result[name] = {"tokens_per_s": tokens / sum(times), "s_per_batch": statistics.mean(times)}
    result["speedup"] = result["rlvr"]["tokens_per_s"] / result["transformers"]["tokens_per_s"]
    return result


def bench_steps(recipe: str, model_ref: str, steps: int) -> dict:
    from rlvr_cli.recipe.load import load_recipe
    from rlvr_cli.train.rl import train_rl
    from rlvr_cli.train.rundir import RunDir

    r = load_recipe(recipe, [f"model.name={model_ref}", f"steps={steps}", "eval.every=0", "eval.at_start=false",
                             "checkpoint.every=0"])
    with tempfile.TemporaryDirectory() as d:
        import rlvr_cli.train.rl as rl

        real_eval = rl.eval_and_record
        rl.eval_and_record = lambda *a, **k: None  # the final eval is not part of a step
        try:
            train_rl(r, os.path.join(d, "run"))
        finally:
            rl.eval_and_record = real_eval
        rows = RunDir(os.path.join(d, "run")).read_metrics()
    keys = ["step_time_s", "time_sample_s", "time_ref_s", "time_update_s", "time_verify_s"]
    out = {k: statistics.mean(row[k] for row in rows[1:] or rows) for k in keys}
    out["gen_tokens_per_step"] = statistics.mean(row["gen_tokens"] for row in rows)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="builtin:tiny")
    ap.add_argument("--recipe", default="dr_grpo")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from rlvr_cli.warm_start import ensure_built

    ensure_built(args.model)
    s = bench_sampling(args.model, args.prompts, args.group, args.max_new_tokens, args.repeats)
    print(f"sampling {args.prompts}x{args.group} prompts, {args.max_new_tokens} new tokens, {args.threads} thread(s):")
    for name in ("rlvr", "transformers"):
        print(f"  {name:13s} {s[name]['tokens_per_s']:9.0f} tokens/s   {s[name]['s_per_batch']:.3f} s/batch")
    print(f"  rlvr / generate: {s['speedup']:.2f}x")
    t = bench_steps(args.recipe, args.model, args.steps)
    print(f"training step ({args.recipe}, mean of steps 2..{args.steps}): {t['step_time_s']:.3f} s/step")
    for k in ("time_sample_s", "time_ref_s", "time_update_s", "time_verify_s"):
        print(f"  {k[5:-2]:8s} {t[k]:.3f} s  ({100 * t[k] / t['step_time_s']:.0f}%)")
    print(json.dumps({"sampling": s, "step": t}))


if __name__ == "__main__":
    main()
