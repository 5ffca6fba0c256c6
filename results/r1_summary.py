"""Summarise the R1-style pipeline: each stage's final evaluation on the same held-out prompts and seed.

    python results/r1_summary.py runs/experiments/r1 results/r1

Reads the runs' eval files (every stage evaluates n=16 samples on the same 64 held-out prompts
with sampling seed 1234), their run.json (base weights, code revision) and the rejection-sampling file,
and writes summary.md: each stage's numbers, each stage against the one before it paired by prompt
(the bootstrap interval and exact McNemar test of `rlvr compare --control`, docs/statistics.md; one run
per stage, so the interval covers the prompts and the samples, not training seeds), both RL stages re-run
on training seed 3 against the same stage before them (the pipeline trains with seed 0), and provenance.
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
RERUNS = [
    ("2_rl-seed3", "1_cold_start", "RL (GRPO) from the cold start, training seed 3"),
    ("5_rl-seed3", "4_sft", "RL again, training seed 3"),
]
"""Each RL stage re-run on a training seed no stage uses, from the same model: (run, the stage it starts
from, label). Its verdict against that stage is the stage's claim checked on an unseen seed."""


def last_eval(run: Path) -> dict | None:
    files = sorted((run / "eval").glob("step_*.json"), key=lambda p: int(p.stem.split("_")[1]))
    return json.loads(files[-1].read_text()) if files else None


def stage_against_previous(prev: tuple[str, dict], cur: tuple[str, dict]) -> str:
    """One line: pass@1 of ``cur`` - ``prev`` paired by prompt, its 95% bootstrap interval, McNemar, verdict."""
    from rlvr_cli.compare.paired import (
        arm_from_records, pair_arms, paired_difference, paired_mcnemar, per_prompt_scores, legacy_verdict as verdict,  # the rule these results were judged by (docs/statistics.md)
    )
    from rlvr_cli.errors import UserError

    try:
        a, b = (arm_from_records(name, [None], [rec]) for name, rec in (prev, cur))
        pairing = pair_arms(a, b)
        diff = paired_difference(per_prompt_scores(pairing.control), per_prompt_scores(pairing.other))
        test = paired_mcnemar(pairing)
    except UserError as e:
        return f"- `{cur[0]}` against `{prev[0]}`: not paired ({e.problems[0]})"
    mc = (f"; McNemar (majority) {test.only_control} prompts right only before vs {test.only_other} only after, "
          f"p = {test.p_value:.2g}") if test is not None else ""
    return (f"- `{cur[0]}` against `{prev[0]}`: **{verdict(diff, test)}**, pass@1 {diff.mean:+.3f} "
            f"[{diff.low:+.3f}, {diff.high:+.3f}]{mc}")


def provenance(runs: Path) -> str:
    """The untrained start's weights fingerprint and the code revisions of the stages' runs."""
    infos = {}
    for d in [d for d, _ in STAGES] + [d for d, _, _ in RERUNS]:
        try:
            infos[d] = json.loads((runs / d / "run.json").read_text())
        except (OSError, ValueError):
            continue
    first = infos.get(STAGES[0][0], {})
    revs = sorted({str(i.get("git_commit"))[:12] for i in infos.values() if i.get("git_commit")})
    model = first.get("model") or "?"
    model = model.get("ref", "?") if isinstance(model, dict) else model
    return (f"Provenance: the pipeline starts from {model} (base weights {first.get('base_weights', 'not recorded')}); "
            f"code revision{'s' if len(revs) > 1 else ''}: {', '.join(revs) or 'not recorded'}.")


def table_row(label: str, d: str, e: dict) -> str:
    pk, mk = e["pass_at_k"], e["maj_at_k"]
    return (f"| {label} | `{d}` | {e['step']} | {pk['1']:.3f} | {pk.get('16', float('nan')):.3f} | "
            f"{mk.get('16', float('nan')):.3f} | {e['len_mean']:.1f} |")


def main(runs: Path, out: Path) -> None:
    rows = ["| stage | run | step | pass@1 | pass@16 | maj@16 | mean length |", "|---|---|---|---|---|---|---|"]
    base = json.loads((runs / "2_rl" / "eval" / "step_0.json").read_text()) if (runs / "2_rl" / "eval" / "step_0.json").is_file() else None
    finals = []
    for d, label in STAGES:
        e = last_eval(runs / d)
        if e is not None:
            finals.append((d, e))
        if e is None:
            rows.append(f"| {label} | {d} | - | - | - | - | - |")
            continue
        rows.append(table_row(label, d, e))
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
    if len(finals) > 1:
        text += ("\nEach stage against the one before it, paired by prompt (other - before; 95% percentile "
                 "bootstrap over the 64 prompts, 10,000 resamples, seed 0; exact McNemar on per-prompt majority "
                 "correctness; one run per stage, so training-seed noise is not in these intervals):\n\n"
                 + "\n".join(stage_against_previous(a, b) for a, b in zip(finals, finals[1:])) + "\n")
    evals = dict(finals)
    reruns = [(d, before, label, last_eval(runs / d)) for d, before, label in RERUNS]
    reruns = [(d, before, label, e) for d, before, label, e in reruns if e is not None and before in evals]
    if reruns:
        text += ("\nThe RL stages again on training seed 3, which no stage above uses, from the same model, each "
                 "against the stage it starts from (paired as above):\n\n"
                 + "\n".join(rows[:2] + [table_row(label, d, e) for d, _, label, e in reruns]) + "\n\n"
                 + "\n".join(stage_against_previous((before, evals[before]), (d, e)) for d, before, _, e in reruns)
                 + "\n")
    text += "\n" + provenance(runs) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
