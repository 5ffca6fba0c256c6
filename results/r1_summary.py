"""Summarise the R1-style pipeline: each stage's final evaluation on the same held-out prompts and seed.

    python results/r1_summary.py runs/experiments/r1 results/r1      # from the runs: writes results/r1/records too
    python results/r1_summary.py results/r1/records results/r1      # re-derive from the committed records alone

From the runs it first writes per-prompt records (results/records.py's thin copy of each stage's run, and
rejection.json: how many sampled responses rejection sampling kept), then summarises from the records, so the
committed summary is what the records give. Every stage evaluates n=16 samples on the same 64 held-out
prompts with sampling seed 1234. summary.md: each stage's numbers, each stage against the one before it
paired by prompt with rlvr's primary test (compare/crossed.py; one run per stage: the prompt-clustered paired
test, whose variance covers the prompts and the samples but not training seeds) with its MDE and secondary
lines, the RL and SFT stages re-run on training seed 3 against the same stage before them (the pipeline trains with
seed 0: does each verdict hold on a seed no stage used?), and provenance.
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
    ("4_sft-seed3", "2_rl", "SFT on rejection-sampled correct responses, training seed 3"),
    ("5_rl-seed3", "4_sft", "RL again, training seed 3"),
]
"""Each RL stage re-run on a training seed no stage uses, from the same model: (run, the stage it starts
from, label). Its verdict against that stage is the stage's claim checked on an unseen seed."""


WIDER = "num_prompts_256"
"""`rlvr eval RUN --steps LAST --num-prompts 256`: the same checkpoints on 256 held-out prompts, for the
comparisons whose difference is below the 64 prompts' MDE (WIDER_PAIRS)."""
WIDER_PAIRS = [("2_rl", "4_sft"), ("4_sft", "5_rl"), ("2_rl", "4_sft-seed3"), ("4_sft", "5_rl-seed3")]


def last_eval(run: Path, sub: str = "") -> dict | None:
    files = sorted((run / "eval" / sub).glob("step_*.json"), key=lambda p: int(p.stem.split("_")[1]))
    return json.loads(files[-1].read_text()) if files else None


def stage_against_previous(prev: tuple[str, dict], cur: tuple[str, dict]) -> str:
    """One line: ``cur`` against ``prev`` paired by prompt, by the primary test with its MDE and the
    secondary lines (`rlvr compare`'s sentence). Each pair of stages is its own question, tested at level
    0.05 (no Holm family: the stages are a chain, not arms against one control)."""
    from rlvr_cli.compare.against import compare_records
    from rlvr_cli.compare.summary import arm_sentence

    arm = compare_records((prev[0], [prev[1]]), [(cur[0], [cur[1]])])["arms"][cur[0]]
    return "- " + arm_sentence(f"`{cur[0]}`", arm, f"`{prev[0]}`", None, None, curve_line=False)


def provenance(runs: Path) -> str:
    """The untrained start's weights fingerprint and the code revisions of the stages' runs."""
    import yaml

    infos = {}
    for d in [d for d, _ in STAGES] + [d for d, _, _ in RERUNS]:
        try:
            infos[d] = json.loads((runs / d / "run.json").read_text())
        except (OSError, ValueError):
            continue
    first = infos.get(STAGES[0][0], {})
    revs = sorted({str(i.get("git_commit"))[:12] for i in infos.values() if i.get("git_commit")})
    try:
        model = (yaml.safe_load((runs / STAGES[0][0] / "recipe.yaml").read_text()) or {}).get("model", {}).get("name", "?")
    except (OSError, ValueError, AttributeError):
        model = "?"
    return (f"Provenance: the pipeline starts from {model} (base weights {first.get('base_weights', 'not recorded')}); "
            f"code revision{'s' if len(revs) > 1 else ''}: {', '.join(revs) or 'not recorded'}.")


