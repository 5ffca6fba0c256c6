"""`rlvr eval` end to end: a run's own eval files reproduced, labelled protocols kept apart, bad input.

One tiny run (untrained builtin:tiny-init, 2 steps, eval and checkpoint every step) is trained once
for the module.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.train.rl import train_rl

from conftest import tiny_run  # tests/conftest.py: the shared tiny-run overrides

TIMING = {"sample_s"}
SMALL = tiny_run("model.name=builtin:tiny-init", "rollout.max_new_tokens=12", "eval.n=4", "eval.num_prompts=3",
                 "eval.every=1", "checkpoint.every=1", without=("eval.at_start",))


@pytest.fixture(scope="module")
def trained(tmp_path_factory, rlvr_cache):
    """A finished 2-step run and a pristine copy of its training eval files."""
    root = tmp_path_factory.mktemp("evalrun") / "run"
    train_rl(load_recipe("grpo", SMALL), root)
    shutil.copytree(root / "eval", root.parent / "train_eval")
    return root


@pytest.fixture
def run_dir(trained, tmp_path):
    """A fresh copy of the run, so each test may write into it."""
    return Path(shutil.copytree(trained, tmp_path / "run"))


def read(path) -> dict:
    return json.loads(Path(path).read_text())


def test_eval_of_a_run_reproduces_its_training_eval_files(run_dir, trained, cli):
    res = cli("eval", str(run_dir), "--steps", "all")
    assert res.code == 0, res.stderr
    for step in (0, 1, 2):
        own = read(trained.parent / "train_eval" / f"step_{step}.json")
        again = read(run_dir / "eval" / f"step_{step}.json")
        assert {k: again[k] for k in own if k not in TIMING} == {k: v for k, v in own.items() if k not in TIMING}
        assert again["source"] == "rlvr eval"
    assert "pass@1" in res.stderr and "maj@4" in res.stderr
    # a checkpoint of the run, evaluated alone, takes the run's settings too
    out = run_dir / "step1.json"
    assert cli("eval", str(run_dir / "checkpoints" / "step_1"), "--out", str(out)).code == 0
    assert read(out)["samples_digest"] == read(trained.parent / "train_eval" / "step_1.json")["samples_digest"]


def test_labelled_protocols_never_overwrite_training_evals(run_dir, trained, cli):
    before = {p.name: p.read_bytes() for p in (run_dir / "eval").glob("step_*.json")}
    res = cli("eval", str(run_dir), "--budget", "4", "--answer-tokens", "3", "--greedy", "--plot")
    assert res.code == 0, res.stderr
    assert {p.name: p.read_bytes() for p in (run_dir / "eval").glob("step_*.json")} == before
    sub = run_dir / "eval" / "budget_4-answer_tokens_3-greedy"
    assert sorted(p.name for p in sub.iterdir()) == ["pass_at_k.png", "pass_at_k.svg", "step_0.json", "step_2.json"]
    rec = read(sub / "step_2.json")
    assert (rec["budget"], rec["min_think"], rec["greedy"], rec["label"]) == (4, None, True, sub.name)
    assert rec["greedy_accuracy"] is not None and rec["forced_frac"] is not None
    res = cli("eval", str(run_dir), "--steps", "0", "--n", "2", "--seed", "7")
    assert res.code == 0, res.stderr
    assert read(run_dir / "eval" / "n_2-seed_7-pass_at_k_1,2-maj_at_k_1,2" / "step_0.json")["n"] == 2


def test_the_runs_own_protocol_waits_for_a_trainer_holding_the_run_and_labels_do_not(run_dir, cli):
    """The trainer writes eval/step_N.json itself: `rlvr eval` of the run's own protocol takes the run's lock."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run_dir)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert holder.stdout.readline().strip() == "holding"
        before = {p.name: p.read_bytes() for p in (run_dir / "eval").glob("step_*.json")}
        res = cli("eval", str(run_dir), "--steps", "0")
        assert res.code == 2 and f"in use by process {holder.pid}" in res.stderr
        assert "evaluating it with the run's own protocol" in res.stderr
        assert {p.name: p.read_bytes() for p in (run_dir / "eval").glob("step_*.json")} == before
        assert cli("eval", str(run_dir), "--steps", "0", "--n", "2").code == 0  # eval/LABEL/: no conflict
    finally:
        holder.kill()
        holder.wait()


HOLD = "import sys, time; from rlvr_cli import run_files; run_files.acquire(sys.argv[1]); print('holding', flush=True); time.sleep(600)"


def test_eval_of_a_model_writes_its_record(cli, tmp_path):
    out = tmp_path / "m.json"
    res = cli("eval", "builtin:tiny-init", "--n", "2", "--num-prompts", "2", "--max-new-tokens", "6",
              "--min-think", "3", "--out", str(out), "--plot")  # fmt: skip
    assert res.code == 0, res.stderr
    rec = read(out)
    assert rec["model"] == "builtin:tiny-init" and rec["step"] is None and rec["task"] == "arithmetic"
    assert rec["min_think"] == 3 and rec["label"] == "min_think_3" and set(rec["pass_at_k"]) == {"1", "2"}
    assert (tmp_path / "m.png").is_file() and (tmp_path / "m.svg").is_file()
    # conditional verbosity: every sample is wrong and none writes `wait,`
    assert rec["filler_given_incorrect"] == 0.0 and rec["filler_given_correct"] is None
    assert "fill%" in res.stderr and "-/0" in res.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--task", "nosuch"], "--task nosuch"),
        (["--n", "4", "--pass-at-k", "1,8"], "--pass-at-k 8"),
        (["--pass-at-k", "1,x"], "--pass-at-k 1,x"),
        (["--steps", "soon"], "--steps soon"),
        (["--steps", "3"], "no checkpoint at step 3"),
        (["--min-think", "12"], "--min-think 12"),
    ],
)
def test_bad_input_names_the_flag(run_dir, cli, args, needle):
    res = cli("eval", str(run_dir), *args)
    assert res.code == 2 and needle in res.stderr, res.stderr


def test_runs_without_checkpoints_and_models_without_steps(run_dir, cli):
    shutil.rmtree(run_dir / "checkpoints")
    res = cli("eval", str(run_dir))
    assert res.code == 2 and "--steps last" in res.stderr and "no complete checkpoint" in res.stderr
    res = cli("eval", "builtin:tiny-init", "--steps", "all")
    assert res.code == 2 and "not a run directory" in res.stderr
    res = cli("eval", "builtin:tiny-init", "--plot")
    assert res.code == 2 and "--plot" in res.stderr
