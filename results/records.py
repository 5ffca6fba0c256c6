"""Per-prompt records that outlive the runs (issue 47): a thin copy of each run directory that `rlvr compare`
reads as it reads the run, so that anyone can re-test a committed result with a future rule.

    python results/records.py RUNS_DIR OUT_DIR      # e.g. runs/experiments/staleness results/staleness/records
    python results/records.py RUNS_DIR OUT_DIR --eval-label num_prompts_256   # `rlvr eval RUN --num-prompts 256`'s files

Per run: recipe.yaml and eval/step_N.json as written (the per-prompt counts every verdict comes from; an
`rlvr eval` file's `weights` cache path cut to its folder name),
run.json reduced to what `rlvr compare` reads (seed, status, start and end times, base weights, code revision,
fingerprint: no machine paths; a path inside the run's checkout is written relative to it), and metrics.jsonl with every step's STEP_KEYS (what the failure-mode rules and the
figure's panels read: the diagnosis is exact from it) and every THIN-th step and the last in full. The verdicts are
exact from the eval files. A few tens of KB per run.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

THIN = 10
STEP_KEYS = ("step", "reward_mean", "reward_shaped_mean", "accuracy", "kl_mean", "kl_max", "entropy", "len_mean",
             "len_correct", "len_incorrect", "truncated_frac", "clip_low_frac", "clip_high_frac", "zero_std_frac",
             "groups_dropped_frac", "tools/call_rate", "tools/failure_rate", "tools/acc_with_call",
             "tools/acc_without_call")
"""Kept at every step: compare/diagnose.py's rules (KL, entropy, length, reward, accuracy) and the main panels."""
KEEP = ("seed", "status", "started", "ended", "base_weights", "git_commit", "fingerprint", "fingerprint_changes")


def thin_copy(run: Path, out: Path, label: str | None = None) -> None:
    """The records of ``run`` in ``out``; ``label``: the eval files of `rlvr eval RUN ... ` with other settings
    (``RUN/eval/LABEL/step_N.json``, e.g. ``num_prompts_256``) in place of the trainer's."""
    out.mkdir(parents=True, exist_ok=True)
    root = _checkout(run)
    (out / "recipe.yaml").write_text(_relative((run / "recipe.yaml").read_text(encoding="utf-8"), root),
                                     encoding="utf-8")
    info = json.loads((run / "run.json").read_text(encoding="utf-8"))
    if not isinstance(info, dict):
        raise ValueError("run.json is not a JSON object")
    kept = json.dumps({k: info[k] for k in KEEP if k in info}, indent=1)
    (out / "run.json").write_text(_relative(kept, root) + "\n", encoding="utf-8")
    (out / "eval").mkdir(exist_ok=True)
    for f in (out / "eval").glob("step_*.json"):
        f.unlink()
    evals = run / "eval" / label if label else run / "eval"
    files = sorted(evals.glob("step_*.json"))
    if label and not files:
        raise ValueError(f"no eval/{label}/step_*.json")
    for f in files:
        rec = json.loads(f.read_text(encoding="utf-8"))
        if isinstance(rec, dict) and isinstance(rec.get("weights"), str) and Path(rec["weights"]).is_absolute():
            rec["weights"] = Path(rec["weights"]).name  # a cache folder of this machine: its name says which
            (out / "eval" / f.name).write_text(json.dumps(rec), encoding="utf-8")
        else:
            shutil.copyfile(f, out / "eval" / f.name)
    lines = [ln for ln in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines() if ln.strip()]
    keep = [ln if i % THIN == 0 or i == len(lines) - 1 else _step_keys(ln) for i, ln in enumerate(lines)]
    (out / "metrics.jsonl").write_text("\n".join(keep) + "\n", encoding="utf-8")


def _checkout(run: Path) -> Path | None:
    """The checkout the run was made from (the nearest folder above it with a .git): its absolute paths
    in the recipe (a data file or reward function read from the recipe's folder) are written relative."""
    for folder in run.resolve().parents:
        if (folder / ".git").exists():
            return folder
    return None


def _relative(text: str, root: Path | None) -> str:
    return text if root is None else text.replace(f"{root}/", "")


def _step_keys(line: str) -> str:
    """One metrics line cut to STEP_KEYS (a line that is not a JSON object is kept as it is: compare names it)."""
    try:
        row = json.loads(line)
    except ValueError:
        return line
    if not isinstance(row, dict):
        return line
    return json.dumps({k: row[k] for k in STEP_KEYS if k in row})


def main(argv: list[str]) -> int:
    label = None
    if len(argv) == 4 and argv[2] == "--eval-label":
        argv, label = argv[:2], argv[3]
    if len(argv) != 2:
        print("\n".join(x.strip() for x in __doc__.strip().splitlines()[2:4]), file=sys.stderr)
        return 2
    src, dst = Path(argv[0]), Path(argv[1])
    runs = sorted(p for p in src.iterdir() if (p / "recipe.yaml").is_file() and (p / "eval").is_dir())
    done = 0
    for run in runs:
        try:
            thin_copy(run, dst / run.name, label)
            done += 1
        except (OSError, ValueError) as e:  # a run without run.json or with a damaged one: the rest go on
            print(f"skipped {run.name}: {e}", file=sys.stderr)
    print(f"{done} of {len(runs)} run(s) -> {dst}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
