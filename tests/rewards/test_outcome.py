"""rlvr_cli/rewards/outcome.py: five outcomes, reward 1 only for `correct`, and every outcome counted."""

from __future__ import annotations

import pytest

from rlvr_cli.rewards import outcome as o


def test_each_constructor_gives_its_outcome_and_reward():
    got = [o.correct("3"), o.incorrect("4"), o.unparseable("no marker"), o.timeout("2 s"), o.error("crash")]
    assert [(x.outcome, x.reward) for x in got] == [("correct", 1.0), ("incorrect", 0.0), ("unparseable", 0.0),
                                                    ("timeout", 0.0), ("error", 0.0)]
    assert [x.answer for x in got] == ["3", "4", None, None, None]
    assert o.judged(True, "3") == o.correct("3") and o.judged(False, "3") == o.incorrect("3")


def test_an_unknown_outcome_is_refused():
    with pytest.raises(ValueError, match="unknown outcome 'right'"):
        o.Outcome("right", 1.0, "3")


def test_counts_name_every_outcome():
    counts = o.outcome_counts([o.correct("1"), o.correct("2"), o.timeout("t")])
    assert counts == {"correct": 2, "incorrect": 0, "unparseable": 0, "timeout": 1, "error": 0}
    assert list(o.outcome_counts([])) == list(o.OUTCOMES)
