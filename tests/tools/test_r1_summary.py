"""results/r1_summary.py: each stage against the one before it, paired by prompt, and the provenance line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "results"))  # the scripts are files, not a package
import r1_summary  # noqa: E402  results/r1_summary.py



def _stage(runs: Path, name: str, correct: list[int], n: int = 4) -> None:
    """A stage's run: run.json and one eval file whose prompt i has correct[i] of n samples right."""
    (runs / name / "eval").mkdir(parents=True)
    (runs / name / "run.json").write_text(json.dumps({"model": {"ref": "builtin:tiny-init"},
                                                      "base_weights": "blake2b:feed", "git_commit": "abc123def4567"}))
    (runs / name / "recipe.yaml").write_text("model:\n  name: builtin:tiny-init\n")
    (runs / name / "metrics.jsonl").write_text(json.dumps({"step": 1, "accuracy": 0.5}) + "\n")
    rec = {"step": 10, "n": n, "pass_at_k": {"1": sum(correct) / (n * len(correct)), "16": 1.0},
           "maj_at_k": {"16": 0.5}, "len_mean": 20.0,
           "per_prompt": [{"id": f"p{i}", "correct": c} for i, c in enumerate(correct)],
           "per_prompt_majority": [2 * c > n for c in correct]}
    (runs / name / "eval" / "step_10.json").write_text(json.dumps(rec))


def test_stages_are_paired_by_prompt_with_a_verdict_and_provenance(tmp_path):
    runs = tmp_path / "runs"
    _stage(runs, "1_cold_start", [0] * 20 + [1] * 20)
    _stage(runs, "2_rl", [4] * 20 + [3] * 20)  # every prompt gains 2-4 of 4: better
    _stage(runs, "4_sft", [4] * 20 + [3] * 19 + [4])  # one prompt gains one sample: not distinguishable
    r1_summary.main(runs, tmp_path / "out")
    text = (tmp_path / "out" / "summary.md").read_text()
    assert "- **`2_rl`**: **better** than `1_cold_start` at step 10: pass@1 +0.750 [" in text
    assert "McNemar (majority): 0 prompts right only under `1_cold_start`, 40 only under `2_rl`" in text
    assert "- **`4_sft`**: **not distinguishable at this budget** from `2_rl` at step 10: pass@1 +0.006" in text
    assert "MDE " in text.split("`4_sft`**")[1].split("\n")[0]  # never a verdict without its power
    assert "`5_rl`" not in text.split("Each stage")[1]  # a missing stage is skipped, not paired
    assert "Rejection sampling: no counts recorded" in text
    assert "starts from builtin:tiny-init (base weights blake2b:feed); code revision: abc123def456." in text


def test_a_stage_rerun_on_another_seed_is_paired_against_the_stage_it_starts_from(tmp_path):
    runs = tmp_path / "runs"
    _stage(runs, "1_cold_start", [0] * 40)
    _stage(runs, "2_rl", [4] * 20 + [3] * 20)
    _stage(runs, "4_sft", [4] * 40)
    _stage(runs, "2_rl-seed3", [4] * 20 + [2] * 20)  # against 1_cold_start (its start): better
    r1_summary.main(runs, tmp_path / "out")
    rerun = (tmp_path / "out" / "summary.md").read_text().split("training seed 3, which no stage above uses")[1]
    assert "| RL (GRPO) from the cold start, training seed 3 | `2_rl-seed3` | 10 | 0.750 |" in rerun
    assert "- **`2_rl-seed3`**: **better** than `1_cold_start` at step 10: pass@1 +0.750" in rerun
    assert "5_rl-seed3" not in rerun  # a re-run not made is left out


def test_from_the_runs_it_writes_records_and_the_records_alone_give_the_same_summary(tmp_path):
    runs = tmp_path / "runs"
    _stage(runs, "1_cold_start", [0] * 20 + [1] * 20)
    _stage(runs, "2_rl", [4] * 20 + [3] * 20)
    (runs / "3_samples.jsonl").write_text("{}\n" * 8)
    (runs / "3_correct.jsonl").write_text("{}\n" * 5)
    _stage(runs, "4_sft", [4] * 40)
    r1_summary.main(runs, tmp_path / "out")
    records = tmp_path / "out" / "records"
    assert sorted(p.name for p in records.iterdir()) == ["1_cold_start", "2_rl", "4_sft", "rejection.json"]
    assert json.loads((records / "rejection.json").read_text()) == {"sampled": 8, "kept": 5}
    first = (tmp_path / "out" / "summary.md").read_text()
    assert "kept 5 of 8 sampled responses (62%)" in first
    r1_summary.main(records, tmp_path / "again")
    assert (tmp_path / "again" / "summary.md").read_text() == first
