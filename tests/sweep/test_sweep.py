"""`rlvr sweep` without training: the spec's expansion, its errors (file:line: arm: field: problem, exit 2),
what a run directory's state makes the sweep do, the free-space and Ray-address checks."""

from __future__ import annotations

import ast
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from rlvr_cli.errors import UserError
from rlvr_cli.recipe.load import dump_recipe
from rlvr_cli.sweep import runner
from rlvr_cli.sweep.spec import load_plan, set_value
from rlvr_cli.sweep.state import plan_states

SPEC = """\
base: grpo
set: [model.name=builtin:tiny-init]
steps: 5
seeds: 2
variants:
  - name: control
  - name: clip_higher
    set: [loss.clip.eps_high=0.28]
grid:
  optim.lr: [1.0e-5, 3.0e-5]
compare: {control: clip_higher_lr3.0e-05}
"""


def write(tmp_path, text: str, name: str = "spec.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def problems(path, **kw) -> list[str]:
    with pytest.raises(UserError) as e:
        load_plan(path, **kw)
    return e.value.problems


def test_variants_cross_the_grid_into_arm_seed_runs_with_their_overrides(tmp_path):
    plan = load_plan(write(tmp_path, SPEC), out=tmp_path / "out")
    assert plan.arms == ["control_lr1.0e-05", "control_lr3.0e-05", "clip_higher_lr1.0e-05", "clip_higher_lr3.0e-05"]
    assert [r.name for r in plan.runs[:2]] == ["control_lr1.0e-05-seed0", "control_lr1.0e-05-seed1"]
    assert len(plan.runs) == 8 and plan.control == "clip_higher_lr3.0e-05"
    run = plan.runs[6]  # clip_higher_lr3.0e-05-seed0
    assert run.dir == tmp_path / "out" / "clip_higher_lr3.0e-05-seed0"
    assert run.overrides == ["model.name=builtin:tiny-init", "steps=5", "loss.clip.eps_high=0.28", "optim.lr=3.0e-05",
                             "name=clip_higher_lr3.0e-05", "seed=0"]
    assert run.arm_overrides == ["loss.clip.eps_high=0.28", "optim.lr=3.0e-05"]
    r = run.recipe
    assert (r.loss.clip.eps_high, r.optim.lr, r.seed, r.steps, r.name) == (0.28, 3e-5, 0, 5, "clip_higher_lr3.0e-05")
    assert run.base == "grpo" and plan.compare_out == tmp_path / "out" / "compare"


def test_the_argv_is_rlvr_train_with_every_override_and_resume_only_for_a_started_run(tmp_path):
    plan = load_plan(write(tmp_path, SPEC), out=tmp_path / "out", threads=2)
    run = plan.runs[0]
    argv = runner.train_argv(run, "new", 1)
    assert argv[:4] == ["train", "grpo", "--out", str(run.dir.absolute())]
    assert argv[-2:] == ["--set", "threads=2"] and "--resume" not in argv
    assert runner.train_argv(run, "resume", 1)[-1] == "--resume"
    assert runner.train_argv(run, "extend", 4)[-3:] == ["--resume", "--nproc", "4"]
    job = runner.job_for(plan, run, "new")
    assert (job.cpus, job.env) == (2, {"OMP_NUM_THREADS": "2"})


def test_a_spec_without_arms_is_one_arm_named_after_the_base_and_a_file_base_is_relative_to_the_spec(tmp_path):
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "mine.yaml").write_text("extends: dr_grpo\nsteps: 7\n")
    plan = load_plan(write(tmp_path, "base: recipes/mine.yaml\nseeds: [3, 5]\n"))
    assert [r.name for r in plan.runs] == ["mine-seed3", "mine-seed5"]
    assert plan.runs[0].base == str((tmp_path / "recipes" / "mine.yaml").resolve())
    assert plan.runs[1].recipe.steps == 7 and plan.out.as_posix() == "runs/spec"


@pytest.mark.parametrize("value", [0.28, 1e-5, 3, True, None, "true", "abc", [1, 2], "1.0"])
def test_a_grid_value_reads_back_as_the_same_value(value):
    assert yaml.safe_load(set_value(value)) == value


