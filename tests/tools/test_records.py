"""results/records.py: the thin copy of a run that `rlvr compare` re-derives verdicts and diagnoses from."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "results"))
import records  # noqa: E402


def _run(path: Path, steps: int = 23) -> Path:
    (path / "eval").mkdir(parents=True)
    (path / "recipe.yaml").write_text("name: r\nseed: 0\n")
    (path / "run.json").write_text(json.dumps({"seed": 0, "status": "finished", "path": "/work/x", "env": {}}))
    (path / "eval" / "step_0.json").write_text('{"step": 0}')
    rows = [{"step": s, "entropy": 1.0 / s, "kl_mean": 0.1, "grad_norm": 2.0, "lr": 1e-3} for s in range(1, steps + 1)]
    (path / "metrics.jsonl").write_text("\n".join(map(json.dumps, rows)) + "\n")
    return path


def test_every_step_keeps_what_the_diagnosis_reads_and_every_tenth_is_whole(tmp_path):
    records.thin_copy(_run(tmp_path / "run"), tmp_path / "out")
    rows = [json.loads(x) for x in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, 24))
    assert all("entropy" in r and "kl_mean" in r for r in rows)
    whole = [r["step"] for r in rows if "grad_norm" in r]
    assert whole == [1, 11, 21, 23]  # lines 0, 10, 20 and the last
    assert json.loads((tmp_path / "out" / "run.json").read_text()) == {"seed": 0, "status": "finished"}
    assert (tmp_path / "out" / "eval" / "step_0.json").is_file()


def test_a_damaged_run_is_skipped_and_the_rest_copied(tmp_path, capsys):
    _run(tmp_path / "runs" / "a")
    bad = _run(tmp_path / "runs" / "b")
    (bad / "run.json").write_text("[1, 2]")
    assert records.main([str(tmp_path / "runs"), str(tmp_path / "out")]) in (0, 1)
    assert (tmp_path / "out" / "a" / "metrics.jsonl").is_file()
