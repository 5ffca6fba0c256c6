"""rlvr_cli/sweep/forkserver.py: a run forked from a warm server computes what a fresh process computes,
with its own log, exit status and session; the local backend keeps one server per slot."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import tiny_run
from rlvr_cli.sweep.forkserver import Server, _exit_code, available
from rlvr_cli.sweep.local import Job, LocalBackend

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not available(), reason="needs os.fork")

SMALL = [a for s in tiny_run("rollout.group_size=4", "rollout.max_new_tokens=16", "eval.every=2", "eval.n=4",
                                 without=("eval.at_start",)) for a in ("--set", s)] + ["--seed", "3"]
TIMINGS = ("time_sample_s", "time_verify_s", "time_ref_s", "time_update_s", "step_time_s", "tokens_per_s")


def _numbers(run: Path) -> tuple[list[dict], dict]:
    rows = [{k: v for k, v in json.loads(line).items() if k not in TIMINGS}
            for line in (run / "metrics.jsonl").read_text().splitlines()]
    evals = {f.name: {k: v for k, v in json.loads(f.read_text()).items() if k != "sample_s"}
             for f in sorted((run / "eval").glob("*.json"))}
    return rows, evals


def _wait(backend: LocalBackend, n: int, timeout: float = 240) -> dict[str, int]:
    ended, deadline = {}, time.monotonic() + timeout
    while len(ended) < n:
        assert time.monotonic() < deadline, "the runs did not end"
        ended.update({name: rc for name, rc, _ in backend.poll()})
        time.sleep(0.05)
    return ended


def test_a_forked_run_computes_what_a_fresh_process_computes(tiny_base, tmp_path):
    args = ["train", "dr_grpo", "--set", f"model.name={tiny_base}", *SMALL]
    fresh = subprocess.run([sys.executable, "-m", "rlvr_cli", *args, "--out", str(tmp_path / "fresh")],
                           cwd=ROOT, capture_output=True, text=True)
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    backend = LocalBackend(fork=True)
    try:
        backend.start(Job("forked", [*args, "--out", str(tmp_path / "forked")], tmp_path / "forked.log", cpus=1))
        assert _wait(backend, 1) == {"forked": 0}, (tmp_path / "forked.log").read_text()
    finally:
        backend.close()
    rows, evals = _numbers(tmp_path / "forked")
    assert len(rows) == 2 and evals  # the comparison below is not vacuous
    assert (rows, evals) == _numbers(tmp_path / "fresh")
    log = (tmp_path / "forked.log").read_text()
    assert log.startswith("== rlvr train dr_grpo") and "run directory:" in log  # its header, then its own output


def test_each_run_has_its_own_exit_status_and_log_and_a_server_serves_one_slot_after_another(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps: [\n")
    backend = LocalBackend(fork=True)
    try:
        backend.start(Job("bad", ["train", str(bad)], tmp_path / "bad.log", cpus=1))
        backend.start(Job("help", ["train", "--help"], tmp_path / "help.log", cpus=1))
        assert len(backend._servers) == 2  # one per run at once
        first = _wait(backend, 2)
        backend.start(Job("again", ["--help"], tmp_path / "again.log", cpus=1))
        assert len(backend._servers) == 2  # an idle server takes the next run
        assert {**first, **_wait(backend, 1)} == {"bad": 2, "help": 0, "again": 0}
    finally:
        backend.close()
    assert str(bad) in (tmp_path / "bad.log").read_text()  # the error names the file
    assert "--resume" in (tmp_path / "help.log").read_text()
    assert "train" in (tmp_path / "again.log").read_text()


def test_a_server_that_dies_is_an_error_and_the_backend_starts_the_run_fresh(tmp_path):
    server = Server()
    try:
        server.proc.stdin.write(b"not a request\n")  # the server fails on it and exits before answering
        with pytest.raises(RuntimeError, match="fork server exited"):
            server.start(["--help"], str(tmp_path / "a.log"), str(tmp_path), {})
    finally:
        server.close()
    backend = LocalBackend(fork=True)
    try:
        dead = backend._server()
        dead.proc.stdin.write(b"not a request\n")
        dead.proc.wait(timeout=60)
        backend._idle.append(dead)
        backend.start(Job("help", ["--help"], tmp_path / "b.log", cpus=1))
        assert _wait(backend, 1) == {"help": 0}
        assert "starting a fresh process" in (tmp_path / "b.log").read_text()
    finally:
        backend.close()


def test_a_string_exit_is_status_1_with_its_message_as_python_gives_it(capsys):
    assert (_exit_code(SystemExit()), _exit_code(SystemExit(2)), _exit_code(SystemExit("no such run"))) == (0, 2, 1)
    assert "no such run" in capsys.readouterr().err