def test_an_unknown_field_or_value_in_an_arm_is_named_with_its_arm_and_the_spec_line(tmp_path, cli):
    path = write(tmp_path, """\
        base: grpo
        variants:
          - name: control
          - name: typo
            set:
              - loss.clip.eps_hgh=0.3
              - advantage.baseline=median
        """)
    res = cli("sweep", str(path), "--dry-run")
    assert res.code == 2
    assert f"{path}:6: arm typo: loss.clip.eps_hgh: unknown field" in res.stderr
    assert f"{path}:7: arm typo: advantage.baseline: Input should be 'group_mean'" in res.stderr
    assert "Traceback" not in res.stderr


def test_a_grid_key_that_is_not_a_field_is_named_at_its_line(tmp_path):
    got = problems(write(tmp_path, "base: grpo\ngrid:\n  optim.lrr: [1]\n"))
    assert got == [f"{tmp_path / 'spec.yaml'}:3: arm lrr1: optim.lrr: unknown field (not in the schema; check the spelling)"]


def test_duplicate_arm_names_are_refused_with_both_lines(tmp_path):
    got = problems(write(tmp_path, "base: grpo\nvariants:\n  - name: a\n  - name: b\n  - name: a\n"))
    assert got == [f"{tmp_path / 'spec.yaml'}:5: arm a: the name is given twice (first at line 3)"]


def test_a_missing_base_recipe_is_named_at_its_line(tmp_path):
    (got,) = problems(write(tmp_path, "seeds: 1\nbase: no_such_recipe\n"))
    assert got.startswith(f"{tmp_path / 'spec.yaml'}:2: base: no_such_recipe: no such recipe file or shipped recipe")


@pytest.mark.parametrize("text, line, message", [
    ("base: grpo\nbogus: 1\n", 2, "bogus: unknown field (a sweep spec has: base, set, steps"),
    ("base: grpo\nseeds: [1, 1]\n", 2, "seeds: seed(s) [1] given twice"),
    ("base: grpo\nseeds: 0\n", 2, "seeds: a count of seeds must be >= 1"),
    ("base: grpo\nvariants:\n  - name: a b\n", 3, "variants.0.name: an arm's name is letters"),
    ("base: grpo\nvariants:\n  - name: a\n    set: [seed=3]\n", 4, "arm a: seed: set by the sweep (seeds:)"),
    ("base: grpo\ncompare: {control: zz}\n", 2, "compare.control: 'zz' is not an arm (arms: grpo)"),
    ("base: grpo\ngrid:\n  optim.lr: []\n", 2, "grid: optim.lr: give at least one value"),
    ("base: grpo\ngpus: .nan\n", 2, "gpus: Input should be a finite number"),
])
def test_a_bad_spec_field_is_one_line_with_its_line(tmp_path, text, line, message):
    got = problems(write(tmp_path, text))
    assert got[0].startswith(f"{tmp_path / 'spec.yaml'}:{line}: {message}"), got


def test_a_missing_empty_or_non_mapping_spec_file_says_so(tmp_path):
    assert problems(tmp_path / "none.yaml") == [f"{tmp_path / 'none.yaml'}: no such sweep spec file"]
    assert "the sweep spec is empty" in problems(write(tmp_path, "# nothing\n"))[0]
    assert "a sweep spec must be a YAML mapping" in problems(write(tmp_path, "- a\n"))[0]


# --- what a run directory's state makes the sweep do ---------------------------------------------------------
def fake_run(run, status: str, recipe=None, steps_done: int | None = None) -> None:
    """A run directory as the trainer leaves it: recipe.yaml, run.json, metrics.jsonl."""
    run.dir.mkdir(parents=True)
    (run.dir / "recipe.yaml").write_text(dump_recipe(recipe or run.recipe))
    (run.dir / "run.json").write_text(json.dumps({"status": status}))
    n = run.recipe.steps if steps_done is None else steps_done
    (run.dir / "metrics.jsonl").write_text("".join(json.dumps({"step": s}) + "\n" for s in range(1, n + 1)))


