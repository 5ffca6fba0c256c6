"""A full disk: the run ends `failed` with a message naming the disk, no temporary checkpoint keeps the
space, and `--resume` frees that space before it rewrites anything."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from rlvr_cli.errors import RunFailed
from rlvr_cli.recipe.load import load_recipe

from conftest import tiny_run  # tests/conftest.py: the shared tiny-run overrides

SMALL = tiny_run("checkpoint.every=1")


def test_a_checkpoint_that_hits_a_full_disk_fails_the_run_and_leaves_no_temp(tiny_base, tmp_path, monkeypatch):
    import rlvr_cli.train.run_writer as run_writer
    from rlvr_cli.train.rl import train_rl

    real_save = run_writer.torch.save

    def full_at_step_2(obj, path, *a, **k):
        if "step_2" in str(path):
            with open(path, "wb") as f:
                f.write(b"x" * 4096)  # a partial file, as a real full disk leaves
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(obj, path, *a, **k)

    monkeypatch.setattr(run_writer.torch, "save", full_at_step_2)
    run = tmp_path / "run"
    with pytest.raises(RunFailed, match="no space left on the disk mounted at /"):
        train_rl(load_recipe("grpo", [f"model.name={tiny_base}", *SMALL]), run)
    status = json.loads((run / "run.json").read_text())
    assert status["status"] == "failed" and "no space left" in status["error"] and "--resume" in status["error"]
    assert not list((run / "checkpoints").glob(".tmp-*"))
    assert (run / "checkpoints" / "step_1" / "trainer_state.pt").is_file()


def test_resume_removes_stale_temporary_checkpoints_before_rewriting_metrics(tmp_path, monkeypatch):
    from rlvr_cli.train.run_writer import RunDir

    run = RunDir(tmp_path / "run")
    (run.root / "checkpoints" / ".tmp-step_4-123").mkdir(parents=True)
    run.metrics_path.write_text('{"step": 1}\n{"step": 2}\n{"step": 3, "x"')
    seen = []
    real = RunDir.truncate_after.__globals__["atomic_write_jsonl"]

    def spy(path, rows):
        seen.append(list((run.root / "checkpoints").glob(".tmp-*")))
        real(path, rows)

    monkeypatch.setitem(RunDir.truncate_after.__globals__, "atomic_write_jsonl", spy)
    run.truncate_after(2)
    assert seen == [[]]  # the temp was gone before the metrics were rewritten
    assert run.read_metrics() == [{"step": 1}, {"step": 2}]


SCENARIO = textwrap.dedent(
    """
    set -u
    mount -t tmpfs -o size=16m tmpfs "$DISK" || exit 99
    train() { "$PY" -m rlvr_cli train grpo --out "$DISK/run" "$@" $SETS; }
    head -c 9437184 /dev/zero > "$DISK/filler"           # 9 MiB of something else: ~7 MiB left
    train > "$OUT/1.out" 2> "$OUT/1.err"; echo $? > "$OUT/1.rc"   # step 1's checkpoint fits, step 2's does not
    cp "$DISK/run/run.json" "$OUT/1.run.json"; ls -a "$DISK/run/checkpoints" > "$OUT/1.ls"
    rm "$DISK/filler"                                     # the user frees space ... which a stale temp fills
    mkdir "$DISK/run/checkpoints/.tmp-step_2-99999"
    head -c 100000000 /dev/zero > "$DISK/run/checkpoints/.tmp-step_2-99999/model.safetensors" 2>/dev/null
    train --resume > "$OUT/2.out" 2> "$OUT/2.err"; echo $? > "$OUT/2.rc"
    cp "$DISK/run/run.json" "$OUT/2.run.json"; cp "$DISK/run/metrics.jsonl" "$OUT/2.metrics"; ls -a "$DISK/run/checkpoints" > "$OUT/2.ls"
    """
)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare for a private tmpfs")
def test_a_real_full_disk(tiny_base, tmp_path):
    """On a 16 MiB tmpfs in a private mount namespace: the run fails naming the disk, and --resume
    with the disk full of a stale temporary checkpoint frees it first and finishes."""
    disk, out = tmp_path / "disk", tmp_path / "out"
    disk.mkdir()
    out.mkdir()
    env = {**os.environ, "DISK": str(disk), "OUT": str(out), "PY": sys.executable, "PYTHONPATH": os.getcwd(),
           "SETS": " ".join(f"--set {s}" for s in [f"model.name={tiny_base}", *SMALL])}
    proc = subprocess.run(["unshare", "-m", "sh", "-c", SCENARIO], env=env, timeout=600, capture_output=True, text=True)
    if proc.returncode == 99:
        pytest.skip("cannot mount a tmpfs here: " + proc.stderr)
    read = lambda name: (out / name).read_text()  # noqa: E731
    assert read("1.rc").strip() == "1", read("1.err")
    assert "no space left on the disk mounted at " + str(disk) in " ".join(read("1.err").split()), read("1.err")
    first = json.loads(read("1.run.json"))
    assert first["status"] == "failed" and "no space left" in first["error"]
    assert ".tmp" not in read("1.ls") and "step_1" in read("1.ls")
    assert read("2.rc").strip() == "0", read("2.err")
    assert json.loads(read("2.run.json"))["status"] == "finished"
    assert [json.loads(line)["step"] for line in read("2.metrics").splitlines()] == [1, 2]
    assert ".tmp" not in read("2.ls") and "step_2" in read("2.ls")


def test_resume_drops_hand_damaged_metric_lines_instead_of_crashing(tmp_path):
    """A line that is JSON but not a step's row (a bare number, a string step, a stray byte) is
    forgotten like a half-written one; before, truncate_after raised AttributeError/TypeError."""
    from rlvr_cli.train.run_writer import RunDir

    run = RunDir(tmp_path / "run")
    run.root.mkdir()
    run.metrics_path.write_bytes(b'{"step": 1}\n5\n{"step": "x"}\n\xff\xfe\n{"step": 2}\n{"step": 3}\n')
    run.truncate_after(2)
    assert [r["step"] for r in run.read_metrics()] == [1, 2]
    assert run.metrics_path.read_text(encoding="utf-8").count("\n") == 2


@pytest.mark.parametrize("content", [b"[1, 2]\n", b"\xff\xfe{}", b'"running"'])
def test_a_damaged_run_json_is_rewritten_not_a_traceback(tmp_path, content):
    from rlvr_cli.train.run_writer import RunDir

    run = RunDir(tmp_path / "run")
    run.root.mkdir()
    (run.root / "run.json").write_bytes(content)
    assert run.read_status() == {}
    run.write_status("failed", error="x")
    assert run.read_status()["status"] == "failed"
