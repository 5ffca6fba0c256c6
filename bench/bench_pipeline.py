"""Which use of 2 cores trains runs fastest: one run on 1 thread, one run on 2 threads, a rollout/update
pipeline (one run, two threads of work), or two 1-thread runs side by side. Interleaved repetitions.

    python bench/bench_pipeline.py                      # recipes/dr_grpo.yaml, 40 steps, 3 repetitions
    python bench/bench_pipeline.py --recipe recipes/experiments/remedies/baseline.yaml --steps 30 --reps 2

Four ways to spend the 2 cores, each timed as the wall seconds of `train_rl` in a fresh child process
(model load included, the same in every mode; no evaluation, no checkpoint):

- `serial-1t`: the trainer as it ships, `threads: 1` (the other core idles).
- `serial-2t`: the same run with `threads: 2` (torch's intra-op threads on both cores).
- `pipeline`: one run whose rollouts for step s+1 are sampled and scored in a second Python thread,
  on a copy of the policy holding the weights from before step s's update, while the main thread does
  step s's reference forward and update (1 intra-op thread each; torch releases the GIL inside its
  operators). This is one-step off-policy RL (the behaviour policy lags the trained one by one update;
  the sampler's log-probs are the ratio's pi_old), so its numbers are those of another algorithm: it is
  a prototype for timing, built here from the trainer's own pieces for one process, not a trainer
  mode.
- `side-by-side`: two `serial-1t` runs at once (seeds 0 and 1), the way results/reproduce.py fills
  its 2 slots; the time per run is the longer of their two wall times / 2.

What matters for regenerating results/ (117 runs, never fewer than 2 waiting) is the time per run
with both cores kept busy: the `side-by-side` row (already halved) against the three single-run rows.
For one run on its own (a user iterating on a recipe), it is the run's own wall time. Each repetition
also says whether `serial-2t` and `pipeline` logged the same metrics as `serial-1t`. Not a test: the
figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TIMINGS = {"step_time_s", "tokens_per_s"}
MODES = ("serial-1t", "serial-2t", "pipeline", "side-by-side")


class _SamplerSession:
    """The trainer's session with another model: what `collect_rollouts` reads, for the sampling thread."""

    def __init__(self, session, model):
        self._session, self.model = session, model

    def __getattr__(self, name):
        return getattr(self._session, name)


def install_pipeline(steps: int) -> dict:
    """Replace the trainer's `collect_rollouts` by a prefetching one: step s+1's rollouts start, on a copy
    of the weights before step s's update, as step s's rollouts are handed to the trainer."""
    import rlvr_cli.train.rl as rl

    collect = rl.collect_rollouts
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rollouts")
    state: dict = {"pending": None, "model": None, "waited_s": 0.0}

    def sampled(session, task, scorer, step):
        return collect(_SamplerSession(session, state["model"]), task, scorer, step)

    def prefetching(session, task, scorer, step):
        if state["model"] is None:
            state["model"] = copy.deepcopy(session.model).eval().requires_grad_(False)
        pending = state["pending"]
        if pending is not None and pending[0] == step:
            t0 = time.perf_counter()
            result = pending[1].result()
            state["waited_s"] += time.perf_counter() - t0
        else:  # the first step: nothing was prefetched
            state["model"].load_state_dict(session.model.state_dict())
            result = sampled(session, task, scorer, step)
        if step < steps:  # the sampler thread is idle now: give it this step's weights (before the update)
            state["model"].load_state_dict(session.model.state_dict())
            state["pending"] = (step + 1, pool.submit(sampled, session, task, scorer, step + 1))
        return result

    rl.collect_rollouts = prefetching
    return state


