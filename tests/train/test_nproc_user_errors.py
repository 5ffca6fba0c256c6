"""Issue 28: under `rlvr train --nproc N` a rank's bad input is exit 2 with the rank's one-line message,
not torchrun's traceback and exit 1 (a lost rank stays exit 1: tests/test_distributed.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

HOLD = textwrap.dedent("""
    import sys, time
    from rlvr_cli import run_files
    run_files.acquire(sys.argv[1])
    print("holding", flush=True)
    time.sleep(300)
""")


def _train(tmp_path, *args):
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "rlvr_cli", "train", "grpo", "--nproc", "2",
                           "--set", "distributed.backend=gloo", *args],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)


def _one_error(res, needle):
    assert res.returncode == 2, res.stderr[-3000:]
    assert "Traceback" not in res.stderr and "ChildFailedError" not in res.stderr, res.stderr[-3000:]
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("error: rank ") and needle in last, res.stderr[-3000:]


def test_a_missing_model_in_the_ranks_is_exit_2_with_its_message(tmp_path):
    res = _train(tmp_path, "--out", str(tmp_path / "run"), "--set", f"model.name={tmp_path / 'no_model'}")
    _one_error(res, "no_model: no such directory")
    assert not (tmp_path / "run" / "run.json").exists()


def test_a_run_directory_in_use_is_exit_2_naming_the_holder(tmp_path):
    run = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert holder.stdout.readline().strip() == "holding"
        started = time.monotonic()
        res = _train(tmp_path, "--out", str(run), "--set", f"model.name={tmp_path / 'no_model'}")
        _one_error(res, f"in use by process {holder.pid}")
        # the other rank, still joining the process group, ends on torchrun's SIGTERM at once instead of
        # waiting out torchrun's 30 s grace for SIGKILL (about 14 s here under load; 41-44 s before)
        assert time.monotonic() - started < 36
    finally:
        holder.kill()
        holder.wait()
    assert sorted(p.name for p in run.iterdir()) == [".lock"]
