"""rlvr_cli/train/progress.py: the headline numbers' format, and a bar that draws nothing off rank 0."""

from __future__ import annotations

from rlvr_cli.train.progress import fmt, step_progress


def test_numbers_are_formatted_and_anything_else_is_shown_as_it_is():
    assert fmt(0.12345) == "0.123" and fmt(2, "d") == "2" and fmt(None) == "-"
    assert fmt("n/a") == "n/a" and fmt(1.5, "d") == "1.5"  # a spec that does not fit: its str


def test_the_bar_is_disabled_where_it_must_not_draw():
    assert step_progress("train", show=False).disable and not step_progress("train").disable
