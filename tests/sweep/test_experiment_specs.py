"""The spec features the shipped experiments use (a variant's own recipe, `needs`, `recipe_names`, several
specs in one pool, `--set`, `--script`) and the experiments themselves: results/*/sweep.yaml plan what
results/ holds, and the runs that continue another's steps are the ones found before (12)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlvr_cli.errors import UserError
from rlvr_cli.sweep.continuation import find_continuations
from rlvr_cli.sweep.spec import load_plan

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = ("length_free", "entropy", "kl", "spurious", "variants", "remedies", "mismatch", "prorl")


def test_a_variant_may_name_its_own_recipe_and_keep_its_name(tmp_path):
    (tmp_path / "mine.yaml").write_text("extends: grpo\nname: mine\nsteps: 7\n")
    spec = tmp_path / "s.yaml"
    spec.write_text("base: grpo\nseeds: 1\nvariants:\n  - name: a\n  - name: b\n    recipe: mine.yaml\n")
    plan = load_plan(spec)
    assert [(r.name, r.recipe.name, r.recipe.steps) for r in plan.runs] == [("a-seed0", "a", 200), ("b-seed0", "b", 7)]
    assert plan.runs[1].base == str((tmp_path / "mine.yaml").resolve())
    spec.write_text(spec.read_text() + "recipe_names: true\n")
    assert [r.recipe.name for r in load_plan(spec).runs] == ["grpo", "mine"]


def test_without_a_base_every_variant_needs_a_recipe_and_a_missing_one_is_named_at_its_line(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("seeds: 1\nvariants:\n  - name: a\n    recipe: grpo\n  - name: b\n")
    with pytest.raises(UserError, match=r"s.yaml:1: \(spec\): base: required unless every variant"):
        load_plan(spec)
    spec.write_text("seeds: 1\nvariants:\n  - name: a\n    recipe: grpo\n  - name: b\n    recipe: nope.yaml\n")
    with pytest.raises(UserError, match=r"s.yaml:6: arm b: recipe: nope.yaml: no such recipe"):
        load_plan(spec)


def test_needs_are_planned_first_every_arm_waits_for_them_and_set_reaches_them(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(f"base: grpo\nseeds: 2\nneeds:\n  - {{recipe: dr_grpo, out: {tmp_path / 'warm'}}}\n")
    plan = load_plan(spec, sets=["steps=3"])
    (need,) = plan.needs
    assert need.dir == tmp_path / "warm" and need.recipe.steps == 3 and need.base == "dr_grpo"
    assert all(r.after == [tmp_path / "warm"] and r.recipe.steps == 3 for r in plan.runs)
    spec.write_text("base: grpo\nneeds:\n  - {recipe: grpo, out: x/grpo-seed0}\n")
    with pytest.raises(UserError, match="also another run's"):
        load_plan(spec)


def test_a_bad_command_line_set_is_said_once_as_the_command_line_gave_it(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("base: grpo\nseeds: 2\nvariants:\n  - name: a\n  - name: b\n")
    with pytest.raises(UserError) as e:
        load_plan(spec, sets=["bogus.x=1"])
    assert e.value.problems == ["--set bogus.x=1: bogus: unknown field (not in the schema; check the spelling)"]


def test_several_specs_may_not_plan_one_directory_and_out_and_script_are_checked(tmp_path, cli):
    for name in ("a", "b"):
        (tmp_path / f"{name}.yaml").write_text(f"base: grpo\nout: {tmp_path / 'same'}\n")
    r = cli("sweep", str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml"), "--dry-run")
    assert r.code == 2 and "also planned by" in r.stdout + r.stderr
    r = cli("sweep", str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml"), "--out", str(tmp_path / "o"))
    assert r.code == 2 and "--out: one spec only" in r.stdout + r.stderr
    r = cli("sweep", str(tmp_path / "a.yaml"), "--script", "no command")
    assert r.code == 2 and "expected NAME=COMMAND" in r.stdout + r.stderr


def test_scripts_alone_are_a_sweep_and_nothing_at_all_is_exit_2(tmp_path, cli, monkeypatch):
    """`results/reproduce.py --only inference_compute` is a sweep of one script and no spec."""
    monkeypatch.chdir(tmp_path)
    r = cli("sweep", "--jobs", "1", "--script", "hi=echo hello")
    assert r.code == 0, r.stdout + r.stderr
    assert "hello" in (tmp_path / "runs" / "scripts" / "hi.log").read_text()
    r = cli("sweep", "--jobs", "1")
    assert r.code == 2 and "nothing to run" in r.stdout + r.stderr


def test_the_experiments_plan_what_results_holds_and_continue_the_same_twelve_runs():
    plans = {name: load_plan(ROOT / "results" / name / "sweep.yaml") for name in EXPERIMENTS}
    for name, plan in plans.items():
        assert plan.out == Path("runs/experiments") / name and plan.compare_out == Path("results") / name
        assert [r.name for r in plan.runs] == [f"{a}-seed{k}" for a in plan.arms for k in (0, 1, 2)]
        assert all(r.recipe.name == Path(r.base).stem for r in plan.runs)  # each keeps its recipe's name
    assert [str(n.dir) for n in plans["length_free"].needs] == ["runs/experiments/length_free/base"]
    assert plans["variants"].runs[0].recipe.kl.track_every == 10
    runs = [r for p in plans.values() for r in [*p.needs, *p.runs]]
    found = {str(k): (str(v.src), v.at) for k, v in find_continuations(runs).items()}
    e, rem, p = "runs/experiments/entropy", "runs/experiments/remedies", "runs/experiments/prorl"
    want = {f"{e}/{arm}-seed{k}": (f"{rem}/{src}-seed{k}", 100) for arm, src in
            (("collapse", "baseline"), ("clip_higher", "clip_higher"), ("kl_loss", "kl_loss")) for k in (0, 1, 2)}
    want |= {f"{p}/reset-seed{k}": (f"{p}/no_reset-seed{k}", 100) for k in (0, 1, 2)}
    assert found == want
