"""tools/forkserver.py: `rlvr` commands forked from a warm server compute what a fresh process
computes, each with its own log and exit status; results/reproduce.py trains through it."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # tools/ is the checkout's, not the package's

from tools.forkserver import Launcher, available  # noqa: E402

from conftest import tiny_run  # noqa: E402

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


def test_a_forked_run_computes_what_a_fresh_process_computes(tiny_base, tmp_path):
    args = ["train", "dr_grpo", "--set", f"model.name={tiny_base}", *SMALL]
    fresh = subprocess.run([sys.executable, "-m", "rlvr_cli", *args, "--out", str(tmp_path / "fresh")],
                           cwd=ROOT, capture_output=True, text=True)
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    with Launcher() as launcher:
        rc = launcher.run([*args, "--out", str(tmp_path / "forked")], tmp_path / "forked.log", ROOT)
    assert rc == 0, (tmp_path / "forked.log").read_text()
    rows, evals = _numbers(tmp_path / "forked")
    assert len(rows) == 2 and evals  # the comparison below is not vacuous
    assert (rows, evals) == _numbers(tmp_path / "fresh")
    assert "run directory:" in (tmp_path / "forked.log").read_text()  # the closing output went to its log


def test_each_command_has_its_own_exit_status_and_log_and_threads_run_side_by_side(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps: [\n")
    results: dict[str, int] = {}

    def go(name, argv):
        results[name] = launcher.run(argv, tmp_path / f"{name}.log", tmp_path)

    with Launcher() as launcher:
        threads = [threading.Thread(target=go, args=("bad", ["train", str(bad)])),
                   threading.Thread(target=go, args=("help", ["train", "--help"]))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert len(launcher._servers) == 2  # one server per calling thread
        results["again"] = launcher.run(["--help"], tmp_path / "again.log", tmp_path)  # a server serves many
    assert results == {"bad": 2, "help": 0, "again": 0}
    assert str(bad) in (tmp_path / "bad.log").read_text()  # the error names the file
    assert "--resume" in (tmp_path / "help.log").read_text()
    assert "train" in (tmp_path / "again.log").read_text()


def test_a_server_that_dies_is_an_error_naming_the_command_and_the_next_call_starts_a_new_one(tmp_path):
    with Launcher() as launcher:
        assert launcher.run(["--help"], tmp_path / "a.log", tmp_path) == 0
        first = launcher._local.proc
        first.stdin.write("not a request\n")  # the server fails on it and exits before answering
        with pytest.raises(RuntimeError, match=r"fork server exited .* while running rlvr --help"):
            launcher.run(["--help"], tmp_path / "b.log", tmp_path)
        assert launcher.run(["--help"], tmp_path / "c.log", tmp_path) == 0
        assert launcher._local.proc is not first


def test_reproduce_trains_through_the_launcher_and_says_so(monkeypatch, tmp_path):
    sys.path.insert(0, str(ROOT / "tests" / "tools"))
    from test_reproduce import load

    mod = load()
    calls = []

    class Fake:
        def run(self, argv, log, cwd):
            calls.append((argv, Path(log), Path(cwd)))
            return 0

    monkeypatch.setattr(mod, "LAUNCHER", Fake())
    out = tmp_path / "runs" / "x-seed0"
    assert mod.run_one(mod.train_command("r.yaml", out, 0), out, False, [])
    assert calls == [(["train", "r.yaml", "--out", str(out), "--seed", "0"], tmp_path / "runs" / "x-seed0.log", mod.ROOT)]
    usage = subprocess.run([sys.executable, "results/reproduce.py", "--help"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout
    assert "--no-fork-server" in usage


def test_a_string_exit_is_status_1_with_its_message_as_python_gives_it(capsys):
    from tools.forkserver import _exit_code

    assert (_exit_code(SystemExit()), _exit_code(SystemExit(2)), _exit_code(SystemExit("no such run"))) == (0, 2, 1)
    assert "no such run" in capsys.readouterr().err
