"""Seconds per step and tokens per second of one recipe on 1 and on N processes (one thread each).

    python bench/bench_scale.py                       # dr_grpo, builtin:tiny, 16 x 8, 64 new tokens, 1 vs 2
    python bench/bench_scale.py --recipe grpo --nproc 4 --steps 8

Each setting trains ``--steps`` steps (evaluation and checkpoints as small as the recipe allows) with
`rlvr train` (``--nproc N`` starts torchrun); the figures are the means over the steps after the first
(warm-up) from the runs' own metrics: step_time_s, and tokens/s = generated tokens / step_time_s.
Scaling efficiency = (s/step on 1) / (N x s/step on N). The 1-minute load average before and after
is printed: on a shared machine it is part of the result.

Not a test: the figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(recipe: str, model: str, nproc: int, steps: int, out: Path, sets: list[str]) -> dict:
    cmd = [sys.executable, "-m", "rlvr_cli", "train", recipe, "--out", str(out), "--nproc", str(nproc),
           "--set", f"model.name={model}", "--set", f"steps={steps}", "--set", "eval.at_start=false",
           "--set", "eval.n=1", "--set", "eval.num_prompts=2", "--set", "checkpoint.every=0", "--set", "threads=1"]
    for s in sets:
        cmd += ["--set", s]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run(cmd, check=True, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()][1:]
    step = statistics.mean(r["step_time_s"] for r in rows)
    tokens = statistics.mean(r["gen_tokens"] for r in rows)
    return {"nproc": nproc, "s_per_step": round(step, 3), "tokens_per_s": round(tokens / step, 1),
            "sample_tokens_per_s": round(statistics.mean(r["tokens_per_s"] for r in rows), 1),
            "time_sample_s": round(statistics.mean(r["time_sample_s"] for r in rows), 3),
            "time_update_s": round(statistics.mean(r["time_update_s"] for r in rows), 3)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--recipe", default="dr_grpo")
    ap.add_argument("--model", default="builtin:tiny")
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--set", dest="sets", action="append", default=[])
    args = ap.parse_args()
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        one = run(args.recipe, args.model, 1, args.steps, Path(tmp) / "one", args.sets)
        many = run(args.recipe, args.model, args.nproc, args.steps, Path(tmp) / "many", args.sets)
    eff = one["s_per_step"] / (args.nproc * many["s_per_step"])
    print(json.dumps({"recipe": args.recipe, "one": one, "many": many, "speedup": round(one["s_per_step"] / many["s_per_step"], 2),
                      "scaling_efficiency": round(eff, 2), "load_1min_before": load0,
                      "load_1min_after": os.getloadavg()[0], "cpus": os.cpu_count()}, indent=1))


if __name__ == "__main__":
    main()
