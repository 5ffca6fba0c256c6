"""Issue 28: hostile foreign logs in `rlvr compare` are skipped (or their bad part ignored) with a warning
naming the file; the rest of the comparison is produced, with no hang, crash or runaway memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rlvr_cli.compare.foreign import load_trl, load_verl


def _good(tmp_path):
    d = tmp_path / "good"
    d.mkdir()
    log = d / "ok.jsonl"
    log.write_text("".join(json.dumps({"step": s, "data": {"critic/score/mean": 0.1 * s}}) + "\n" for s in (1, 2, 3)))
    return log


def _compare(cli, tmp_path, *paths):
    res = cli("compare", *map(str, paths), "--out", str(tmp_path / "cmp"))
    assert res.code == 0, res.stderr
    summary = json.loads((tmp_path / "cmp" / "summary.json").read_text())
    return res, summary


def _skipped(cli, tmp_path, bad, why):
    res, summary = _compare(cli, tmp_path, _good(tmp_path), bad)
    assert len(summary["variants"]) == 1
    out = res.stdout + res.stderr
    assert bad.name in out and why in " ".join(out.split()), out


def test_deep_json_line_is_skipped(cli, tmp_path):
    bad = tmp_path / "deep.jsonl"
    bad.write_text("[" * 100_000 + "\n")
    _skipped(cli, tmp_path, bad, "nested deeper")


def test_an_integer_of_thousands_of_digits_is_a_skipped_line(cli, tmp_path):
    bad = tmp_path / "digits.jsonl"
    bad.write_text('{"step": 1, "data": {"critic/score/mean": ' + "9" * 5000 + "}}\n")
    _skipped(cli, tmp_path, bad, "no metric rows")


def test_numbers_beyond_float_range_are_kept_as_nonfinite(tmp_path):
    log = tmp_path / "big.jsonl"
    log.write_text('{"step": 1, "data": {"critic/score/mean": 1e999}}\n'
                   '{"step": 2, "data": {"critic/score/mean": ' + "9" * 400 + "}}\n"
                   '{"step": 3, "data": {"critic/score/mean": 0.5}}\n')
    run = load_verl(log)
    assert run.nonfinite["reward_mean"].tolist() == [True, True, False]


@pytest.mark.parametrize("line", ['{"step": "one", "data": {}}', '{"step": 1, "data": [1, 2]}', "[1, 2]", "3",
                                  '{"step": 1.5, "data": {"x": 1}}'])
def test_wrong_types_are_skipped_lines(tmp_path, line):
    log = tmp_path / "types.jsonl"
    log.write_text(line + "\n" + json.dumps({"step": 2, "data": {"critic/score/mean": 0.2, "x": {"a": [1]}}}) + "\n")
    run = load_verl(log)
    assert run.metrics.index.tolist() == [2]
    assert any("line 1" in w for w in run.warnings)


def test_a_directory_named_like_a_log_is_skipped(cli, tmp_path):
    bad = tmp_path / "dir.jsonl"
    bad.mkdir()
    res, summary = _compare(cli, tmp_path, _good(tmp_path), bad)
    assert len(summary["variants"]) == 1 and "dir.jsonl" in res.stdout + res.stderr


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(9))


def test_a_yaml_alias_bomb_in_a_trl_export_is_not_expanded(tmp_path):
    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 1, "loss": 0.5}]}))
    (tmp_path / "export.yaml").write_text("grpo_config: {beta: 0}\n" + BOMB)
    run = load_trl(tmp_path)
    assert run.metrics["loss"].tolist() == [0.5]
    assert any("export.yaml: unreadable" in w and "aliases" in w for w in run.warnings), run.warnings


def test_a_yaml_alias_bomb_in_a_verl_config_is_not_expanded(cli, tmp_path):
    log = _good(tmp_path)
    (log.parent / ".hydra").mkdir()
    (log.parent / ".hydra" / "config.yaml").write_text(BOMB)
    run = load_verl(log)
    assert any("config.yaml: unreadable" in w for w in run.warnings), run.warnings
    _compare(cli, tmp_path, log)


@pytest.mark.parametrize("text", ["a:\n" + "".join("  " * i + "- \n" for i in range(1, 10_000)),
                                  "[" * 10_000 + "]" * 10_000, "x: " + "9" * 5000])
def test_deep_or_huge_yaml_is_a_warning(tmp_path, text):
    log = _good(tmp_path)
    (log.parent / ".hydra").mkdir()
    (log.parent / ".hydra" / "config.yaml").write_text(text)
    run = load_verl(log)
    assert any("config.yaml: unreadable" in w for w in run.warnings), run.warnings


def test_deep_trainer_state_is_skipped(tmp_path):
    (tmp_path / "trl").mkdir()
    (tmp_path / "trl" / "trainer_state.json").write_text("[" * 100_000)
    from rlvr_cli.compare.load import load_runs

    runs, skipped = load_runs([str(tmp_path / "trl"), str(_good(tmp_path))])
    assert len(runs) == 1 and "nested deeper" in skipped[0].reason


def _run_compare(tmp_path, *paths):
    """The CLI in a child process, so a hang fails the test instead of stalling it."""
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    return subprocess.run([sys.executable, "-m", "rlvr_cli", "compare", *map(str, paths), "--out", str(tmp_path / "cmp")],
                          capture_output=True, text=True, timeout=120, env=env)


def test_fifos_and_devices_are_never_opened_blocking(tmp_path):
    good = _good(tmp_path)
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.jsonl"
    zero.symlink_to("/dev/zero")
    trl = tmp_path / "trl"
    trl.mkdir()
    (trl / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 1, "loss": 0.5}]}))
    os.mkfifo(trl / "export.yaml")  # read for the variant: must be skipped, not waited on
    (trl / "zero.yaml").symlink_to("/dev/zero")
    res = _run_compare(tmp_path, good, fifo, zero, trl)
    assert res.returncode == 0, res.stderr
    assert len(json.loads((tmp_path / "cmp" / "summary.json").read_text())["variants"]) == 2
    out = res.stdout + res.stderr
    assert "fifo.jsonl" in out and "zero.jsonl" in out


def test_an_oversized_log_is_skipped(tmp_path, monkeypatch):
    from rlvr_cli.compare import foreign

    monkeypatch.setattr(foreign, "MAX_BYTES", 1000)
    monkeypatch.setattr(foreign.read_bounded, "__defaults__", (1000,))
    log = tmp_path / "big.jsonl"
    log.write_text(json.dumps({"step": 1, "data": {"x": 1}}) + "\n" + " " * 2000 + "\n")
    from rlvr_cli.compare.run import RunUnreadable

    with pytest.raises(RunUnreadable, match="larger than"):
        load_verl(log)