def child(mode: str, recipe_path: str, steps: int, seed: int, out: str) -> None:
    """Train in this process and print one JSON line: the wall seconds of train_rl and the run's means."""
    from rlvr_cli.recipe.load import load_recipe
    from rlvr_cli.train.rl import train_rl

    threads = 2 if mode == "serial-2t" else 1
    recipe = load_recipe(recipe_path, [f"steps={steps}", f"seed={seed}", f"threads={threads}", "eval.every=0",
                                       "eval.at_start=false", "checkpoint.every=0"])
    state = install_pipeline(steps) if mode == "pipeline" else {}
    t0 = time.perf_counter()
    train_rl(recipe, out)
    wall = time.perf_counter() - t0
    rows = [json.loads(line) for line in (Path(out) / "metrics.jsonl").read_text().splitlines()]
    last = rows[-10:]
    numbers = [{k: v for k, v in r.items() if not k.startswith("time_") and k not in TIMINGS} for r in rows]
    print(json.dumps({"wall_s": wall, "waited_s": state.get("waited_s"),
                      "reward_last10": statistics.mean(r["reward_mean"] for r in last),
                      "digest": hashlib.sha256(json.dumps(numbers, sort_keys=True).encode()).hexdigest()}), flush=True)


def spawn(mode: str, args, seed: int, out: Path) -> subprocess.Popen:
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "OMP_NUM_THREADS": "2" if mode == "serial-2t" else "1", "RLVR_EVAL_CACHE": "0"}
    return subprocess.Popen([sys.executable, __file__, "--child", mode, "--recipe", args.recipe, "--steps",
                             str(args.steps), "--seed", str(seed), "--out", str(out)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen, mode: str) -> dict:
    stdout, stderr = proc.communicate()
    if proc.returncode:
        sys.exit(f"{mode} run failed (exit {proc.returncode}):\n{stderr[-2000:]}")
    return json.loads(stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recipe", default=str(ROOT / "recipes" / "dr_grpo.yaml"))
    ap.add_argument("--steps", type=int, default=40, help="steps per run (default 40)")
    ap.add_argument("--reps", type=int, default=3, help="interleaved repetitions (default 3)")
    ap.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.recipe, args.steps, args.seed, args.out)
        return
    if args.steps < 2 or args.reps < 1:
        ap.error("--steps must be at least 2 and --reps at least 1")
    if not Path(args.recipe).is_file():
        ap.error(f"--recipe {args.recipe}: no such file")
    from rlvr_cli.errors import UserError
    from rlvr_cli.recipe.load import load_recipe

    try:  # a bad recipe is named here, not after four child processes failed on it
        load_recipe(args.recipe, [f"steps={args.steps}"])
    except UserError as e:
        ap.error(f"--recipe {args.recipe}: {e}")
    work = Path(tempfile.mkdtemp(prefix="bench-pipeline-"))
    per_run: dict[str, list[float]] = {m: [] for m in MODES}
    print(f"{args.recipe}, {args.steps} steps, {os.cpu_count()} cores", flush=True)
    for rep in range(args.reps):
        order = MODES[rep % len(MODES):] + MODES[: rep % len(MODES)]
        line, digest = [], {}
        for mode in order:
            if mode == "side-by-side":
                procs = [spawn("serial-1t", args, seed, work / f"pair{seed}") for seed in (0, 1)]
                res = [finish(p, mode) for p in procs]
                per_run[mode].append(max(r["wall_s"] for r in res) / 2)
                line.append(f"{mode} {per_run[mode][-1]:.1f} s/run (walls {res[0]['wall_s']:.1f}, {res[1]['wall_s']:.1f})")
            else:
                res = finish(spawn(mode, args, 0, work / mode), mode)
                per_run[mode].append(res["wall_s"])
                digest[mode] = res["digest"]
                extra = f", sampler waited {res['waited_s']:.1f} s" if mode == "pipeline" else ""
                line.append(f"{mode} {res['wall_s']:.1f} s (reward last 10 {res['reward_last10']:.3f}{extra})")
        same = {m: digest[m] == digest["serial-1t"] for m in ("serial-2t", "pipeline")}
        print(f"rep {rep + 1}: " + "; ".join(line) + f"; the same metrics as serial-1t: {same}", flush=True)
    base = per_run["serial-1t"]
    print(f"\n== seconds per run (median of {args.reps}), and serial-1t / mode (median of per-repetition ratios)")
    for mode in MODES:
        ratios = [b / x for b, x in zip(base, per_run[mode])]
        print(f"{mode:13s} {statistics.median(per_run[mode]):6.1f} s   {statistics.median(ratios):.2f}x "
              f"({min(ratios):.2f}-{max(ratios):.2f})")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
