"""tools/agree.py: two regenerations' verdicts side by side; the exit status says whether they agree."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def summary(directory: Path, experiment: str, collapse: dict, pass1: float) -> None:
    none3 = {"detected": 0, "possible": 0, "none": 3, "n/a": 0}
    variant = {"label": "clip_higher", "final": {"pass@1": {"mean": pass1, "std": 0.01}, "pass@k": {"mean": 0.9}},
               "diagnosis": {"kl_explosion": none3, "entropy_collapse": collapse, "length_inflation": none3}}
    (directory / experiment).mkdir(parents=True)
    (directory / experiment / "summary.json").write_text(json.dumps({"variants": [variant]}))


def agree(a: Path, b: Path):
    return subprocess.run([sys.executable, "tools/agree.py", str(a), str(b)], cwd=ROOT, capture_output=True,
                          text=True)


def test_the_same_majority_verdict_agrees_whatever_the_means(tmp_path):
    summary(tmp_path / "a", "entropy", {"detected": 3, "possible": 0, "none": 0}, 0.36)
    summary(tmp_path / "b", "entropy", {"detected": 2, "possible": 1, "none": 0}, 0.41)
    out = agree(tmp_path / "a", tmp_path / "b")
    assert out.returncode == 0, out.stdout
    assert "entropy_collapse 3/0/0 | 2/1/0" in out.stdout and "0.360±0.010 | 0.410±0.010" in out.stdout


def test_a_different_majority_verdict_is_flagged_and_fails(tmp_path):
    summary(tmp_path / "a", "entropy", {"detected": 3, "possible": 0, "none": 0}, 0.36)
    summary(tmp_path / "b", "entropy", {"detected": 1, "possible": 0, "none": 2}, 0.36)
    out = agree(tmp_path / "a", tmp_path / "b")
    assert out.returncode == 1
    assert "DIFFERS" in out.stdout and "1 verdict(s) differ" in out.stdout


def test_an_empty_directory_is_an_error_not_agreement(tmp_path):
    summary(tmp_path / "a", "entropy", {"detected": 3}, 0.36)
    (tmp_path / "b").mkdir()
    out = agree(tmp_path / "a", tmp_path / "b")
    assert out.returncode == 2 and "no */summary.json" in out.stderr


def test_a_summary_that_is_not_a_comparison_is_skipped_with_its_name(tmp_path):
    summary(tmp_path / "a", "entropy", {"detected": 3}, 0.36)
    summary(tmp_path / "b", "entropy", {"detected": 3}, 0.36)
    (tmp_path / "b" / "kl").mkdir()
    (tmp_path / "b" / "kl" / "summary.json").write_text('{"runs": []}')  # no variants: not rlvr compare's
    out = agree(tmp_path / "a", tmp_path / "b")
    assert out.returncode == 0, out.stderr
    assert "kl" in out.stderr and "not an `rlvr compare` summary" in out.stderr