def write_records(runs: Path, records: Path) -> None:
    """Each stage's run as a thin copy (results/records.py) and rejection.json, the kept/sampled counts."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from records import thin_copy

    for d in [d for d, _ in STAGES] + [d for d, _, _ in RERUNS]:
        if (runs / d / "run.json").is_file():
            thin_copy(runs / d, records / d)
            wider = runs / d / "eval" / WIDER
            if wider.is_dir():  # `rlvr eval RUN --num-prompts 256`'s files, kept beside the trainer's
                (records / d / "eval" / WIDER).mkdir(exist_ok=True)
                for f in wider.glob("step_*.json"):
                    rec = json.loads(f.read_text())
                    if isinstance(rec.get("weights"), str):
                        rec["weights"] = Path(rec["weights"]).name  # a cache folder of this machine
                    (records / d / "eval" / WIDER / f.name).write_text(json.dumps(rec))
    counts = {name: sum(1 for _ in open(runs / f)) if (runs / f).is_file() else 0
              for name, f in (("sampled", "3_samples.jsonl"), ("kept", "3_correct.jsonl"))}
    (records / "rejection.json").write_text(json.dumps(counts) + "\n")


def table_row(label: str, d: str, e: dict) -> str:
    pk, mk = e["pass_at_k"], e["maj_at_k"]
    return (f"| {label} | `{d}` | {e['step']} | {pk['1']:.3f} | {pk.get('16', float('nan')):.3f} | "
            f"{mk.get('16', float('nan')):.3f} | {e['len_mean']:.1f} |")


def main(runs: Path, out: Path) -> None:
    if (runs / "3_samples.jsonl").is_file():  # the pipeline's runs: the summary comes from their records
        write_records(runs, out / "records")
        runs = out / "records"
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
    counts = json.loads((runs / "rejection.json").read_text()) if (runs / "rejection.json").is_file() else {}
    n_s, n_k = counts.get("sampled", 0), counts.get("kept", 0)
    text = (
        "# R1-style pipeline: cold-start SFT -> RL -> rejection sampling -> SFT -> RL\n\n"
        "Commands: `bash results/r1_pipeline.sh` (recipes in `recipes/experiments/r1/`). Every stage is "
        "evaluated with n = 16 samples on the same 64 held-out prompts and sampling seed.\n\n"
        + "\n".join(rows)
        + (f"\n\nRejection sampling kept {n_k} of {n_s} sampled responses ({100 * n_k / max(1, n_s):.0f}%) as SFT data.\n"
           if counts else "\n\nRejection sampling: no counts recorded (rejection.json).\n")
    )
    if base is not None:
        text += f"\nThe cold-start model as RL's step 0: pass@1 {base['pass_at_k']['1']:.3f}.\n"
    if len(finals) > 1:
        text += ("\nEach stage against the one before it, paired by prompt (later - earlier; rlvr's primary test on "
                 "per-prompt pass@1, each pair at level 0.05, MDE at 80% power; one run per stage, so training-seed "
                 "noise is not in these intervals: the seed-3 re-runs below are the check; docs/statistics.md):\n\n"
                 + "\n".join(stage_against_previous(a, b) for a, b in zip(finals, finals[1:])) + "\n")
    evals = dict(finals)
    reruns = [(d, before, label, last_eval(runs / d)) for d, before, label in RERUNS]
    reruns = [(d, before, label, e) for d, before, label, e in reruns if e is not None and before in evals]
    if reruns:
        text += ("\nThe stages again on training seed 3, which no stage above uses, from the same model and data, "
                 "each against the stage before it (paired as above):\n\n"
                 + "\n".join(rows[:2] + [table_row(label, d, e) for d, _, label, e in reruns]) + "\n\n"
                 + "\n".join(stage_against_previous((before, evals[before]), (d, e)) for d, before, _, e in reruns)
                 + "\n")
    wider = [((a, last_eval(runs / a, WIDER)), (b, last_eval(runs / b, WIDER))) for a, b in WIDER_PAIRS]
    wider = [(x, y) for x, y in wider if x[1] is not None and y[1] is not None]
    if wider:
        text += ("\nThe same checkpoints on 256 held-out prompts (`rlvr eval RUN --num-prompts 256`, n = 16; "
                 "the 64 prompts above are among them), for the differences below the 64 prompts' MDE:\n\n"
                 + "\n".join(stage_against_previous(x, y) for x, y in wider) + "\n")
    text += "\n" + provenance(runs) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
