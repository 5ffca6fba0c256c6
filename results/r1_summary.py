"""Summarise the R1-style pipeline: each stage's final evaluation on the same held-out prompts and seed.

    python results/r1_summary.py runs/experiments/r1 results/r1

Reads only the runs' eval files (every stage evaluates n=16 samples on the same 64 held-out prompts
with sampling seed 1234) and the rejection-sampling file, and writes summary.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

STAGES = [
    ("1_cold_start", "cold-start SFT"),
    ("2_rl", "RL (GRPO) from the cold start"),
    ("4_sft", "SFT on rejection-sampled correct responses"),
    ("5_rl", "RL again"),
]


def last_eval(run: Path) -> dict | None:
    files = sorted((run / "eval").glob("step_*.json"), key=lambda p: int(p.stem.split("_")[1]))
    return json.loads(files[-1].read_text()) if files else None


def main(runs: Path, out: Path) -> None:
    rows = ["| stage | run | step | pass@1 | pass@16 | maj@16 | mean length |", "|---|---|---|---|---|---|---|"]
    base = json.loads((runs / "2_rl" / "eval" / "step_0.json").read_text()) if (runs / "2_rl" / "eval" / "step_0.json").is_file() else None
    for d, label in STAGES:
        e = last_eval(runs / d)
        if e is None:
            rows.append(f"| {label} | {d} | - | - | - | - | - |")
            continue
        pk, mk = e["pass_at_k"], e["maj_at_k"]
        rows.append(f"| {label} | `{d}` | {e['step']} | {pk['1']:.3f} | {pk.get('16', float('nan')):.3f} | "
                    f"{mk.get('16', float('nan')):.3f} | {e['len_mean']:.1f} |")
    samples = runs / "3_samples.jsonl"
    kept = runs / "3_correct.jsonl"
    n_s = sum(1 for _ in open(samples)) if samples.is_file() else 0
    n_k = sum(1 for _ in open(kept)) if kept.is_file() else 0
    text = (
        "# R1-style pipeline: cold-start SFT -> RL -> rejection sampling -> SFT -> RL\n\n"
        "Commands: `bash results/r1_pipeline.sh` (recipes in `recipes/experiments/r1/`). Every stage is "
        "evaluated with n = 16 samples on the same 64 held-out prompts and sampling seed.\n\n"
        + "\n".join(rows)
        + f"\n\nRejection sampling kept {n_k} of {n_s} sampled responses ({100 * n_k / max(1, n_s):.0f}%) as SFT data.\n"
    )
    if base is not None:
        text += f"\nThe cold-start model as RL's step 0: pass@1 {base['pass_at_k']['1']:.3f}.\n"
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
