"""`rlvr compare`: side-by-side ablations from run directories, with seed bands and a diagnosis.

Reads only what a run leaves on disk (docs/design.md §3: recipe.yaml, run.json, metrics.jsonl,
eval/step_N.json; the names are :mod:`rlvr_cli.run_files`'s). ``run`` is a run as compared, ``load``
reads rlvr's run directories robustly, ``foreign`` reads TRL and verl logs into the same ``Run``,
``variants`` groups seeds and labels variants by the recipe axes that differ, ``diagnose`` holds the
three failure-mode rules, ``plot`` draws the figure, ``summary`` writes summary.json / summary.md,
and ``report.compare_runs`` ties them together.
``paired`` (per-prompt differences between arms: bootstrap CI, McNemar, Holm, verdict) and ``curves``
(ScaleRL's sigmoid fit of pass@1 against compute: ceiling and midpoint) are the statistics for
comparing arms against a control.
"""

from rlvr_cli.compare.report import CompareResult, compare_runs

__all__ = ["CompareResult", "compare_runs"]
