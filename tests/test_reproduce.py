"""results/reproduce.py: the commands it would run (dry run), with --threads and --set passed to every training run."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load():
    spec = importlib.util.spec_from_file_location("reproduce", ROOT / "results" / "reproduce.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["reproduce"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_dry_run_passes_threads_and_overrides_to_every_training_run(tmp_path):
    out = subprocess.run(
        [sys.executable, "results/reproduce.py", "--only", "kl", "--seeds", "2", "--dry-run", "--jobs", "1",
         "--threads", "2", "--set", "steps=5", "--runs", str(tmp_path / "runs")],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    train = [line for line in out if line.startswith("rlvr train")]
    assert len(train) == 6  # 3 variants x 2 seeds
    assert all(line.endswith("--set threads=2 --set steps=5") for line in train)
    assert all(str(tmp_path / "runs" / "kl") in line for line in train)
    assert any(line.startswith("rlvr compare") for line in out)


def test_commands_run_with_this_checkouts_code():
    mod = load()
    assert mod.runnable(["rlvr", "train", "x.yaml"]) == [sys.executable, "-m", "rlvr_cli", "train", "x.yaml"]
    assert mod.runnable(["bash", "results/r1_pipeline.sh"]) == ["bash", "results/r1_pipeline.sh"]
    assert mod.train_command("r.yaml", Path("o"), 3) == ["rlvr", "train", "r.yaml", "--out", "o", "--seed", "3"]
