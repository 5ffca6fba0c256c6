"""`rlvr sweep` training real (tiny) runs: a failed run does not stop the others, Ctrl-C leaves the runs
resumable, the next sweep resumes them and compares, and Ray tasks give the local processes' metrics."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlvr_cli.metrics import TIMING
from rlvr_cli.sweep.runner import run_sweep
from rlvr_cli.sweep.spec import load_plan
from rlvr_cli.sweep.state import plan_states, read_run

TINY = ["model.name=builtin:tiny-init", "rollout.prompts_per_step=2", "rollout.group_size=2",
        "rollout.max_new_tokens=8", "eval.n=1", "eval.num_prompts=2", "eval.every=0", "eval.at_start=false",
        "checkpoint.every=1", "checkpoint.keep_last=1"]
STEPS = 8
SPEC = f"""\
base: grpo
set: [{", ".join(TINY)}]
steps: {STEPS}
seeds: [0]
variants:
  - name: control
  - name: high_lr
    set: [optim.lr=1.0e-3]
"""


def sweep(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """`rlvr sweep ARGS` as its own process (this checkout's code, the test session's model cache)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run([sys.executable, "-m", "rlvr_cli", "sweep", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def metrics(run_dir: Path) -> list[dict]:
    rows = [json.loads(ln) for ln in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """The spec swept twice on the local backend. First with high_lr's log blocked (a directory where the
    file goes: a write failure such as a full disk's, without filling one) and Ctrl-C once control has
    trained a step; then again."""
    root = tmp_path_factory.mktemp("sweep")
    spec = root / "spec.yaml"
    spec.write_text(SPEC)
    out = root / "out"
    (out / "logs" / "high_lr-seed0.log").mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-m", "rlvr_cli", "sweep", str(spec), "--out", str(out), "--jobs", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 180
    while read_run(out / "control-seed0", with_recipe=False).step < 1:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)  # the terminal's Ctrl-C reaches the sweep; the sweep stops its runs
    _, first_err = proc.communicate(timeout=120)
    first = (proc.returncode, first_err, json.loads((out / "sweep.json").read_text()), read_run(out / "control-seed0"))
    (out / "logs" / "high_lr-seed0.log").rmdir()
    states = plan_states(load_plan(spec, out))
    second = sweep(str(spec), "--out", str(out), "--jobs", "2")
    return spec, out, first, states, second


def test_a_failed_run_does_not_stop_the_others_and_ctrl_c_leaves_them_resumable(local):
    _, out, (code, err, record, control), states, _ = local
    assert code == 130, err
    err = " ".join(err.split())
    assert f"cannot write its log {out / 'logs' / 'high_lr-seed0.log'}: Is a directory" in err
    assert "interrupted: run the same command again to resume" in err
    assert {r["name"]: r["result"] for r in record["runs"]} == {"control-seed0": "interrupted", "high_lr-seed0": "failed"}
    assert record["runs"][0]["command"].startswith(f"rlvr train grpo --out {out / 'control-seed0'} --set model.name=")
    assert control.status == "interrupted" and 1 <= control.step < STEPS
    assert states == {"control-seed0": "resume", "high_lr-seed0": "new"}


def test_the_next_sweep_resumes_the_interrupted_run_trains_the_failed_one_and_compares(local):
    spec, out, _, _, second = local
    assert second.returncode == 0, second.stderr
    record = json.loads((out / "sweep.json").read_text())
    assert {r["name"]: (r["state"], r["result"]) for r in record["runs"]} == {
        "control-seed0": ("resume", "finished"), "high_lr-seed0": ("new", "finished")}
    for name in ("control-seed0", "high_lr-seed0"):
        assert read_run(out / name).status == "finished"
        assert [r["step"] for r in metrics(out / name)] == list(range(1, STEPS + 1))
    summary = json.loads((out / "compare" / "summary.json").read_text())
    assert [v["label"] for v in summary["variants"]] == ["control", "high_lr"]
    assert sweep(str(spec), "--out", str(out), "--dry-run").stderr.count("finished") == 2


@pytest.fixture(scope="module")
def local_ray(rlvr_cache):
    """A Ray instance of 2 CPUs on this machine, started by the test (its workers see the test's model cache)."""
    ray = pytest.importorskip("ray")
    # Ray cancels a task by SIGINT in its worker, which inherits this process's disposition: not ignored, even
    # when pytest runs as a background job of a non-interactive shell
    signal.signal(signal.SIGINT, signal.default_int_handler)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_ray_tasks_give_the_same_metrics_as_local_processes(local, local_ray, tmp_path):
    spec, out, *_ = local
    plan = load_plan(spec, tmp_path / "ray")
    result = run_sweep(plan, plan_states(plan), backend="ray")
    assert [o.result for o in result.outcomes] == ["finished", "finished"], [o.detail for o in result.outcomes]
    for name in ("control-seed0", "high_lr-seed0"):  # local control was interrupted and resumed, Ray's was not
        assert metrics(tmp_path / "ray" / name) == metrics(out / name)
    assert metrics(out / "control-seed0") != metrics(out / "high_lr-seed0")  # the arms differ


def test_a_cancelled_ray_task_stops_its_run_resumably(local_ray, tmp_path):
    """Ray workers block SIGINT and a child inherits that: the run must still get the stop (see local.spawn)."""
    from rlvr_cli.sweep.ray_backend import RayBackend
    from rlvr_cli.sweep.runner import job_for

    spec = tmp_path / "spec.yaml"
    spec.write_text(f"base: grpo\nset: [{', '.join(TINY)}]\nsteps: 200\ncompare: null\n")
    run = load_plan(spec, tmp_path / "out").runs[0]
    backend = RayBackend()
    backend.start(job_for(load_plan(spec, tmp_path / "out"), run, "new"))
    deadline = time.monotonic() + 180
    while read_run(run.dir, with_recipe=False).step < 1:
        assert not backend.poll() and time.monotonic() < deadline
        time.sleep(0.1)
    t0 = time.monotonic()
    assert backend.interrupt() == ["grpo-seed0"]
    disk = read_run(run.dir)
    assert disk.status == "interrupted" and disk.step < 200 and time.monotonic() - t0 < 30


def test_ctrl_c_reaches_train_and_sweep_started_with_sigint_ignored():
    """A background job of a non-interactive shell starts with SIGINT ignored; both commands still stop on it."""
    code = ("import signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
            "from rlvr_cli.cli.common import interruptible; interruptible(); "
            "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert out.stdout.strip() == "True", out.stderr
