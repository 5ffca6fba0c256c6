"""Training metrics of a length experiment's runs in step windows, per arm (mean over seeds): the table
results/README.md quotes for results/length/.

    python results/length_windows.py runs/experiments/length_check --window 30 > results/length/windows.md

Per window: training accuracy, mixed groups (neither all right nor all wrong), incorrect and correct
response length, truncation, and the per-token gradient weight of the longest third of the wrong
responses against the shortest third (gw long / short: ~1 without 1/|o|, below 1 with it).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def window_rows(metrics: list[dict], window: int) -> list[dict]:
    out = []
    for start in range(0, len(metrics), window):
        w = metrics[start:start + window]
        short = _mean(r.get("gw_incorrect_short_share") for r in w)
        long_ = _mean(r.get("gw_incorrect_long_share") for r in w)
        out.append({
            "steps": f"{w[0]['step']}-{w[-1]['step']}",
            "accuracy": _mean(r.get("accuracy") for r in w),
            "mixed": _mean(1 - r["groups_all_correct_frac"] - r["groups_all_wrong_frac"] for r in w),
            "len_incorrect": _mean(r.get("len_incorrect") for r in w),
            "len_correct": _mean(r.get("len_correct") for r in w),
            "truncated": _mean(r.get("truncated_frac") for r in w),
            "gw_long_over_short": long_ / short if short and long_ is not None else None,
        })
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", help="the sweep's output directory (<arm>-seed<k> run directories)")
    ap.add_argument("--window", type=int, default=30)
    args = ap.parse_args()
    arms: dict[str, list[list[dict]]] = defaultdict(list)
    for run in sorted(Path(args.runs).glob("*-seed*")):
        path = run / "metrics.jsonl"
        if path.is_file():
            rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            arms[run.name.rsplit("-seed", 1)[0]].append(window_rows(rows, args.window))
    keys = ["accuracy", "mixed", "len_incorrect", "len_correct", "truncated", "gw_long_over_short"]
    print("| arm | seeds | steps | " + " | ".join(keys) + " |")
    print("|---|---|---|" + "---|" * len(keys))
    for arm, runs in arms.items():
        for i in range(min(len(r) for r in runs)):
            cells = []
            for k in keys:
                v = _mean(r[i][k] for r in runs)
                cells.append("-" if v is None else f"{v:.1f}" if k.startswith("len") else f"{v:.2f}")
            print(f"| {arm} | {len(runs)} | {runs[0][i]['steps']} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
