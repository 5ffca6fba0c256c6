"""results/approximate_mde.py: the MDE read from an old interval, by hand, and the annotation of a summary."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "results"))
import approximate_mde as am  # noqa: E402


def test_the_mde_from_an_interval_by_hand():
    # [-0.05, +0.05] at 95%: SE = 0.05 / 1.95996 = 0.025511; MDE = (1.95996 + 0.84162) * SE = 0.071471
    assert am.approximate_mde(-0.05, 0.05, 0.95) == pytest.approx(0.071471, abs=1e-6)


def test_a_summary_is_annotated_once_with_its_bonferroni_confidence(tmp_path):
    f = tmp_path / "summary.md"
    f.write_text("Bonferroni-widened over the 5 protocols\n"
                 "- `a`: **not distinguishable at this budget**, pass@1 -0.031 [-0.057, -0.009]; McNemar\n"
                 "- `b`: **better**, pass@1 +0.2 [+0.1, +0.3]\n")
    assert am.annotate(f) == 1 and am.annotate(f) == 0  # a second run changes nothing
    text = f.read_text()
    want = am.approximate_mde(-0.057, -0.009, 0.99)
    assert f"approximate MDE {want:.3f} from its 99% interval" in text and text.count("MDE") == 1
