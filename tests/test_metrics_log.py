"""metrics.jsonl has one reader and one rule for a damaged line (issue 43: the trainer, `rlvr compare` and
the sweep each had their own). The same damaged file reads the same through each of them."""

from __future__ import annotations

import json

from rlvr_cli.compare.load import load_run
from rlvr_cli.run_files import last_metrics_row, read_metrics
from rlvr_cli.sweep.state import read_run
from rlvr_cli.train.run_writer import RunDir

LINES = [
    json.dumps({"step": 1, "loss": 1.0}),
    '{"step": 2, "loss": 0.9, "accur',            # torn in the middle
    "not json at all",
    json.dumps([{"step": 3}]),                     # not an object
    json.dumps({"step": True, "loss": 0.1}),       # a bool is not a step
    json.dumps({"step": 3.0, "loss": 0.1}),        # nor a float
    json.dumps({"step": 3, "loss": 0.8}),
    json.dumps({"step": 3, "loss": 0.7}),          # logged again: the later line
    "[" * 100_000,                                 # nested past the recursion limit
    '{"step": 4, "loss": 1' + "0" * 5000 + "}",    # an integer of more digits than Python converts
    "",
]


def _run(tmp_path, tail: str):
    run = tmp_path / "run"
    run.mkdir()
    (run / "recipe.yaml").write_text("name: r\n")
    (run / "metrics.jsonl").write_text("\n".join(LINES) + "\n" + tail)
    return run


def test_one_rule_for_every_damaged_line(tmp_path):
    run = _run(tmp_path, json.dumps({"step": 5, "loss": 0.5}))  # the last line, whole but without its newline
    log = read_metrics(run)
    assert [(r["step"], r["loss"]) for r in log.rows] == [(1, 1.0), (3, 0.7), (5, 0.5)]
    assert [p.split(":", 1)[1].strip() for p in log.problems] == [
        "not valid JSON (Unterminated string starting at); skipped", "not valid JSON (Expecting value); skipped",
        "not a JSON object; skipped", "no integer 'step'; skipped", "no integer 'step'; skipped",
        "step 3 logged again; kept this later line", "nested too deeply; skipped",
        "not valid JSON (Exceeds the limit (4300 digits) for integer string conversion: value has 5001 di); skipped"]
    assert [p.split(":", 1)[0] for p in log.problems] == [f"metrics.jsonl line {n}" for n in (2, 3, 4, 5, 6, 8, 9, 10)]


def test_every_reader_follows_it(tmp_path):
    run = _run(tmp_path, '{"step": 5, "loss": 0.')  # a write in progress
    log = read_metrics(run)
    assert log.problems[-1] == "metrics.jsonl line 12: incomplete last line (a run in progress or cut short); skipped"
    assert RunDir(run).read_metrics() == log.rows
    compared = load_run(run)
    assert list(compared.metrics.index) == [1, 3] and list(compared.metrics["loss"]) == [1.0, 0.7]
    assert [w for w in compared.warnings if w.startswith("metrics.jsonl")] == log.problems
    assert last_metrics_row(run) == log.rows[-1] and read_run(run).step == 3


def test_no_file_is_no_record_and_a_growing_file_is_read_from_its_tail(tmp_path):
    assert read_metrics(tmp_path).rows == [] and last_metrics_row(tmp_path) == {}
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "pad": "x" * 100}) + "\n" for s in range(1, 2001)))
    assert last_metrics_row(tmp_path) == read_metrics(tmp_path).rows[-1] and last_metrics_row(tmp_path)["step"] == 2000
