"""rlvr_cli/run_files.py: the run directory's contract, which the trainer writes and every reader uses."""

from __future__ import annotations

import pytest

from rlvr_cli import run_files


@pytest.mark.parametrize("marker", run_files.RUN_MARKERS)
def test_any_file_the_trainer_writes_first_makes_a_run_directory(tmp_path, marker):
    run = tmp_path / "run"
    run.mkdir()
    assert not run_files.is_run_dir(run)
    if marker == run_files.CHECKPOINTS_DIR:
        (run / marker).mkdir()
    else:
        (run / marker).write_text("")
    assert run_files.is_run_dir(run)
    assert not run_files.is_run_dir(run / marker)  # a file, or a directory holding none of them


def test_eval_files_are_step_n_json_in_step_order(tmp_path):
    d = tmp_path / run_files.EVAL_DIR
    d.mkdir()
    for name in ("step_10.json", "step_2.json", "step_0.json", "step_x.json", "notes.json", "step_3.jsonl"):
        (d / name).write_text("{}")
    assert [(s, p.name) for s, p in run_files.eval_files(tmp_path)] == [
        (0, "step_0.json"), (2, "step_2.json"), (10, "step_10.json")
    ]
    assert run_files.eval_files(tmp_path / "nowhere") == []
    assert run_files.eval_path(tmp_path, 7) == d / "step_7.json"


def test_a_checkpoint_is_complete_once_it_holds_its_config(tmp_path):
    for name in ("step_4", "step_12", ".tmp-step_16-99", "step_8"):
        run_files.checkpoint_path(tmp_path, 0).parent.joinpath(name).mkdir(parents=True)
    for name in ("step_4", "step_12", ".tmp-step_16-99"):
        (tmp_path / run_files.CHECKPOINTS_DIR / name / "config.json").write_text("{}")
    assert [(s, p.name) for s, p in run_files.list_checkpoints(tmp_path)] == [(4, "step_4"), (12, "step_12")]


def test_a_missing_or_damaged_status_reads_as_empty(tmp_path):
    assert run_files.read_status(tmp_path) == {}
    (tmp_path / run_files.STATUS).write_bytes(b"\xff\xfe not utf-8")
    assert run_files.read_status(tmp_path) == {}
    (tmp_path / run_files.STATUS).write_text("[1, 2]")
    assert run_files.read_status(tmp_path) == {}
    (tmp_path / run_files.STATUS).write_text('{"status": "finished", "seed": 3}')
    assert run_files.read_status(tmp_path) == {"status": "finished", "seed": 3}
