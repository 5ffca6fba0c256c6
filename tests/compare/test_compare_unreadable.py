"""Files and directories `rlvr compare` may not read (issue 44: an unreadable TRL or verl log was an
internal error). Each is skipped with a line naming it and why; the readable runs are still compared.
Run as a user without root's right to read anything: as root, the command drops CAP_DAC_OVERRIDE and
CAP_DAC_READ_SEARCH (setpriv) so that file modes apply."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

STEPS = "".join(json.dumps({"step": s, "data": {"critic/score/mean": 0.1 * s}}) + "\n" for s in (1, 2, 3))
TRL_STATE = json.dumps({"log_history": [{"step": 1, "loss": 1.0}, {"step": 2, "loss": 0.5}]})


def _unprivileged() -> list[str]:
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: file modes cannot be made to apply")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"]


def _cases(root: Path) -> dict[str, Path]:
    """name -> the argument given to `rlvr compare`, each unreadable in its own way."""
    out = {}
    (root / "verl_file.jsonl").write_text(STEPS)
    out["a verl log without read permission"] = root / "verl_file.jsonl"
    (root / "closed").mkdir()
    (root / "closed" / "log.jsonl").write_text(STEPS)
    out["a verl log in a directory that cannot be entered"] = root / "closed" / "log.jsonl"
    (root / "trl_file").mkdir()
    (root / "trl_file" / "trainer_state.json").write_text(TRL_STATE)
    out["a TRL trainer_state.json without read permission"] = root / "trl_file"
    (root / "trl_dir").mkdir()
    (root / "trl_dir" / "trainer_state.json").write_text(TRL_STATE)
    out["a TRL directory that cannot be entered"] = root / "trl_dir"
    (root / "run_dir").mkdir()
    (root / "run_dir" / "metrics.jsonl").write_text('{"step": 1}\n')
    out["an rlvr run directory that cannot be entered"] = root / "run_dir"
    return out


def _close(root: Path) -> None:
    for path in (root / "verl_file.jsonl", root / "trl_file" / "trainer_state.json"):
        path.chmod(0)
    for path in (root / "closed", root / "trl_dir", root / "run_dir"):
        path.chmod(0)


def test_unreadable_logs_and_runs_are_skipped_naming_each(tmp_path):
    prefix = _unprivileged()
    good = tmp_path / "good"
    good.mkdir()
    (good / "ok.jsonl").write_text(STEPS)
    hydra = good / ".hydra"  # a verl log whose .hydra config cannot be read still compares
    hydra.mkdir()
    (hydra / "config.yaml").write_text("algorithm: {adv_estimator: grpo}\n")
    cases = _cases(tmp_path)
    _close(tmp_path)
    hydra.chmod(0)
    out = tmp_path / "cmp"
    tmp_path.chmod(0o755)
    try:
        res = subprocess.run([*prefix, sys.executable, "-m", "rlvr_cli", "compare", "good/ok.jsonl",
                              *(str(p.relative_to(tmp_path)) for p in cases.values()), "--out", "cmp"],
                             capture_output=True, text=True, timeout=300, cwd=tmp_path,
                             env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    finally:
        for p in [hydra, *(tmp_path / n for n in ("closed", "trl_dir", "run_dir"))]:
            p.chmod(0o755)
    text = " ".join((res.stdout + res.stderr).split())
    assert res.returncode == 0, text[-3000:]
    assert "internal error" not in text and "Traceback" not in text
    for name, path in cases.items():
        given = path.relative_to(tmp_path)
        assert f"skipped {given}:" in text and "Permission denied" in text.split(f"skipped {given}:", 1)[1][:300], (name, text[-3000:])
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["variants"]) == 1 and len(summary["skipped"]) == len(cases)
