"""results/staleness_tradeoff.py: pass@1 against the training time summed up to each evaluated step."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "results"))  # the scripts are files, not a package
import staleness_tradeoff  # noqa: E402  results/staleness_tradeoff.py


def _run(root: Path, name: str, step_times: list[float], evals: dict[int, float]) -> None:
    run = root / name
    (run / "eval").mkdir(parents=True)
    rows = [{"step": i + 1, "step_time_s": t} for i, t in enumerate(step_times)]
    lines = [json.dumps(r) for r in rows]
    (run / "metrics.jsonl").write_text("\n".join(lines[:2] + ["{torn"] + lines[2:]) + "\n")  # a torn line is skipped
    for step, p1 in evals.items():
        (run / "eval" / f"step_{step}.json").write_text(json.dumps({"pass_at_k": {"1": p1}}))


def test_each_eval_sits_at_the_training_time_summed_up_to_its_step(tmp_path, capsys):
    _run(tmp_path / "runs", "sync-seed1", [10.0, 10.0, 12.0, 8.0], {0: 0.3, 2: 0.5, 4: 0.7})
    _run(tmp_path / "runs", "overlap1-seed1", [10.0, 5.0, 6.0, 4.0], {0: 0.3, 4: 0.6, 9: 0.9})
    (tmp_path / "runs" / "sync-seed1" / "eval" / "step_3.json").write_text("{}")  # no pass@1: left out, named
    assert staleness_tradeoff.curve(tmp_path / "runs" / "sync-seed1") == [(0, 0.0, 0.3), (2, 20.0, 0.5), (4, 40.0, 0.7)]
    assert staleness_tradeoff.curve(tmp_path / "runs" / "overlap1-seed1") == [(0, 0.0, 0.3), (4, 25.0, 0.6)]  # step 9 never logged
    err = capsys.readouterr().err
    assert "metrics.jsonl line 3: not valid JSON" in err and "step_3.json left out (KeyError" in err
    staleness_tradeoff.main(str(tmp_path / "runs"), str(tmp_path / "out"))
    table = (tmp_path / "out" / "tradeoff.md").read_text()
    assert "| sync-seed1 | 4 | 40 | 0.700 |" in table and (tmp_path / "out" / "tradeoff.png").stat().st_size > 0


def test_no_runs_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as e:
        staleness_tradeoff.main(str(tmp_path / "empty"), str(tmp_path / "out"))
    assert e.value.code == 2 and "no run with a metrics.jsonl under" in capsys.readouterr().err
