"""The real-model staleness pair as one figure: held-out pass@1 against the training time spent to reach it.

    python results/staleness_tradeoff.py [RUNS_DIR] [OUT_DIR]
    # defaults: runs/experiments/staleness_real (rlvr sweep results/staleness/real/sweep.yaml makes it)
    #           results/staleness/real

For each run of RUNS_DIR (sync-seed1, overlap1-seed1) the x axis is the sum of its logged `step_time_s`
up to each evaluated step (training time only: the evaluations are the same work in both arms and are left
out), the y axis that step's pass@1 from eval/step_N.json. Writes tradeoff.png and tradeoff.md (the same
points as a table). Times are those of the machine that made the runs; the accuracies are the same anywhere.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def curve(run: Path) -> list[tuple[int, float, float]]:
    """(step, training seconds up to that step, pass@1) at every evaluated step of one run: metrics.jsonl
    read by rlvr's one reader (a torn line is skipped and named on stderr), an eval file that cannot be read
    or has no pass@1 left out with its name."""
    from rlvr_cli.run_files import eval_files, read_metrics

    log = read_metrics(run)
    for problem in log.problems:
        print(f"{run.name}: {problem}", file=sys.stderr)
    seconds, total = {0: 0.0}, 0.0
    for row in sorted(log.rows, key=lambda r: r["step"]):
        if isinstance(row.get("step_time_s"), (int, float)):
            total += row["step_time_s"]
            seconds[row["step"]] = total
    points = []
    for step, f in eval_files(run):
        try:
            p1 = float(json.loads(f.read_text(encoding="utf-8"))["pass_at_k"]["1"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"{run.name}: {f.name} left out ({type(e).__name__}: {e})", file=sys.stderr)
            continue
        if step in seconds:
            points.append((step, seconds[step], p1))
    return points


def main(runs: str = "runs/experiments/staleness_real", out: str = "results/staleness/real") -> None:
    curves = {run.name: curve(run) for run in sorted(Path(runs).iterdir()) if (run / "metrics.jsonl").is_file()}
    if not curves:
        print(f"error: no run with a metrics.jsonl under {runs}", file=sys.stderr)
        sys.exit(2)
    rows = ["| run | step | training s | pass@1 |", "|---|---|---|---|"]
    rows += [f"| {name} | {step} | {sec:.0f} | {p1:.3f} |" for name, pts in curves.items() for step, sec, p1 in pts]
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "tradeoff.md").write_text(
        "# Staleness on SmolLM2: pass@1 against training time\n\nTraining time: the sum of `step_time_s` up "
        "to the evaluated step (evaluations left out). Made by `python results/staleness_tradeoff.py`.\n\n"
        + "\n".join(rows) + "\n", encoding="utf-8")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name, pts in curves.items():
        ax.plot([s for _, s, _ in pts], [p for _, _, p in pts], marker="o", label=name)
    ax.set_xlabel("training time (s, evaluations excluded)")
    ax.set_ylabel("held-out pass@1")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(out_dir / "tradeoff.png", dpi=120)
    print(f"wrote {out_dir / 'tradeoff.png'}, {out_dir / 'tradeoff.md'}")


if __name__ == "__main__":
    main(*sys.argv[1:])
