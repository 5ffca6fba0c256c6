"""One table of metric names (rlvr_cli/metrics.py) feeds the step rows, docs/metrics.md, compare's labels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlvr_cli import metrics
from rlvr_cli.compare.plot import STEP_PANELS


def test_docs_metric_table_matches_the_table():
    """Regenerate with `python -m rlvr_cli.metrics`."""
    page = Path(__file__).resolve().parents[1] / "docs" / "metrics.md"
    assert Path(metrics.DOC) == page
    assert f"{metrics.START}\n{metrics.markdown_table()}{metrics.END}" in page.read_text(encoding="utf-8")


def test_a_step_row_has_exactly_the_tables_keys_in_its_order():
    names = metrics.names("sft")
    assert list(metrics.step_row("sft", {k: 0 for k in reversed(names)})) == names
    with pytest.raises(KeyError, match="not in rlvr_cli/metrics.py"):
        metrics.step_row("sft", {**{k: 0 for k in names}, "typo_frac": 0})
    with pytest.raises(KeyError, match="missing"):
        metrics.step_row("sft", {"step": 1})


def test_a_family_adds_one_key_per_reward_term_in_its_place():
    """`rewards/<term>/mean` (TRL's name) has a key per reward term: step_row takes them, after reward_mean
    and in the terms' order, and refuses a key of no family."""
    fixed = metrics.names("rl")
    assert "rewards/<term>/mean" not in fixed
    values = {k: 0 for k in fixed} | {"rewards/task/mean": 1.0, "rewards/digit_credit/mean": 0.5}
    row = list(metrics.step_row("rl", values))
    at = row.index("reward_mean")
    assert row[at + 1:at + 3] == ["rewards/task/mean", "rewards/digit_credit/mean"]
    assert metrics.label("rewards/digit_credit/mean") == "reward term: digit_credit"
    assert metrics.family("rewards//mean") is None and metrics.family("rewards/x/max") is None
    with pytest.raises(KeyError, match="not in rlvr_cli/metrics.py"):
        metrics.step_row("sft", {**{k: 0 for k in metrics.names("sft")}, "rewards/task/mean": 1.0})


def test_term_metric_names_follow_trl():
    from rlvr_cli.recipe.schema import RewardSpec
    from rlvr_cli.rewards.scorer import term_metric_names

    spec = RewardSpec.model_validate({"terms": [{"type": "task"}, {"type": "format"},
                                                {"type": "function", "function": "m.py:credit"},
                                                {"type": "function", "function": "other.py:credit"}]})
    assert term_metric_names(spec.terms) == ["rewards/task/mean", "rewards/format/mean", "rewards/credit#2/mean",
                                             "rewards/credit#3/mean"]


def test_renames_point_at_current_names_and_old_rows_read_under_them():
    assert not set(metrics.RENAMED) & set(metrics.BY_NAME)
    assert set(metrics.RENAMED.values()) <= set(metrics.BY_NAME)
    old = {"step": 3, "zero_std_all_correct_frac": 0.25, "filtered_frac": 0.5, "update_skipped": True}
    assert metrics.upgrade_row(old) == {"step": 3, "groups_all_correct_frac": 0.25, "groups_dropped_frac": 0.5,
                                        "updates_skipped": 1}


def test_compare_plots_only_table_metrics_with_the_tables_labels():
    for _, lines, _ in STEP_PANELS:
        for key, _, legend in lines:
            assert key in metrics.BY_NAME and legend == metrics.label(key)


def test_compare_reads_a_run_written_under_old_names(tmp_path):
    from rlvr_cli.compare.load import load_run

    run = tmp_path / "old"
    run.mkdir()
    (run / "recipe.yaml").write_text("name: old\n")
    (run / "metrics.jsonl").write_text("".join(
        json.dumps({"step": s, "accuracy": 0.5, "filtered_frac": 0.25, "zero_std_all_wrong_frac": 0.1}) + "\n"
        for s in (1, 2)))
    loaded = load_run(run)
    assert list(loaded.metrics["groups_dropped_frac"]) == [0.25, 0.25]
    assert "filtered_frac" not in loaded.metrics.columns
