"""Where rlvr writes or deletes, it follows no symbolic link, opens no special file and deletes nothing
it did not create (issue 28): `compare --tensorboard DIR` with DIR/<run> a link, a FIFO or someone
else's event files is exit 2 naming the path, and nothing there changes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("tensorboard")

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "verl_file_logger.jsonl"


def _compare(cli, tmp_path, tb: Path):
    return cli("compare", str(FIXTURE), "--out", str(tmp_path / "cmp"), "--tensorboard", str(tb))


@pytest.fixture
def run_name(cli, tmp_path):
    res = _compare(cli, tmp_path, tmp_path / "probe")
    assert res.code == 0, res.stderr
    (d,) = [p for p in (tmp_path / "probe").iterdir() if p.is_dir()]
    return d.name


def test_run_directory_that_is_a_link_is_refused_and_its_target_kept(cli, tmp_path, run_name):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    precious = elsewhere / "events.out.tfevents.123.host"
    precious.write_bytes(b"someone else's events")
    tb = tmp_path / "tb"
    tb.mkdir()
    (tb / run_name).symlink_to(elsewhere, target_is_directory=True)
    res = _compare(cli, tmp_path, tb)
    assert res.code == 2, res.stderr
    assert str(tb / run_name) in res.stderr and "symbolic link" in res.stderr
    assert precious.read_bytes() == b"someone else's events" and sorted(os.listdir(elsewhere)) == [precious.name]
    assert [p.name for p in tb.iterdir()] == [run_name]  # no temporary directory left behind


def test_run_directory_that_is_a_fifo_is_refused(cli, tmp_path, run_name):
    tb = tmp_path / "tb"
    tb.mkdir()
    os.mkfifo(tb / run_name)
    res = _compare(cli, tmp_path, tb)
    assert res.code == 2 and str(tb / run_name) in res.stderr and "not a directory" in res.stderr


def test_event_files_compare_did_not_write_are_kept(cli, tmp_path, run_name):
    tb = tmp_path / "tb"
    (tb / run_name).mkdir(parents=True)
    theirs = tb / run_name / "events.out.tfevents.1.other"
    theirs.write_bytes(b"a training run's events")
    res = _compare(cli, tmp_path, tb)
    assert res.code == 2 and "did not write" in res.stderr and str(tb / run_name) in res.stderr
    assert theirs.read_bytes() == b"a training run's events"


def test_an_event_file_link_is_replaced_not_its_target(cli, tmp_path, run_name):
    tb = tmp_path / "tb"
    assert _compare(cli, tmp_path, tb).code == 0
    target = tmp_path / "target"
    target.write_bytes(b"keep")
    (tb / run_name / "events.out.tfevents.9.link").symlink_to(target)
    res = _compare(cli, tmp_path, tb)
    assert res.code == 0, res.stderr
    assert target.read_bytes() == b"keep"
    assert len(list((tb / run_name).glob("events.out.tfevents.*"))) == 1


@pytest.mark.parametrize("kind", ["link", "file", "fifo"])
def test_run_tensorboard_directory_that_is_not_ours_is_a_warning_not_a_write(tmp_path, capsys, kind):
    from rlvr_cli import trackers

    run = tmp_path / "run"
    run.mkdir()
    (run / "recipe.yaml").write_text("trackers:\n  tensorboard: true\n")
    target = tmp_path / "elsewhere"
    target.mkdir()
    if kind == "link":
        (run / "tensorboard").symlink_to(target, target_is_directory=True)
    elif kind == "file":
        (run / "tensorboard").write_text("not a directory")
    else:
        os.mkfifo(run / "tensorboard")
    try:
        trackers.log_to_trackers(run, {"step": 1, "reward": 0.5})
    finally:
        trackers.close_trackers(run)
    err = capsys.readouterr().err
    assert "trackers.tensorboard: could not start" in err and str(run / "tensorboard") in err
    assert list(target.iterdir()) == []
