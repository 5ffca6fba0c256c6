"""`rlvr recipes validate` checks what a recipe points at, without loading a model: the data file and its
rows, the reward function's file, name and signature; each problem is one line naming the field, exit 2
(issue 49). Misspelled function and column names get a "did you mean"."""

from __future__ import annotations

import json

import pytest

ROWS = "".join(json.dumps({"question": f"{a:03d}+001=", "sum": a + 1}) + "\n" for a in range(100, 140))
REWARD = ("def credit(completions, **kwargs):\n    return [0.0] * len(completions)\n\n"
          "def strict(completions, answer):\n    return [0.0] * len(completions)\n")


@pytest.fixture
def folder(tmp_path, monkeypatch):
    (tmp_path / "data.jsonl").write_text(ROWS)
    (tmp_path / "reward.py").write_text(REWARD)
    monkeypatch.chdir(tmp_path)

    def no_model(*a, **k):
        raise AssertionError("validate loaded a model")

    monkeypatch.setattr("rlvr_cli.models.load_model", no_model)
    return tmp_path


def _write(folder, path="data.jsonl", function="reward.py:credit", answer_field="sum") -> str:
    (folder / "r.yaml").write_text(
        f"extends: dr_grpo\ntask:\n  name: dataset\n  path: {path}\n  answer_field: {answer_field}\n  verifier: integer\n"
        f"reward:\n  terms:\n    - {{type: task}}\n    - {{type: function, function: \"{function}\", weight: 0.1}}\n")
    return str(folder / "r.yaml")


def _problem(cli, recipe) -> str:
    res = cli("recipes", "validate", recipe)
    assert res.code == 2 and "ok " not in res.stderr, res.stderr
    return " ".join(res.stderr.split())


def test_a_recipe_whose_references_hold_is_ok(cli, folder):
    res = cli("recipes", "validate", _write(folder))
    assert res.code == 0 and "ok " in res.stderr, res.stderr


def test_a_missing_data_file(cli, folder):
    msg = _problem(cli, _write(folder, path="gone.jsonl"))
    assert "r.yaml: task.path: gone.jsonl: no such file (looked for " in msg and str(folder / "gone.jsonl") in msg


def test_a_missing_reward_file(cli, folder):
    msg = _problem(cli, _write(folder, function="rewards.py:credit"))
    assert "r.yaml: reward.terms[1].function: rewards.py:credit: rewards.py: no such file" in msg


def test_a_misspelled_function_gets_a_did_you_mean(cli, folder):
    msg = _problem(cli, _write(folder, function="reward.py:credti"))
    assert "reward.terms[1].function:" in msg and "has no 'credti' (did you mean 'credit'?)" in msg


def test_a_function_that_cannot_take_the_keywords(cli, folder):
    msg = _problem(cli, _write(folder, function="reward.py:strict"))
    assert "reward.terms[1].function:" in msg and "takes no **kwargs" in msg


def test_a_misspelled_column_gets_a_did_you_mean(cli, folder):
    msg = _problem(cli, _write(folder, answer_field="summ"))
    assert "has no field(s) ['summ']" in msg and "did you mean 'summ' -> 'sum'?" in msg


def test_a_bad_row_is_named_by_its_line(cli, folder):
    (folder / "data.jsonl").write_text(ROWS + '{"question": "1+1=", "sum": null}\n')
    msg = _problem(cli, _write(folder))
    assert "data.jsonl:41: row 40: sum is null" in msg


def test_gold_answers_written_as_floats_are_named_by_line(cli, folder):
    # as pandas writes an integer column that held an empty cell: 176.0
    (folder / "data.csv").write_text("question,sum\n" + "".join(f"{a}+1=,{a + 1}.0\n" for a in range(100, 140)))
    msg = _problem(cli, _write(folder, path="data.csv"))
    assert "task.answer_field: 40 gold answer(s) the verifier cannot read: " in msg
    assert "data.csv:2: row 0: '101.0' is a float, not an integer" in msg and msg.rstrip().endswith("and 37 more")


@pytest.mark.parametrize("body, said", [
    ("import time\ntime.sleep(600)\n", "did not finish within 3 s"),
    ("import os\nos._exit(0)\n", "ended the process (exit status 0)"),
], ids=["sleeps", "exits"])
def test_a_module_that_hangs_or_exits_at_import_is_named_not_a_hang(cli, folder, monkeypatch, body, said):
    """Issue 50: validate imported the user's module in its own process, so a sleeping module hung it and
    `os._exit(0)` ended it with exit 0 and no word; now the import is the scorer's checked one (a child)."""
    monkeypatch.setattr("rlvr_cli.checked_import.IMPORT_TIMEOUT_S", 3.0)
    (folder / "reward.py").write_text(body + REWARD)
    msg = _problem(cli, _write(folder))
    assert "reward.terms[1].function: reward.py:credit: importing reward.py" in msg and said in msg, msg