def one_arm_plan(tmp_path, steps=5, extra=""):
    return load_plan(write(tmp_path, f"base: grpo\nsteps: {steps}\nseeds: 2\n{extra}"), out=tmp_path / "out")


def test_finished_runs_are_skipped_and_started_ones_resumed(tmp_path):
    plan = one_arm_plan(tmp_path)
    fake_run(plan.runs[0], "finished")
    fake_run(plan.runs[1], "interrupted", steps_done=2)
    assert plan_states(plan) == {"grpo-seed0": "finished", "grpo-seed1": "resume"}
    assert plan_states(one_arm_plan(tmp_path, steps=8)) == {"grpo-seed0": "extend", "grpo-seed1": "resume"}


def test_a_spec_change_that_would_change_a_finished_run_is_refused_naming_the_arm(tmp_path, cli):
    plan = one_arm_plan(tmp_path)
    fake_run(plan.runs[0], "finished")
    path = write(tmp_path, "base: grpo\nsteps: 5\nseeds: 2\nset: [optim.lr=0.5]\n")
    res = cli("sweep", str(path), "--out", str(tmp_path / "out"), "--dry-run")
    assert res.code == 2
    assert (f"{path}:1: arm grpo: {tmp_path / 'out' / 'grpo-seed0'} holds a run trained with a different recipe "
            "(optim.lr: 0.0001 -> 0.5)") in res.stderr.replace("\n", "")
    with pytest.raises(UserError, match="cannot be shortened"):
        plan_states(one_arm_plan(tmp_path, steps=3))


def test_what_cannot_change_a_finished_run_is_no_conflict(tmp_path):
    plan = one_arm_plan(tmp_path)
    fake_run(plan.runs[0], "finished")
    assert plan_states(load_plan(tmp_path / "spec.yaml", out=tmp_path / "out", threads=2))["grpo-seed0"] == "finished"
    fake_run(plan.runs[1], "interrupted", steps_done=1)  # an unfinished run is resumed: its thread count matters
    with pytest.raises(UserError, match="threads: 1 -> 2"):
        plan_states(load_plan(tmp_path / "spec.yaml", out=tmp_path / "out", threads=2))


def test_the_dry_run_prints_each_run_with_its_state_and_starts_nothing(tmp_path, cli):
    plan = one_arm_plan(tmp_path, extra="variants:\n  - name: a\n  - name: b\n    set: [optim.lr=2.0e-6]\n")
    fake_run(plan.runs[0], "finished")
    res = cli("sweep", str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "out"), "--dry-run")
    assert res.code == 0, res.stderr
    rows = [ln for ln in res.stderr.splitlines() if ln.startswith("│ ")]
    assert [r.split("│")[5].strip() for r in rows] == ["finished", "new", "new", "new"]
    assert "optim.lr=2.0e-6" in res.stderr and "(control)" in rows[0]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a-seed0"]


def test_no_space_on_the_output_disk_is_refused_before_any_run(tmp_path, cli, monkeypatch):
    monkeypatch.setattr(runner, "free_bytes", lambda path: 10 << 20)
    one_arm_plan(tmp_path)
    res = cli("sweep", str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "out"))
    assert res.code == 2
    assert f"--out {tmp_path / 'out'}: only 10 MiB free on its disk" in res.stderr.replace("\n", "")
    assert not (tmp_path / "out" / "logs").exists()


def test_a_run_whose_log_cannot_be_written_fails_alone_and_the_sweep_exits_1(tmp_path, cli):
    one_arm_plan(tmp_path)
    (tmp_path / "out" / "logs" / "grpo-seed0.log").mkdir(parents=True)  # a write failure (as a full disk's)
    (tmp_path / "out" / "logs" / "grpo-seed1.log").mkdir()
    res = cli("sweep", str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "out"))
    assert res.code == 1
    err = " ".join(res.stderr.split())
    assert "run failed: 2 of 2 run(s) failed (grpo-seed0, grpo-seed1)" in err
    assert f"cannot write its log {tmp_path / 'out' / 'logs' / 'grpo-seed1.log'}: Is a directory" in err
    record = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert [r["result"] for r in record["runs"]] == ["failed", "failed"]


