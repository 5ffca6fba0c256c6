"""`rlvr sweep SPEC --plan TARGET`: the plan before the sweep, from the spec's own pilot runs or --pilot
folders (committed records), training nothing."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from rlvr_cli.cli.sweep import sweep
from rlvr_cli.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "results" / "calibration" / "records"
SPEC = """\
base: grpo
set: [model.name=builtin:tiny-init]
steps: 2
seeds: 2
variants:
  - name: sync
  - {name: lag8, set: [rollout.staleness.max=8]}
"""


def _call(spec: Path, **kw):
    args = dict(out=None, jobs=None, threads=None, overrides=[], backend="local", address=None, scripts=[],
                no_continue=False, no_fork_server=False, dry_run=False, plan_target=None, pilot=[])
    args.update(kw)
    return sweep([str(spec)], **args)


def test_the_plan_reads_a_pilot_of_committed_records_and_trains_nothing(tmp_path, capsys, monkeypatch):
    from rlvr_cli.cli.common import console

    monkeypatch.setattr(console, "_width", 250)  # one line per arm
    pilot = tmp_path / "pilot"
    for arm in ("sync", "lag8"):
        for s in (4, 5):
            shutil.copytree(RECORDS / f"{arm}-seed{s}", pilot / f"{arm}-seed{s}")
    spec = tmp_path / "spec.yaml"
    spec.write_text(textwrap.dedent(SPEC))
    _call(spec, plan_target=0.05, pilot=[str(pilot)])
    out = capsys.readouterr().err
    assert "pilot: 4 run(s) of 2 variant(s), control sync" in out  # the spec's control, found by its name
    assert "seeds per arm" in out and "model MDE at n=16/32/64" in out
    assert "the spec as written: 4 run(s) (2 seed(s) x 2 arm(s))" in out
    assert not (tmp_path / "runs").exists()  # nothing trained


def test_no_pilot_and_a_lone_pilot_flag_are_refused(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(textwrap.dedent(SPEC))
    with pytest.raises(UserError, match="none of the spec's 4 run"):
        _call(spec, plan_target=0.05)
    with pytest.raises(UserError, match="--pilot: only with --plan"):
        _call(spec, pilot=[str(tmp_path)])
    with pytest.raises(UserError, match="no run directory"):
        _call(spec, plan_target=0.05, pilot=[str(tmp_path)])
    with pytest.raises(UserError, match="not a run directory"):
        _call(spec, plan_target=0.05, pilot=[str(spec)])
