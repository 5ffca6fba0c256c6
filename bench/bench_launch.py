"""A training run started as a fresh process against one forked from the warm server of
rlvr_cli/forkserver.py (what results/reproduce.py does), interleaved A/B.

    python bench/bench_launch.py                       # remedies/baseline, 10 steps, 3 repetitions
    python bench/bench_launch.py --recipe kl/drift --steps 100 --reps 2

Each repetition trains the same recipe and seed both ways (the order alternates) and prints the
wall seconds of each, their difference, the seconds their steps took (the sum of `step_time_s`: a
forked process must not compute more slowly), and whether the two runs logged the same metrics and eval
numbers (timings left out). Not a test; the figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlvr_cli.forkserver import Launcher  # noqa: E402

TIMINGS = {"time_sample_s", "time_verify_s", "time_ref_s", "time_update_s", "step_time_s", "tokens_per_s"}


def numbers(run: Path):
    rows = [{k: v for k, v in json.loads(line).items() if k not in TIMINGS}
            for line in (run / "metrics.jsonl").read_text().splitlines()]
    evals = {f.name: {k: v for k, v in json.loads(f.read_text()).items() if k != "sample_s"}
             for f in sorted((run / "eval").glob("*.json"))}
    return rows, evals


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recipe", default="remedies/baseline", help="under recipes/experiments/ (default remedies/baseline)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    recipe = ROOT / "recipes" / "experiments" / f"{args.recipe}.yaml"
    if not recipe.is_file():
        ap.error(f"--recipe {args.recipe}: no file {recipe}")
    work = Path(tempfile.mkdtemp(prefix="bench-launch-"))
    base = ["train", str(recipe), "--seed", "0", "--set", f"steps={args.steps}"]
    gains, step_ratios, same = [], [], True
    with Launcher() as launcher:
        launcher.run(["--help"], work / "warm.log", ROOT)  # the server's own start-up is paid once per run of reproduce.py
        for rep in range(args.reps):
            wall, steps = {}, {}
            for mode in (("fresh", "forked") if rep % 2 == 0 else ("forked", "fresh")):
                out = work / mode
                shutil.rmtree(out, ignore_errors=True)
                t0 = time.perf_counter()
                if mode == "fresh":
                    with open(work / "fresh.log", "w") as f:
                        rc = subprocess.run([sys.executable, "-m", "rlvr_cli", *base, "--out", str(out)], cwd=ROOT,
                                            stdout=f, stderr=subprocess.STDOUT).returncode
                else:
                    rc = launcher.run([*base, "--out", str(out)], work / "forked.log", ROOT)
                wall[mode] = time.perf_counter() - t0
                steps[mode] = sum(json.loads(line)["step_time_s"] for line in (out / "metrics.jsonl").read_text().splitlines())
                if rc:
                    sys.exit(f"{mode} run failed (exit {rc}); see {work / (mode + '.log')}")
            equal = numbers(work / "fresh") == numbers(work / "forked")
            same &= equal
            gains.append(wall["fresh"] - wall["forked"])
            step_ratios.append(steps["fresh"] / steps["forked"])
            print(f"rep {rep}: fresh {wall['fresh']:.2f} s, forked {wall['forked']:.2f} s, "
                  f"saved {gains[-1]:.2f} s ({wall['fresh'] / wall['forked']:.2f}x); steps {steps['fresh']:.2f} s vs "
                  f"{steps['forked']:.2f} s ({step_ratios[-1]:.3f}x); same numbers: {equal}", flush=True)
    print(f"median saving per run {statistics.median(gains):.2f} s (range {min(gains):.2f}-{max(gains):.2f}); "
          f"steps fresh / forked {statistics.median(step_ratios):.3f}x ({min(step_ratios):.3f}-{max(step_ratios):.3f}); "
          f"same numbers in every repetition: {same}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
