"""compare/plot.py: the conditional panels (tools in the loop, reward terms) appear exactly when a run logged them."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from rlvr_cli import metrics
from rlvr_cli.compare import plot


def _variant(columns: dict) -> SimpleNamespace:
    frame = pd.DataFrame({"step": [1, 2, 3], **columns})
    run = SimpleNamespace(metrics=frame, series=lambda k: None if k not in frame or frame[k].isna().all() else frame[k])
    return SimpleNamespace(runs=[run])


def test_reward_term_panels_need_two_logged_terms():
    one = _variant({"rewards/task/mean": [0.1, 0.2, 0.3]})
    two = _variant({"rewards/task/mean": [0.1, 0.2, 0.3], "rewards/format/mean": [1.0, 1.0, 0.5],
                    "rewards/length/mean": [np.nan] * 3})  # all-null: not logged
    assert plot.reward_term_panels([one]) == []
    panels = plot.reward_term_panels([one, two])
    assert len(panels) == 2  # two to a row
    (title, lines, log), (_, shaped, _) = panels
    assert [(k, legend) for k, _, legend in lines] == [("rewards/format/mean", "format"), ("rewards/task/mean", "task")]
    assert [k for k, _, _ in shaped] == ["reward_mean", "reward_shaped_mean"] and not log


def test_the_tools_panels_plot_table_metrics_with_their_labels():
    for _, lines, _ in plot.TOOLS_PANELS:
        for key, _, legend in lines:
            assert key in metrics.BY_NAME and legend == metrics.label(key)
    assert len(plot.TOOLS_PANELS) % 2 == 0


def test_saved_figures_are_a_function_of_the_figure_alone(tmp_path):
    # a re-derived comparison must leave unchanged figures byte-identical (no date, no random element ids)
    from matplotlib.figure import Figure

    def draw(out):
        fig = Figure(figsize=(3, 2))
        ax = fig.add_subplot()
        ax.fill_between([0, 1, 2], [0, 1, 0], [1, 2, 1], alpha=0.2)  # a <use>/<clipPath> with an id
        ax.plot([0, 1, 2], [1, 0, 1])
        out.mkdir()
        return [p.read_bytes() for p in plot.save_figure(fig, out)]

    first, second = draw(tmp_path / "a"), draw(tmp_path / "b")
    assert first == second and b"dc:date" not in first[1]
