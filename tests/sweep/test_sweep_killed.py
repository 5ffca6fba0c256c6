"""`rlvr sweep` training real (tiny) runs where it used to leave things behind: killed outright (kill -9),
its runs and fork server stop and the same command, run again at once, waits for them and resumes; with
--out nothing lands outside it (the comparison, a prerequisite and the scripts' logs move under it), and a
running run prints progress lines."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import tiny_run
from rlvr_cli.run_files import holder_pid
from rlvr_cli.sweep import view
from rlvr_cli.sweep.state import read_run

ROOT = Path(__file__).resolve().parents[2]


def _sweep_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "rlvr_cli", "sweep", *args]


def _children(pid: int) -> list[int]:
    """The processes ``pid`` started (Linux /proc), and theirs."""
    kids = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        kids += [int(k) for k in (task / "children").read_text().split()]
    return kids + [g for k in kids for g in _children(k)]


def _gone(pid: int) -> bool:
    """Exited (a zombie not yet reaped by init counts as exited)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def test_a_killed_sweep_stops_its_runs_and_server_and_the_same_command_resumes_at_once(tmp_path):
    steps = 12
    spec = tmp_path / "spec.yaml"
    sets = tiny_run(f"steps={steps}", "checkpoint.every=1", "checkpoint.keep_last=1", "model.name=builtin:tiny-init")
    spec.write_text(f"base: grpo\nset: [{', '.join(sets)}]\nseeds: [0]\ncompare: null\n")
    out, run = tmp_path / "out", tmp_path / "out" / "grpo-seed0"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    first = subprocess.Popen(_sweep_argv(str(spec), "--out", str(out)), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 180
    while read_run(run, with_recipe=False).step < 1:
        assert first.poll() is None and time.monotonic() < deadline, "the run did not start"
        time.sleep(0.1)
    left = [*_children(first.pid), holder_pid(run)]  # the fork server, the watcher, the run
    assert len(left) >= 3 and None not in left
    first.send_signal(signal.SIGKILL)
    first.wait()
    again = subprocess.run(_sweep_argv(str(spec), "--out", str(out)), capture_output=True, text=True, env=env,
                           timeout=300)  # at once: the old run may still be stopping
    assert again.returncode == 0, again.stderr
    assert all(_gone(pid) for pid in left), [p for p in left if not _gone(p)]
    record = json.loads((out / "sweep.json").read_text())["runs"]
    assert [(r["state"], r["result"]) for r in record] == [("resume", "finished")]  # it resumed, not restarted
    steps_logged = [json.loads(ln)["step"] for ln in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps_logged == list(range(1, steps + 1))


BODY = ("extends: grpo\nmodel:\n  name: {model}\nrollout:\n  prompts_per_step: 2\n  group_size: 2\n"
        "  max_new_tokens: 8\neval:\n  at_start: false\n  every: 0\n  n: 2\n  num_prompts: 2\n"
        "checkpoint:\n  every: 0\nsteps: 2\n")


def test_with_out_nothing_lands_outside_it_and_a_running_run_prints_progress(cli, tmp_path, monkeypatch):
    """The spec's comparison and its prerequisite point elsewhere (as results/*/sweep.yaml point at results/ and
    runs/experiments/); with --out they go under it, the arm loading the prerequisite from there."""
    elsewhere = tmp_path / "elsewhere"
    (tmp_path / "need.yaml").write_text(BODY.format(model="builtin:tiny-init"))
    (tmp_path / "arm.yaml").write_text(BODY.format(model=elsewhere / "base"))
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"seeds: [0]\nneeds:\n  - {{recipe: need.yaml, out: {elsewhere / 'base'}}}\n"
                    f"variants:\n  - {{name: a, recipe: arm.yaml}}\ncompare: {{out: {elsewhere / 'cmp'}}}\n")
    monkeypatch.setattr(view, "PROGRESS_EVERY_S", 0.0)  # a line at every look at the running runs
    out = tmp_path / "out"
    res = cli("sweep", str(spec), "--out", str(out), "--script", "note=echo hello")
    assert res.code == 0, res.stderr
    assert not elsewhere.exists()
    assert read_run(out / "base").status == "finished" and read_run(out / "a-seed0").status == "finished"
    assert read_run(out / "a-seed0").recipe["model"]["name"] == str(out / "base")
    assert (out / "compare" / "summary.md").read_text().startswith("# rlvr compare")
    assert "hello" in (out / "scripts" / "note.log").read_text()
    progress = [ln for ln in res.stderr.splitlines() if ln.startswith("[progress] ")]
    assert any(ln.startswith("[progress] a-seed0: step ") and "/2" in ln for ln in progress), res.stderr
