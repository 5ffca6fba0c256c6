"""Relative file paths in a recipe (`task.path`, `task.eval_path`, a `file.py:name` reward function) are read
from the folder of the recipe file that writes them, then from the working directory, as `extends:` is;
a path found nowhere is an error that says where it looked (issue 49)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlvr_cli.errors import UserError
from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.tasks import build_task

ROWS = "".join(json.dumps({"question": f"{a:03d}+001=", "answer": a + 1}) + "\n" for a in range(100, 140))
REWARD = "def credit(completions, **kwargs):\n    return [0.0] * len(completions)\n"


def _recipe(folder: Path, task_path: str, function: str | None = None, extends: str = "dr_grpo") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    text = f"extends: {extends}\ntask:\n  name: dataset\n  path: {task_path}\n  verifier: integer\n"
    if function:
        text += f"reward:\n  terms:\n    - {{type: task}}\n    - {{type: function, function: \"{function}\", weight: 0.1}}\n"
    (folder / "r.yaml").write_text(text)
    return folder / "r.yaml"


def test_a_path_beside_the_recipe_is_found_from_any_working_directory(tmp_path, monkeypatch):
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "data.jsonl").write_text(ROWS)
    (tmp_path / "proj" / "reward.py").write_text(REWARD)
    recipe = _recipe(tmp_path / "proj", "data.jsonl", "reward.py:credit")
    monkeypatch.chdir(tmp_path)
    r = load_recipe(str(recipe))
    assert r.task.path == str(tmp_path / "proj" / "data.jsonl")
    assert r.reward.terms[1].function == f"{tmp_path / 'proj' / 'reward.py'}:credit"
    assert len(build_task(r.task).located_rows()) == 40


def test_from_the_recipe_folder_itself_the_path_stays_as_written(tmp_path, monkeypatch):
    (tmp_path / "data.jsonl").write_text(ROWS)
    recipe = _recipe(tmp_path, "data.jsonl")
    monkeypatch.chdir(tmp_path)
    assert load_recipe(str(recipe)).task.path == "data.jsonl"


def test_a_working_directory_path_keeps_working(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "d.jsonl").write_text(ROWS)
    recipe = _recipe(tmp_path / "recipes", "data/d.jsonl")
    monkeypatch.chdir(tmp_path)
    r = load_recipe(str(recipe))
    assert r.task.path == "data/d.jsonl" and build_task(r.task)


def test_the_recipe_folder_comes_first_when_both_exist(tmp_path, monkeypatch):
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "d.jsonl").write_text(ROWS)
    (tmp_path / "d.jsonl").write_text(ROWS)
    monkeypatch.chdir(tmp_path)
    assert load_recipe(str(_recipe(tmp_path / "recipes", "d.jsonl"))).task.path == str(tmp_path / "recipes" / "d.jsonl")


def test_a_path_from_a_parent_recipe_is_read_from_the_parent_folder(tmp_path, monkeypatch):
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "d.jsonl").write_text(ROWS)
    _recipe(tmp_path / "base", "d.jsonl")
    child = tmp_path / "child" / "c.yaml"
    child.parent.mkdir()
    child.write_text("extends: ../base/r.yaml\nsteps: 3\n")
    monkeypatch.chdir(tmp_path / "child")
    assert load_recipe(str(child)).task.path == str(tmp_path / "base" / "d.jsonl")


def test_a_set_path_is_read_from_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "d.jsonl").write_text(ROWS)
    recipe = _recipe(tmp_path / "recipes", "d.jsonl")
    monkeypatch.chdir(tmp_path)
    assert load_recipe(str(recipe), ["task.path=d.jsonl"]).task.path == "d.jsonl"


def test_a_missing_data_file_says_where_it_looked(tmp_path, monkeypatch):
    recipe = _recipe(tmp_path / "recipes", "nope.jsonl")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError) as e:
        build_task(load_recipe(str(recipe)).task)
    msg = e.value.problems[0]
    assert msg.startswith("task.path: nope.jsonl: no such file (looked for ")
    assert f"{tmp_path / 'recipes' / 'nope.jsonl'}, then {tmp_path / 'nope.jsonl'}" in msg
