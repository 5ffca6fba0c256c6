"""The trainer's numbers do not change by accident: short runs equal the recorded ones to 1e-6.

The recordings (tests/golden/records/) and the full set of runs come from tests/golden/make_golden.py;
after a change that is meant to move the numbers, re-record with
`python tests/golden/make_golden.py record NAME` and say why in the commit.
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


@pytest.mark.parametrize("name", ["grpo", "dapo", "mu2_minibatches3"])
def test_short_runs_reproduce_the_recorded_numbers(name, tiny_base, tmp_path):
    want = json.loads((HERE / "records" / f"{name}.json").read_text())
    got = golden.run_golden(name, tmp_path)
    diff, where = golden.max_difference(*golden.comparable(want, got))
    assert diff <= 1e-6, f"{name}: {where} differs by {diff}"


def test_the_comparison_sees_a_change():
    a = {"metrics": [{"loss": 0.5, "outcomes": {"correct": 3}}]}
    assert golden.max_difference(a, a) == (0.0, "")
    assert golden.max_difference(a, {"metrics": [{"loss": 0.5 + 2e-6, "outcomes": {"correct": 3}}]})[0] > 1e-6
    assert golden.max_difference(a, {"metrics": [{"loss": 0.5}]})[0] == float("inf")
