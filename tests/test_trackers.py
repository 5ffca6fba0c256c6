"""Tracker sinks: a real 2-step run logs to TensorBoard, W&B (offline) and trackio (local), and each is
read back with that tool's own reader; a missing package is exit 2 naming the extra to install."""

from __future__ import annotations

import glob
import json
import struct
from pathlib import Path

import pytest

from rlvr_cli.errors import UserError
from rlvr_cli.recipe.schema import TrackersSpec
from rlvr_cli.train.run_writer import RunDir

RUN = [
    "model.name=builtin:tiny-init", "steps=2", "rollout.prompts_per_step=2", "rollout.group_size=2",
    "rollout.max_new_tokens=8", "eval.at_start=false", "eval.every=0", "eval.n=2", "eval.num_prompts=2",
    "checkpoint.every=0", "optim.minibatches=1",
]


def _sets(*extra):
    return [a for s in (*RUN, *extra) for a in ("--set", s)]


def test_missing_package_is_exit_2_naming_the_extra(monkeypatch, cli, tmp_path):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(UserError, match=r"rlvr-cli\[wandb\]"):
        from rlvr_cli.trackers import check_trackers

        check_trackers(TrackersSpec(wandb=True))
    res = cli("train", "grpo", "--out", str(tmp_path / "run"), *_sets("trackers.wandb=true"))
    assert res.code == 2 and "trackers.wandb" in res.stderr and "rlvr-cli[wandb]" in res.stderr
    assert not (tmp_path / "run").exists()  # refused before any work


def _wandb_history(run_dir: Path) -> list[dict]:
    """History rows of a W&B offline run file (LevelDB-log framing of wandb's protobuf records)."""
    from wandb.proto import wandb_internal_pb2 as pb

    (path,) = glob.glob(str(run_dir / "wandb" / "offline-run-*" / "run-*.wandb"))
    data, pos, block, rows, pending = Path(path).read_bytes(), 7, 32768, [], b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if length == 0 and kind == 0:
            pos += block - pos % block
            continue
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            rec = pb.Record()
            rec.ParseFromString(pending)
            if rec.WhichOneof("record_type") == "history":
                rows.append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in rec.history.item})
    return rows


def test_a_run_logs_to_every_tracker_and_each_reads_back(cli, tmp_path, monkeypatch):
    pytest.importorskip("tensorboard")
    pytest.importorskip("wandb")
    trackio = pytest.importorskip("trackio")
    from trackio import sqlite_storage, utils

    monkeypatch.setattr(sqlite_storage, "TRACKIO_DIR", tmp_path / "trackio")
    monkeypatch.setattr(utils, "TRACKIO_DIR", tmp_path / "trackio")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_dir = tmp_path / "tracked"
    res = cli("train", "grpo", "--out", str(run_dir),
              *_sets("trackers.tensorboard=true", "trackers.wandb=true", "trackers.trackio=true", "trackers.project=rlvr-test"))
    assert res.code == 0, res.stderr
    rows = RunDir(run_dir).read_metrics()
    assert [r["step"] for r in rows] == [1, 2]

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tensorboard"))
    acc.Reload()
    tb = acc.Scalars("reward_mean")
    assert [e.step for e in tb] == [1, 2]
    assert [e.value for e in tb] == pytest.approx([r["reward_mean"] for r in rows])
    assert "outcomes/incorrect" in acc.Tags()["scalars"] or "outcomes/correct" in acc.Tags()["scalars"]

    history = _wandb_history(run_dir)
    assert [h["_step"] for h in history] == [1, 2]
    assert [h["len_mean"] for h in history] == pytest.approx([r["len_mean"] for r in rows])

    logs = sqlite_storage.SQLiteStorage.get_logs("rlvr-test", "tracked")
    assert [x["step"] for x in logs] == [1, 2]
    assert [x["accuracy"] for x in logs] == pytest.approx([r["accuracy"] for r in rows])
    assert trackio is not None


def test_compare_to_tensorboard(tmp_path, cli):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    fixture = Path(__file__).parent / "fixtures" / "verl_file_logger.jsonl"
    res = cli("compare", str(fixture), "--out", str(tmp_path / "cmp"), "--tensorboard", str(tmp_path / "tb"))
    assert res.code == 0, res.stderr
    (d,) = [p for p in (tmp_path / "tb").iterdir() if p.is_dir()]
    acc = EventAccumulator(str(d))
    acc.Reload()
    assert [e.value for e in acc.Scalars("reward_mean")] == pytest.approx([0.31, 0.38, 0.45, 0.52])
    # compared again into the same directory: the run's curve is replaced, not drawn twice
    res = cli("compare", str(fixture), "--out", str(tmp_path / "cmp"), "--tensorboard", str(tmp_path / "tb"))
    assert res.code == 0, res.stderr
    assert [p.name for p in (tmp_path / "tb").iterdir()] == [d.name]
    assert len(list(d.glob("events.out.tfevents.*"))) == 1
    acc = EventAccumulator(str(d))
    acc.Reload()
    assert [e.step for e in acc.Scalars("reward_mean")] == [1, 2, 3, 4]


def test_compare_tensorboard_into_a_file_is_exit_2(tmp_path, cli):
    pytest.importorskip("tensorboard")
    fixture = Path(__file__).parent / "fixtures" / "verl_file_logger.jsonl"
    (tmp_path / "tb").write_text("not a directory")
    res = cli("compare", str(fixture), "--out", str(tmp_path / "cmp"), "--tensorboard", str(tmp_path / "tb"))
    assert res.code == 2, res.stderr
    assert "--tensorboard" in res.stderr and "tb" in res.stderr and "internal error" not in res.stderr
