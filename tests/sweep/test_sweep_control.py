"""`rlvr sweep` hands its control arm to `rlvr compare --control`, and reads run directories through
rlvr_cli/run_files.py's contract."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

# the synthetic-run helpers of test_compare_synth.py, in tests/ or (once the tests are reorganised) tests/compare/
sys.path[:0] = [str(Path(__file__).parents[1]), str(Path(__file__).parents[1] / "compare")]
from test_compare_synth import recipe, write_run

from rlvr_cli import run_files
from rlvr_cli.compare import compare_runs
from rlvr_cli.sweep import runner
from rlvr_cli.sweep.spec import load_plan
from rlvr_cli.sweep.state import read_run

SPEC = """\
base: grpo
set: [model.name=builtin:tiny-init]
steps: 5
seeds: 1
variants:
  - name: control
  - name: high_lr
    set: [optim.lr=1.0e-4]
compare: {control: high_lr, label_by: kl.beta}
"""


def test_compare_gets_the_control_arm_as_its_run_directory_and_compare_resolves_it(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(textwrap.dedent(SPEC))
    plan = load_plan(spec, out=tmp_path / "out")
    kwargs = runner.compare_kwargs(plan)
    assert kwargs["control"] == str(tmp_path / "out" / "high_lr-seed0")
    # the sweep's run directories, as the trainer would leave them (the labels here are not the arm names)
    write_run(tmp_path / "out", "control-seed0", rec=recipe(**{"kl.beta": 0.04}))
    write_run(tmp_path / "out", "high_lr-seed0", rec=recipe(**{"kl.beta": 0.1}))
    res = compare_runs(kwargs["runs"], tmp_path / "cmp", label_by=kwargs["label_by"], control=kwargs["control"],
                       n_resamples=100)
    assert res.summary["control"] == "kl.beta=0.1"


def test_read_run_follows_the_run_dir_contract(tmp_path):
    d = write_run(tmp_path, "r", rec=recipe())
    got = read_run(d)
    assert (got.status, got.step, got.recipe["name"]) == ("finished", 60, "r")
    (d / run_files.STATUS).write_bytes(b"\xff not json")  # damaged: reads as absent, as run_files.read_status says
    assert read_run(d).status is None and run_files.read_status(d) == {}
    (d / run_files.STATUS).write_text(json.dumps({"status": "failed", "error": "boom"}))
    assert (read_run(d, with_recipe=False).error, read_run(d, with_recipe=False).recipe) == ("boom", None)
