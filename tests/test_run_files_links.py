"""Issue 28: rlvr never writes or deletes through a symbolic link or a special file in a run directory
(the lock, metrics.jsonl, run.json, eval/, checkpoints/), and never prunes what it did not write."""

from __future__ import annotations

import json
import os
import threading

import pytest

from rlvr_cli import run_files
from rlvr_cli.errors import RunFailed, UserError
from rlvr_cli.train.run_writer import RunDir

VICTIM = "precious data\n"


@pytest.fixture
def victim(tmp_path):
    v = tmp_path / "victim.txt"
    v.write_text(VICTIM)
    return v


def _refused(run, name):
    with pytest.raises(UserError) as e:
        run_files.acquire(run)
    assert str(run / name) in str(e.value)
    assert os.path.realpath(run) not in run_files._held
    return str(e.value)


def test_a_lock_that_is_a_symbolic_link_is_refused_and_its_target_kept(tmp_path, victim):
    run = tmp_path / "run"
    run.mkdir()
    (run / ".lock").symlink_to(victim)
    assert "symbolic link" in _refused(run, ".lock")
    assert victim.read_text() == VICTIM
    assert run_files.holder_pid(run) is None  # never read through the link either


def test_a_dangling_lock_link_creates_nothing_at_its_target(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / ".lock").symlink_to(tmp_path / "made_by_rlvr")
    _refused(run, ".lock")
    assert not (tmp_path / "made_by_rlvr").exists()


def test_a_lock_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    os.mkfifo(run / ".lock")
    result = []
    t = threading.Thread(target=lambda: result.append(pytest.raises(UserError, run_files.acquire, run)), daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "acquire blocked on a FIFO"
    assert "not a regular file" in str(result[0].value)


def test_a_lock_that_is_a_hard_link_is_refused_and_its_other_name_kept(tmp_path, victim):
    run = tmp_path / "run"
    run.mkdir()
    os.link(victim, run / ".lock")
    assert "hard link" in _refused(run, ".lock")
    assert victim.read_text() == VICTIM


def test_a_lock_that_is_a_directory_is_refused(tmp_path):
    run = tmp_path / "run"
    (run / ".lock").mkdir(parents=True)
    _refused(run, ".lock")


@pytest.mark.parametrize("name", ["metrics.jsonl", "run.json", "recipe.yaml"])
def test_a_run_file_that_is_a_link_is_refused_at_the_start(tmp_path, victim, name):
    run = tmp_path / "run"
    run.mkdir()
    (run / name).symlink_to(victim)
    assert "symbolic link" in _refused(run, name)
    assert victim.read_text() == VICTIM


@pytest.mark.parametrize("name", ["eval", "checkpoints", "samples"])
def test_a_run_subdirectory_that_is_a_link_is_refused_at_the_start(tmp_path, name):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "step_1.json").write_text(VICTIM)
    run = tmp_path / "run"
    run.mkdir()
    (run / name).symlink_to(elsewhere, target_is_directory=True)
    _refused(run, name)
    assert (elsewhere / "step_1.json").read_text() == VICTIM


def test_a_checkpoint_that_is_a_link_is_refused_at_the_start(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "config.json").write_text("{}")
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "step_2").symlink_to(elsewhere, target_is_directory=True)
    _refused(run, "checkpoints/step_2")
    assert (elsewhere / "config.json").read_text() == "{}"


def test_a_fifo_in_place_of_metrics_is_refused(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    os.mkfifo(run / "metrics.jsonl")
    assert "not a regular file" in _refused(run, "metrics.jsonl")


def test_appending_metrics_never_follows_a_link_that_appears_mid_run(tmp_path, victim):
    run = RunDir(tmp_path / "run")
    run.root.mkdir()
    run.append_metrics({"step": 1})
    (run.root / "metrics.jsonl").unlink()
    (run.root / "metrics.jsonl").symlink_to(victim)
    with pytest.raises(RunFailed, match="metrics.jsonl"):
        run.append_metrics({"step": 2})
    assert victim.read_text() == VICTIM


def test_an_atomic_write_onto_a_link_replaces_the_link_not_its_target(tmp_path, victim):
    run = RunDir(tmp_path / "run")
    run.root.mkdir()
    (run.root / "run.json").symlink_to(victim)
    run.write_status("running")
    assert victim.read_text() == VICTIM
    assert not (run.root / "run.json").is_symlink()
    assert json.loads((run.root / "run.json").read_text())["status"] == "running"


class _Saver:
    """Stands in for a model and a tokenizer: writes what save_pretrained would."""

    def save_pretrained(self, d, **_):
        (d / "config.json").write_text("{}")


def test_pruning_keeps_checkpoints_rlvr_did_not_write(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "config.json").write_text("{}")
    (elsewhere / "trainer_state.pt").write_text("not ours")
    run = RunDir(tmp_path / "run")
    ck = run.root / "checkpoints"
    ck.mkdir(parents=True)
    (ck / "step_1").symlink_to(elsewhere, target_is_directory=True)  # a link appearing mid-run
    (ck / "step_2").mkdir()
    (ck / "step_2" / "config.json").write_text("{}")  # a user's directory: no trainer_state.pt
    for step in (3, 4):
        run.save_checkpoint(step, _Saver(), _Saver(), {"step": step}, keep_last=1)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["config.json", "trainer_state.pt"]
    assert (ck / "step_1").is_symlink() and (ck / "step_2" / "config.json").is_file()
    assert not (ck / "step_3").exists() and (ck / "step_4" / "trainer_state.pt").is_file()


def test_train_into_a_run_whose_lock_is_a_link_exits_2(tmp_path, victim, cli):
    run = tmp_path / "run"
    run.mkdir()
    (run / ".lock").symlink_to(victim)
    res = cli("train", "grpo", "--out", str(run), "--set", f"model.name={tmp_path / 'no_model'}")
    assert res.code == 2, res.stderr
    assert ".lock" in res.stderr and "symbolic link" in res.stderr
    assert victim.read_text() == VICTIM
    assert sorted(p.name for p in run.iterdir()) == [".lock"]