def test_a_rerun_of_a_finished_sweep_keeps_how_each_run_was_made(tmp_path, cli):
    plan = one_arm_plan(tmp_path, extra="compare: null\n")
    for r in plan.runs:
        fake_run(r, "finished")
    earlier = {"runs": [{"name": "grpo-seed0", "command": "rlvr train grpo ...", "result": "finished",
                         "seconds": 372.0},
                        {"name": "grpo-seed1", "command": "rlvr train grpo ...", "result": "failed", "seconds": 3.0}]}
    (tmp_path / "out" / "sweep.json").write_text(json.dumps(earlier))
    res = cli("sweep", str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "out"))
    assert res.code == 0, res.stderr
    runs = json.loads((tmp_path / "out" / "sweep.json").read_text())["runs"]
    assert [r["result"] for r in runs] == ["skipped", "skipped"]
    assert runs[0]["made_by"] == {"command": "rlvr train grpo ...", "result": "finished", "seconds": 372.0}
    assert "made_by" not in runs[1]  # a failed record says nothing about how the finished run was made
    res = cli("sweep", str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "out"))
    again = json.loads((tmp_path / "out" / "sweep.json").read_text())["runs"]
    assert again[0]["made_by"] == runs[0]["made_by"]  # carried over, not lost, on a third pass


def test_address_and_backend_are_checked(tmp_path, cli):
    one_arm_plan(tmp_path)
    assert "--address: only with --backend ray" in cli("sweep", str(tmp_path / "spec.yaml"), "--address", "x:1").stderr
    assert "--backend slurm: expected local or ray" in cli("sweep", str(tmp_path / "spec.yaml"), "--backend", "slurm").stderr


# --- Ray: an address that does not answer --------------------------------------------------------------------
def test_a_ray_address_where_nothing_listens_exits_2_naming_it(tmp_path, cli):
    pytest.importorskip("ray")
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    one_arm_plan(tmp_path)
    t0 = time.monotonic()
    res = cli("sweep", str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "out"), "--backend", "ray",
              "--address", f"127.0.0.1:{port}")
    assert res.code == 2
    assert f"--address 127.0.0.1:{port}: no Ray cluster answers there" in res.stderr
    assert time.monotonic() - t0 < 20


def test_a_ray_address_that_accepts_but_never_answers_exits_2_within_the_timeout():
    pytest.importorskip("ray")
    with socket.socket() as server:  # accepts connections, says nothing (not a Ray cluster)
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        address = f"127.0.0.1:{server.getsockname()[1]}"
        t0 = time.monotonic()
        with pytest.raises(UserError) as e:
            runner.open_backend("ray", address, timeout=3)
    assert e.value.problems[0].startswith(f"--address {address}: ")
    assert time.monotonic() - t0 < 15


def test_the_sweep_imports_neither_the_trainer_nor_the_cli_nor_torch():
    """It schedules `rlvr train` processes: importing torch would cost every sweep seconds for nothing (the
    fork server imports the CLI only in the forked run's own process)."""
    pkg = Path(runner.__file__).parent
    files = [f for f in sorted(pkg.glob("*.py")) if f.name != "forkserver.py"]
    bad = [f"{f.name}: {n.module}" for f in files for n in ast.walk(ast.parse(f.read_text()))
           if isinstance(n, ast.ImportFrom) and (n.module or "").startswith(("rlvr_cli.train", "rlvr_cli.cli"))]
    assert not bad, bad
    code = ("import sys, rlvr_cli.sweep.runner, rlvr_cli.sweep.ray_backend, rlvr_cli.sweep.state, "
            "rlvr_cli.sweep.forkserver, rlvr_cli.sweep.continuation; "
            "print(sorted(m for m in ('torch', 'transformers', 'ray') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(pkg.parents[1])})
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("spec", sorted((Path(__file__).resolve().parents[2] / "results").glob("**/sweep.yaml")),
                         ids=lambda p: p.parent.name)
def test_the_shipped_experiment_sweeps_expand_to_valid_runs(spec):
    plan = load_plan(spec)
    assert plan.runs and len({r.name for r in plan.runs}) == len(plan.runs)
    assert plan.compare_out is not None and plan.compare_out.parts[0] == "results"
