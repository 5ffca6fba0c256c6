"""The trainer's numbers do not change by accident: short runs equal the recorded ones.

The recordings (tests/golden/records/) and the full set of runs come from tests/golden/make_golden.py.
Every run starts from the shipped `builtin:tiny` (rlvr_cli/models/weights/: the same bits on every
machine), so the records hold everywhere: exactly where the arithmetic's conditions are the recording's
(`numerics` and `torch`: with rlvr's portable CPU numerics, any x86-64 machine with or without AVX-512),
within `ACROSS_KINDS` elsewhere (make_golden.py says why that much). After a change that is meant to
move the numbers, re-record with `python tests/golden/make_golden.py record NAME` and say why in the
commit; never re-record because another machine disagrees.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent / "golden"
_spec = importlib.util.spec_from_file_location("make_golden", HERE / "make_golden.py")
golden = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(golden)


@pytest.mark.parametrize("name", ["grpo", "dapo", "mu2_minibatches3", "sft", "staleness2_corrections", "top_k"])
def test_short_runs_reproduce_the_recorded_numbers(name, tiny_base, tmp_path):
    want = json.loads((HERE / "records" / f"{name}.json").read_text())
    got = golden.run_golden(name, tmp_path)
    assert got["base_weights"] == want["base_weights"], "the shipped builtin:tiny changed: re-record on purpose"
    allowed = golden.tolerance(want, got)
    diff, where = golden.max_difference(*golden.comparable(want, got))
    assert diff <= allowed, (f"{name}: {where} differs by {diff:.3g} (allowed {allowed:g}: recorded under "
                             f"{want.get('numerics')}, torch {want.get('torch')}; this run {got['numerics']}, "
                             f"torch {got['torch']})")


def test_the_comparison_sees_a_change():
    a = {"metrics": [{"loss": 0.5, "outcomes": {"correct": 3}}]}
    assert golden.max_difference(a, a) == (0.0, "")
    assert golden.max_difference(a, {"metrics": [{"loss": 0.5 + 2e-6, "outcomes": {"correct": 3}}]})[0] > 1e-6
    assert golden.max_difference(a, {"metrics": [{"loss": 0.5}]})[0] == float("inf")
    # a count is compared exactly, a float relative to its size above 1
    assert golden.max_difference({"n": 3}, {"n": 4})[0] == float("inf")
    assert golden.max_difference({"x": 200.0}, {"x": 200.01})[0] == pytest.approx(0.01 / 200.01)


def test_the_tolerance_is_exact_under_the_recording_conditions():
    from rlvr_cli.numerics import cpu_flags

    here = golden.conditions()
    exact = golden.UNPINNED not in (cpu_flags() or set())
    assert golden.tolerance(here, dict(here)) == (0.0 if exact else golden.ACROSS_KINDS)
    assert golden.tolerance(here, {**here, "numerics": "aarch64/DEFAULT"}) == golden.ACROSS_KINDS
    assert golden.tolerance(here, {**here, "torch": "0.0"}) == golden.ACROSS_KINDS


def test_staleness_zero_is_the_synchronous_trainer():
    """The recorded run with `rollout.staleness.max: 0` is the grpo record, every metric and eval to the bit."""
    sync = json.loads((HERE / "records" / "grpo.json").read_text())
    zero = json.loads((HERE / "records" / "staleness0.json").read_text())
    assert zero["eval"] == sync["eval"]
    assert [{k: v for k, v in row.items() if k in sync["metrics"][0]} for row in zero["metrics"]] == sync["metrics"]
    assert all(row["policy_lag"] == 0 for row in zero["metrics"])
