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
    rec = {"step": 10, "n": n, "pass_at_k": {"1": sum(correct) / (n * len(correct)), "16": 1.0},
           "maj_at_k": {"16": 0.5}, "len_mean": 20.0,
           "per_prompt": [{"id": f"p{i}", "correct": c} for i, c in enumerate(correct)],
           "per_prompt_majority": [2 * c > n for c in correct]}
    (runs / name / "eval" / "step_10.json").write_text(json.dumps(rec))


def test_stages_are_paired_by_prompt_with_a_verdict_and_provenance(tmp_path):
    runs = tmp_path / "runs"
    _stage(runs, "1_cold_start", [0] * 40)
    _stage(runs, "2_rl", [4] * 40)   # every prompt goes from 0/4 to 4/4: better, McNemar 0 vs 40
    _stage(runs, "4_sft", [4] * 40)  # no change: not distinguishable
    r1_summary.main(runs, tmp_path / "out")
    text = (tmp_path / "out" / "summary.md").read_text()
    assert "`2_rl` against `1_cold_start`: **better**, pass@1 +1.000 [+1.000, +1.000]" in text
    assert "0 prompts right only before vs 40 only after, p = 1.8e-12" in text  # 2 * 0.5**40
    assert "`4_sft` against `2_rl`: **not distinguishable at this budget**, pass@1 +0.000" in text
    assert "`5_rl`" not in text.split("Each stage")[1]  # a missing stage is skipped, not paired
    assert "starts from builtin:tiny-init (base weights blake2b:feed); code revision: abc123def456." in text


def test_a_stage_rerun_on_another_seed_is_paired_against_the_stage_it_starts_from(tmp_path):
    runs = tmp_path / "runs"
    _stage(runs, "1_cold_start", [0] * 40)
    _stage(runs, "2_rl", [4] * 40)
    _stage(runs, "4_sft", [4] * 40)
    _stage(runs, "2_rl-seed3", [4] * 40)  # against 1_cold_start (its start): better; against 4_sft it would be level
    r1_summary.main(runs, tmp_path / "out")
    rerun = (tmp_path / "out" / "summary.md").read_text().split("training seed 3, which no stage above uses")[1]
    assert "| RL (GRPO) from the cold start, training seed 3 | `2_rl-seed3` | 10 | 1.000 |" in rerun
    assert "`2_rl-seed3` against `1_cold_start`: **better**, pass@1 +1.000" in rerun
    assert "5_rl-seed3" not in rerun  # a re-run not made is left out
