"""Step wall time of the serial trainer against the overlapped one (a sampler process beside the trainer) at staleness 1.

    python bench/bench_async.py                                   # builtin:tiny, grpo (16 x 8, 64 new tokens)
    python bench/bench_async.py --model smollm2 --steps 4 --reps 2 # SmolLM2-135M-Instruct LoRA, 4 x 8 x 48 fixed tokens
    python bench/bench_async.py --steps 3 --reps 1 --set rollout.prompts_per_step=2   # a smoke run

Arms, in one process each repetition, the order alternating (A B, B A, ...):
- ``serial``: ``rollout.staleness.max`` 0, the synchronous trainer (sample, score, log-probs, update);
- ``overlap``: ``rollout.staleness.max`` 1 with ``overlap`` true: the sampler process samples and scores
  step t+1 while this process trains step t.

Each arm trains ``--steps`` steps from scratch (no evaluation, no checkpoint). A step's wall time is the
time between two consecutive metrics lines (everything the loop does, the weight handover included);
the first ``--warmup`` steps are left out (the overlapped run's first step waits for the sampler process
to start and sample its first batch). Printed: per repetition and arm the median step wall time and
the overlap/serial ratio (paired within the repetition), then the median ratio over repetitions and
the median seconds per step of each phase from the runs' metrics: sampling and scoring (in the
sampler process when overlapped), log-probs and update (the trainer), the trainer's wait for a batch,
the sampler's wait for weights or room, and the handover (the trainer's copy and pickling of the
weights plus the sampler's load). The issue's goals: overlap/serial <= 0.7 on the toy model and <= 0.6
on the real model's LoRA step.

The 1-minute load average before and after is printed: on a shared 2-core machine a second process
only overlaps when the second core is free, so measure on a quiet machine (load average below 1).

Not a test: the figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

ARMS = {"serial": ["rollout.staleness.max=0"],
        "overlap": ["rollout.staleness.max=1", "rollout.staleness.overlap=true"]}
MODELS = {
    "toy": ("grpo", []),
    # the docs/real.md step: 4 x 8 x exactly 48 tokens, no KL measurement (each is a forward more)
    "smollm2": ("smollm2_dr_grpo", ["rollout.ignore_eos=true", "kl.track=false"]),
}
PHASES = ("time_sample_s", "time_verify_s", "time_ref_s", "time_update_s", "time_wait_s", "time_sampler_idle_s",
          "time_handover_s")


def run(recipe: str, sets: list[str]) -> tuple[list[float], list[dict]]:
    """Train one arm; (wall seconds of each step, its metrics rows)."""
    from quiet_train import train_quietly
    from rlvr_cli.recipe.load import load_recipe
    from rlvr_cli.train.run_writer import RunDir

    r = load_recipe(recipe, ["eval.every=0", "eval.at_start=false", "checkpoint.every=0", *sets])
    ends: list[float] = []
    real_append = RunDir.append_metrics

    def timed_append(self, row):
        ends.append(time.perf_counter())
        return real_append(self, row)

    rows = train_quietly(r, RunDir, "append_metrics", timed_append)
    return [b - a for a, b in zip(ends, ends[1:])], rows


def phases(rows: list[dict]) -> dict:
    return {p: round(statistics.median(r[p] for r in rows), 3) if all(r.get(p) is not None for r in rows) else None
            for p in PHASES}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="toy")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2, help="steps left out at the start of each run")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--set", dest="sets", action="append", default=[], help="recipe override for both arms")
    args = ap.parse_args()
    if args.steps < args.warmup + 1:
        ap.error("--steps must exceed --warmup")
    import torch

    torch.set_num_threads(1)
    recipe, model_sets = MODELS[args.model]
    load_before = os.getloadavg()[0]
    reps, kept = [], {arm: [] for arm in ARMS}
    for rep in range(args.reps):
        order = list(ARMS) if rep % 2 == 0 else list(ARMS)[::-1]
        walls = {}
        for arm in order:
            steps, rows = run(recipe, [f"steps={args.steps}", *model_sets, *args.sets, *ARMS[arm]])
            walls[arm] = statistics.median(steps[args.warmup - 1:])  # steps[i] is step i+2's wall time
            kept[arm] += rows[args.warmup:]
            print(f"rep {rep + 1} {arm:8s} {walls[arm]:.3f} s/step  (steps {args.warmup + 1}-{args.steps}: "
                  f"{', '.join(f'{s:.3f}' for s in steps[args.warmup - 1:])})", flush=True)
        reps.append({**{arm: round(w, 4) for arm, w in walls.items()}, "ratio": round(walls["overlap"] / walls["serial"], 3)})
    ratios = [r["ratio"] for r in reps]
    print(json.dumps({
        "model": args.model, "recipe": recipe, "sets": [*model_sets, *args.sets], "steps": args.steps,
        "warmup": args.warmup, "reps": reps,
        "overlap_over_serial": {"median": round(statistics.median(ratios), 3), "min": min(ratios), "max": max(ratios)},
        "goal": 0.6 if args.model == "smollm2" else 0.7,
        "phases_median_s": {arm: phases(rows) for arm, rows in kept.items()},
        "load_1min_before": load_before, "load_1min_after": os.getloadavg()[0], "cpus": os.cpu_count(),
    }, indent=1))


if __name__ == "__main__":
    main()
