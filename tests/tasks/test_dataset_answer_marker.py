"""`task.answer_marker` for a dataset task (issue 49): with `#`, the built-in model's `...#632` form is read
after the marker and earns the `format` term; without it, the format term needs a boxed or #### answer."""

from __future__ import annotations

import json

import pytest

from rlvr_cli.errors import UserError
from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.rewards import ScoreItem, Scorer
from rlvr_cli.tasks import build_task

ROWS = "".join(json.dumps({"question": f"{a:03d}+285=", "answer": a + 285}) + "\n" for a in range(300, 360))


def _scores(tmp_path, *sets):
    (tmp_path / "d.jsonl").write_text(ROWS)
    r = load_recipe("dr_grpo", [f"task={{name: dataset, path: {tmp_path / 'd.jsonl'}, verifier: integer}}",
                                "reward.terms=[{type: task}, {type: format, weight: 0.1}]", *sets])
    task = build_task(r.task)
    p = next(x for _, x in task.located_rows() if x.reference == "632")
    with Scorer(r.reward, task) as scorer:
        return [(s.outcome, s.terms["format"]) for s in scorer.score([ScoreItem(p, t, 0) for t in
                                                                       ("12,13,6#632", "12,13,6#632=631", "#631")])]


def test_with_the_marker_the_models_form_is_read_and_has_the_format(tmp_path):
    assert _scores(tmp_path, "task.answer_marker='#'") == [("correct", 1.0), ("incorrect", 1.0), ("incorrect", 1.0)]


def test_without_it_the_format_term_is_zero(tmp_path):
    got = _scores(tmp_path)
    assert [f for _, f in got] == [0.0, 0.0, 0.0] and got[0][0] == "correct"  # the last number, 632


def test_a_whitespace_marker_is_refused(tmp_path):
    with pytest.raises(UserError, match="answer_marker is only whitespace"):
        load_recipe("dr_grpo", ["task={name: dataset, path: d.jsonl}", "task.answer_marker=' '"])
