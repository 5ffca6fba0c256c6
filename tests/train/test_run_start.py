"""Starting a run: one trainer per run directory, and nothing written before the start is known to work."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from conftest import tiny_run  # tests/conftest.py: the shared tiny-run overrides

SMALL = tiny_run()


def sets(*extra: str) -> list[str]:
    return [a for s in [*SMALL, *extra] for a in ("--set", s)]


HOLDER = textwrap.dedent(
    """
    import sys, time
    from rlvr_cli.recipe.load import load_recipe
    from rlvr_cli.train.session import open_session
    recipe = load_recipe("grpo", sys.argv[2:])
    session, _ = open_session(recipe, sys.argv[1], resume=False, updates_per_step=1)
    print("holding", flush=True)
    time.sleep(600)
    """
)


def test_a_second_trainer_on_a_locked_run_exits_2_naming_the_holder(tiny_base, tmp_path, cli):
    run = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(run), f"model.name={tiny_base}", *SMALL],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    try:
        assert holder.stdout.readline().strip() == "holding"
        res = cli("train", "grpo", "--out", str(run), "--resume", "--set", f"model.name={tiny_base}", *sets())
        assert res.code == 2, res.stderr
        assert f"in use by process {holder.pid}" in res.stderr
        assert not (run / "metrics.jsonl").exists()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # the holder died without letting go: the lock went with it, and --resume now runs
    res = cli("train", "grpo", "--out", str(run), "--resume", "--set", f"model.name={tiny_base}", *sets())
    assert res.code == 0, res.stderr
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2]
    assert json.loads((run / "run.json").read_text())["status"] == "finished"


def test_two_real_trainers_on_one_directory(tiny_base, tmp_path):
    """Two `rlvr train` processes started together into one --out: one trains, the other exits 2."""
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "rlvr_cli", "train", "grpo", "--out", str(run), "--set", f"model.name={tiny_base}", *sets("steps=3")]
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    loser = next(err for code, err in results if code == 2)
    assert "in use by process" in loser or "already exists" in loser, loser
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]


def test_resume_of_a_directory_that_does_not_exist_is_an_error(tmp_path, cli):
    res = cli("train", "grpo", "--out", str(tmp_path / "nothing"), "--resume")
    assert res.code == 2 and "no run to resume" in res.stderr
    assert not (tmp_path / "nothing").exists()


@pytest.mark.parametrize(
    "override, field",
    [
        ("optim.betas=[2,3]", "optim.betas"),
        ("optim.betas=[0.9,1.0]", "optim.betas"),
        ("rollout.temperature=1e-300", "rollout.temperature"),
        ("eval.temperature=1e-300", "eval.temperature"),
        ("optim.lr=1e30", "optim.lr"),
        ("seed=18446744073709551616", "seed"),
        ("seed=-1", "seed"),
    ],
)
def test_values_the_run_cannot_use_are_refused_before_anything_is_written(override, field, tmp_path, cli):
    out = tmp_path / "run"
    res = cli("train", "grpo", "--out", str(out), "--set", override)
    assert res.code == 2, res.stderr
    assert field in res.stderr and "internal error" not in res.stderr
    assert not out.exists()


def test_a_device_that_is_not_there_is_refused_before_anything_is_written(tmp_path, cli):
    import torch

    if torch.backends.mps.is_available():
        pytest.skip("this machine has an MPS device")
    res = cli("train", "grpo", "--out", str(tmp_path / "run"), "--set", "device=mps")
    assert res.code == 2 and "mps" in res.stderr, res.stderr
    assert not (tmp_path / "run").exists()


def test_an_out_that_is_a_file_or_cannot_be_made(tmp_path, cli):
    a_file = tmp_path / "file"
    a_file.write_text("not a directory")
    res = cli("train", "grpo", "--out", str(a_file))
    assert res.code == 2 and str(a_file) in res.stderr and "not a directory" in res.stderr, res.stderr
    res = cli("train", "grpo", "--out", str(a_file / "run"))
    assert res.code == 2 and str(a_file) in res.stderr, res.stderr
    res = cli("train", "grpo", "--out", "/proc/rlvr-cannot-be-here/run")
    assert res.code == 2 and "/proc/rlvr-cannot-be-here" in res.stderr and "internal error" not in res.stderr, res.stderr


def test_a_start_that_fails_leaves_no_half_made_directory(tmp_path, cli):
    out = tmp_path / "run"
    res = cli("train", "grpo", "--out", str(out), "--set", "model.name=builtin:nope")
    assert res.code == 2 and "unknown built-in model" in res.stderr
    assert not out.exists()
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{")
    res = cli("train", "grpo", "--out", str(out), "--set", f"model.name={model}")
    assert res.code == 2 and "internal error" not in res.stderr, res.stderr
    assert not out.exists()
    # the parents that --out made are removed too; one that already held something stays
    deep = tmp_path / "new" / "deeper" / "run"
    res = cli("train", "grpo", "--out", str(deep), "--set", "model.name=builtin:nope")
    assert res.code == 2 and not (tmp_path / "new").exists()
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "notes.txt").write_text("mine")
    res = cli("train", "grpo", "--out", str(tmp_path / "kept" / "a" / "run"), "--set", "model.name=builtin:nope")
    assert res.code == 2 and sorted(p.name for p in (tmp_path / "kept").iterdir()) == ["notes.txt"]


def test_the_lock_is_taken_when_its_pid_cannot_be_written(tmp_path, monkeypatch):
    """The pid only names the holder in a message: a full disk at that write is left to the run's own
    disk-full handling (a named `failed`), not an OSError traceback from taking the lock."""
    import errno

    from rlvr_cli import run_files as lock

    def full(*_):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(lock.os, "pwrite", full)
    run = tmp_path / "run"
    lock.acquire(run)
    try:
        assert os.path.realpath(run) in lock._held
        assert lock.holder_pid(run) is None
    finally:
        lock.release(run, every_hold=True)
    assert os.path.realpath(run) not in lock._held


def test_a_new_run_records_the_fingerprint_of_the_weights_it_starts_from(tiny_base, tmp_path):
    """run.json's base_weights is the digest of the loaded base model (what `rlvr compare` reports), kept on resume."""
    import torch

    from rlvr_cli.evaluation.cache import weights_digest
    from rlvr_cli.models import load_model
    from rlvr_cli.recipe.load import load_recipe
    from rlvr_cli.train.session import open_session

    open_session(load_recipe("grpo", [f"model.name={tiny_base}", *SMALL]), tmp_path / "r", resume=False,
                 updates_per_step=1)
    base, _, _ = load_model(tiny_base, torch.device("cpu"), "float32")
    recorded = json.loads((tmp_path / "r" / "run.json").read_text())["base_weights"]
    assert recorded == f"blake2b:{weights_digest(base)}"
