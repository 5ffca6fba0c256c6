"""results/rederive.py: the committed per-prompt records reproduce the committed verdicts without the runs."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "results"))
import rederive  # noqa: E402


def test_the_arguments_are_the_sweeps_comparison_on_the_records():
    argv, found, planned = rederive.argv_for(ROOT / "results" / "staleness" / "seed3" / "sweep.yaml")
    assert (found, planned) == (5, 5)
    runs = argv[1:argv.index("--out")]
    assert all(r.startswith("results/staleness/seed3/records/") for r in runs)
    assert argv[argv.index("--out") + 1] == "results/staleness/seed3"
    assert argv[argv.index("--control") + 1] == "results/staleness/seed3/records/sync-seed3"


def test_the_committed_records_reproduce_the_committed_verdicts(capsys):
    # one seed x 5 arms: the smallest committed comparison with records (the others: `python results/rederive.py --check`)
    assert rederive.main(["--check", "staleness/seed3"]) == 0, capsys.readouterr().out


def test_a_changed_verdict_is_reported(tmp_path):
    import json

    s = {"variants": [{"label": "a", "against_control": None},
                      {"label": "b", "against_control": {"verdict": "worse", "pass@1": {"mean": -0.1}}}]}
    (tmp_path / "summary.json").write_text(json.dumps(s))
    assert rederive.verdicts(tmp_path / "summary.json") == {"b": ("worse", -0.1)}


def test_an_unknown_name_is_refused(capsys):
    assert rederive.main(["nope"]) == 2 and "nope" in capsys.readouterr().err


def test_the_pipelines_summaries_come_back_from_their_records(capsys):
    """results/r1 and results/inference_compute are made by scripts, not sweeps: their scripts re-summarise
    from the committed records alone (no runs, no model) to the committed verdict lines."""
    assert rederive.main(["--check", "r1", "inference_compute"]) == 0, capsys.readouterr().out
    for name in ("r1", "inference_compute"):
        lines = rederive.script_verdicts(ROOT / "results" / name / "summary.md")
        assert len(lines) >= 5 and all(word in ("better", "worse", "not distinguishable at this budget")
                                       for _, word, _ in lines), lines


def test_a_changed_scripted_verdict_is_reported(tmp_path):
    (tmp_path / "summary.md").write_text(
        "- **`a`**: **better** than `b` at step 3: pass@1 +0.400 [+0.3, +0.5] (p 1e-9). MDE 0.1.\n"
        "- **`c`**: **not distinguishable at this budget** from `b` at step 3: pass@1 -0.010 [-0.1, +0.1] (p 0.8).\n"
        "- **`d`**: verdict withheld (other weights) `b` at step 3: pass@1 +0.020 [-0.1, +0.1] (p 0.7).\n"
        "some prose with **bold**: pass@1 +0.9\n")
    assert rederive.script_verdicts(tmp_path / "summary.md") == [
        ("`a`", "better", "+0.400"), ("`c`", "not distinguishable at this budget", "-0.010"),
        ("`d`", "verdict withheld", "+0.020")]


def test_hand_made_comparisons_are_remade_from_their_summary(capsys):
    """A comparison made by hand (no sweep.yaml: the 256-prompt re-evaluations, the 8-seed lag-8 comparison,
    your own task) is remade from its summary.json's runs and settings, when every run is a committed record."""
    names = {n: argv for n, argv, _ in rederive.targets()}
    assert {"prorl/prompts256", "variants/prompts256", "calibration/lag8_8seeds", "own_task_smollm2",
            "real/seeds_1_3", "staleness/six_seeds/corrections"} <= set(names)
    corrections = names["staleness/six_seeds/corrections"]  # nested under a sweep's folder, still its own target
    assert corrections[corrections.index("--control") + 1] == "lag8"
    argv = names["prorl/prompts256"]
    assert argv[argv.index("--out") + 1] == "results/prorl/prompts256"
    assert argv[argv.index("--control") + 1] == "kl.ref_reset_every=null"
    assert rederive.main(["--check", "prorl/prompts256"]) == 0, capsys.readouterr().out


def test_a_summary_whose_runs_are_not_records_is_not_a_target(tmp_path):
    import json

    s = {"settings": {"smooth": 5, "band": "minmax", "resamples": 10, "control": "a", "label_by": None},
         "runs": [{"path": "runs/experiments/x/a-seed0"}]}
    (tmp_path / "summary.json").write_text(json.dumps(s))
    assert rederive.argv_from_summary(tmp_path / "summary.json") is None
