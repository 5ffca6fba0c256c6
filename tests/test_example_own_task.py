"""examples/own_task: its data is what its script writes, its recipe validates, the doctor passes it, it
trains two steps with the user's reward function and records the data fingerprint in run.json, its
function is the same reward under TRL, and a function that raises or returns garbage stops a run with
exit 2 naming the function and the prompt."""

from __future__ import annotations

import importlib.util
import json
import textwrap
from pathlib import Path

import pytest
from conftest import tiny_run

from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.tasks import build_task

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "own_task"
RECIPE = str(EXAMPLE / "recipe.yaml")
RUN = tiny_run("rollout.max_new_tokens=32")


@pytest.fixture(autouse=True)
def at_the_repository_root(monkeypatch):
    monkeypatch.chdir(REPO)  # the example's paths are read from the repository root, as its README says


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"own_task_{name}", EXAMPLE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_data_file_is_what_the_script_writes():
    make = _module("make_data")
    assert (EXAMPLE / "problems.jsonl").read_text() == make.jsonl(make.rows())
    assert len(make.rows()) == 200


def test_the_reward_function_by_hand():
    reward = _module("reward")
    assert reward.column_totals(347, 285) == [12, 13, 6]
    out = reward.column_credit(["12,13,6#632", "7+5=12,4+8+1=14,3+2+1=6#642", "#632", "12,13"], a=[347] * 4, b=[285] * 4)
    assert out == pytest.approx([1.0, 2 / 3, 0.0, 2 / 3])


def test_the_recipe_validates_and_the_doctor_passes_it(cli):
    res = cli("recipes", "validate", RECIPE)
    assert res.code == 0, res.stderr
    res = cli("doctor", RECIPE, "--prompts", "4")
    assert res.code == 0, res.stderr
    assert "function column_credit" in res.stderr  # its term, in the table


def test_two_steps_train_with_the_function_and_record_the_data_fingerprint(cli, tmp_path):
    out = tmp_path / "run"
    res = cli("train", RECIPE, "--out", str(out), *[f"--set={s}" for s in RUN])
    assert res.code == 0, res.stderr
    status = json.loads((out / "run.json").read_text())
    expected = build_task(load_recipe(RECIPE).task).data_fingerprint()
    assert status["status"] == "finished" and status["fingerprint"]["task_data"] == expected
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]


BROKEN = '''
def raises(completions, **kwargs):
    raise ValueError("no grader for this")

def garbage(completions, **kwargs):
    return ["high"] * len(completions)
'''


@pytest.mark.parametrize("name, reason", [
    ("raises", "raised ValueError: no grader for this (at "),
    ("garbage", "returned a str ('high') for completion 0, not a number"),
])
def test_a_function_that_raises_or_returns_garbage_stops_the_run_with_exit_2(cli, tmp_path, name, reason):
    module = tmp_path / "broken_reward.py"
    module.write_text(textwrap.dedent(BROKEN))
    ref = f"{module}:{name}"
    res = cli("train", RECIPE, "--out", str(tmp_path / "run"), *[f"--set={s}" for s in RUN],
              "--set", f"reward.terms=[{{type: task}}, {{type: function, function: '{ref}'}}]")
    assert res.code == 2, res.stderr
    text = " ".join(res.stderr.split())
    assert f"reward.terms[1].function {ref}: {reason}" in text, text
    assert "on the prompt '" in text and "step 1" in text, text


def test_under_trl_the_function_is_the_same_reward():
    """rlvr's TRL reward adds 0.2 x the user's function to the task's verdict; the exported dataset has the
    columns the function reads, so TRL could also call it itself."""
    from rlvr_cli.bridges.trl_reward import RlvrReward, train_dataset

    reward = _module("reward")
    r = load_recipe(RECIPE)
    ds = train_dataset(r, 2)
    row = ds[0]
    assert {"a", "b", "answer"} <= set(ds.column_names) and row["answer"] == str(row["a"] + row["b"])
    a, b = row["a"], row["b"]
    completions = [f"#{a + b}", f"{reward.column_totals(a, b)[0]},0,0#1"]
    columns = {k: [row[k]] * 2 for k in ds.column_names if k != "prompt"}
    direct = reward.column_credit(completions=completions, prompts=[row["prompt"]] * 2, completion_ids=[[1], [1]],
                                  **columns)
    rlvr = RlvrReward(r, eos_token_id=2)
    try:
        got = rlvr([row["prompt"]] * 2, completions, completion_ids=[[1, 2], [1, 2]], **columns)
    finally:
        rlvr.close()
    assert got == pytest.approx([1.0 + 0.2 * direct[0], 0.0 + 0.2 * direct[1]])
    assert direct[1] > 0  # the first column total is right: the function's part is not zero


SMOLLM2 = REPO / "examples" / "own_task_smollm2"


def _smollm2_module(name: str):
    spec = importlib.util.spec_from_file_location(f"own_task_smollm2_{name}", SMOLLM2 / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_smollm2_example_data_and_reward_function(tmp_path, monkeypatch):
    """examples/own_task_smollm2 (its training run is results/own_task_smollm2): the data file is the
    script's, and the TRL-signature function reads plain and chat completions alike."""
    make = _smollm2_module("make_data")
    lines = (SMOLLM2 / "problems.jsonl").read_text().splitlines()
    assert [json.loads(x) for x in lines] == make.rows() and len(lines) == 320
    assert all(r["larger"] == max(r["a"], r["b"]) and r["a"] != r["b"] for r in make.rows())
    reward = _smollm2_module("reward")
    chat = [[{"role": "assistant", "content": "The larger number is 83."}]]
    assert reward.names_a_candidate(chat + ["83 is larger than 47", "It is 100.", "no number"],
                                    a=[47] * 4, b=[83] * 4) == [1.0, 1.0, 0.0, 0.0]


def test_the_smollm2_example_recipe_validates_from_another_directory(cli, monkeypatch, tmp_path):
    """Its paths are read from the recipe's folder: `rlvr recipes validate` passes from anywhere, without
    loading the model (data, columns, the function's file, name and signature)."""
    monkeypatch.chdir(tmp_path)
    res = cli("recipes", "validate", str(SMOLLM2 / "recipe.yaml"))
    assert res.code == 0, res.stderr
