"""`rlvr doctor`'s data checks (rlvr_cli/evaluation/doctor_data.py): every row of a file, named by its line;
gold answers the verifier cannot read; characters the tokenizer does not know; and a true reward that
cannot be learned is a failure with its own message (issue 49)."""

from __future__ import annotations

import json

import pytest

from rlvr_cli.evaluation.doctor_data import (Row, context_finding, gold_finding, learnable_finding,
                                             task_rows, unknown_characters, vocabulary_finding)
from rlvr_cli.models.tokenizer import build_char_tokenizer
from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.rewards.references import gold_problem
from rlvr_cli.tasks import build_task
from rlvr_cli.tasks.base import Problem

TOK = build_char_tokenizer()


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _recipe(tmp_path, rows, *extra):
    data = _jsonl(tmp_path / "data.jsonl", rows)
    recipe = tmp_path / "r.yaml"
    recipe.write_text("extends: dr_grpo\ntask:\n  name: dataset\n  path: " + str(data) +
                      "\n  answer_field: sum\n  prompt_template: '{question}'\n  verifier: integer\n" + "".join(extra))
    return str(recipe)


def _sums(n=40):
    return [{"question": f"{a:03d}+{a + 1:03d}=", "sum": 2 * a + 1} for a in range(100, 100 + n)]


def test_every_row_is_checked_and_the_long_one_is_named_by_its_line(tmp_path):
    rows = _sums(299) + [{"question": "1+" * 300 + "1=", "sum": 301}]  # one row in 300, the last
    task = build_task(load_recipe(_recipe(tmp_path, rows)).task)
    located, every = task_rows(task, 0, 256, [])
    assert every and len(located) == 300  # training and held-out rows, each once (no draws)
    f = context_finding(located, every, task, TOK, limit=512, max_new=64)
    assert f.verdict == "FAIL" and f.value == "1 of 300 rows (every row)"
    assert "data.jsonl:300: row 299 (602 tokens)" in f.detail  # one token per character


def test_a_generated_task_stands_for_its_rows_by_draws():
    task = build_task("arithmetic")
    located, every = task_rows(task, 0, 256, task.eval_problems()[:2])
    assert not every and [r.where for r in located[1:3]] == ["step-1 prompt 1", "held-out prompt 0"]
    assert located[-1].where == "training draw 255" and len(located) == 2 + len(task.eval_problems()) + 256


@pytest.mark.parametrize("gold, why", [
    ("176", None), ("-3", None), ("1,234", None),
    ("176.0", "'176.0' is a float, not an integer (pandas"), ("seventy", "'seventy' is not an integer"),
])
def test_gold_answers_the_integer_verifier_cannot_read(gold, why):
    got = gold_problem("integer", gold)
    assert (got is None) if why is None else got.startswith(why), got
    assert gold_problem("math", gold) is None  # math compares a gold it cannot parse as text


def test_the_gold_finding_names_rows_and_counts_the_rest():
    rows = [Row(f"d.csv:{i + 2}: row {i}", Problem(str(i), "q", ref)) for i, ref in
            enumerate(["1", "2.0", "3", "four", "5.0", "6.00", "7.0"])]
    f = gold_finding(rows, True, "integer")
    assert f.verdict == "FAIL" and f.value == "5 of 7 rows (every row) unreadable (verifier integer)"
    assert "d.csv:3: row 1: '2.0' is a float" in f.detail and "d.csv:5: row 3: 'four'" in f.detail
    assert f.detail.endswith("and 2 more") and "d.csv:2:" not in f.detail
    assert gold_finding(rows[:1], True, "integer").verdict == "ok"


def test_unknown_characters_of_the_built_in_tokenizer():
    assert unknown_characters(TOK, ["what is 3+4?", "12+5="]) == []
    assert unknown_characters(TOK, ["What is 3+4?", "Σ of 2 é", "Ω"]) == ["W", "Σ", "é", "Ω"]


def test_the_vocabulary_finding_names_the_characters_and_a_row():
    rows = [Row("d.jsonl:1: row 0", Problem("a", "012+003=", "15")),
            Row("d.jsonl:2: row 1", Problem("b", "Add 12 and 3", "15")),
            Row("d.jsonl:3: row 2", Problem("c", "add twelve", "Fifteen"))]
    f = vocabulary_finding(rows, True, TOK, "builtin:tiny")
    assert f.verdict == "warn" and f.value == "2 unknown: 'A' 'F'"
    assert "first: d.jsonl:2: row 1" in f.detail and "in 1 prompts and 1 gold answers" in f.detail
    assert "never answered correctly" in f.detail and "docs/tasks.md" in f.detail
    assert vocabulary_finding(rows[:1], True, TOK, "builtin:tiny").verdict == "ok"


def test_no_prompt_solved_is_a_failure_of_its_own():
    f = learnable_finding(0, 8, 64, 8)
    assert (f.check, f.verdict) == ("true reward learnable", "FAIL")
    assert f.value == "no prompt solved in 64 samples (8 prompts x 8)" and "cannot raise accuracy from 0" in f.detail
    assert learnable_finding(1, 8, 64, 8).verdict == "ok"


def test_the_doctor_fails_a_task_the_built_in_model_cannot_learn_and_names_the_bad_rows(cli, tmp_path):
    # prompts in words (not the model's `047+033=`), one gold written as a float, uppercase letters
    rows = [{"question": f"what is {a} plus {a + 1}? ", "sum": 2 * a + 1} for a in range(10, 50)]
    rows[5]["sum"] = "21.0"
    rows[7]["question"] = "What is 17 plus 18? "
    res = cli("doctor", _recipe(tmp_path, rows), "--prompts", "2", "--set", "rollout.max_new_tokens=8",
              "--set", "rollout.group_size=4")
    assert res.code == 3, res.stderr
    reasons = [line for line in res.stderr.splitlines() if line.startswith("doctor:")]
    text = " ".join(res.stderr.split())
    assert any(r.startswith("doctor: true reward learnable: the base model answered no prompt") for r in reasons), reasons
    assert "gold answers the verifier can read: every response to such a row" in text
    assert "data.jsonl:6: row 5: '21.0' is a float" in text
    assert "warn: characters the tokenizer knows: builtin:tiny's tokenizer reads 'W'" in text
    assert "data.jsonl:8: row 7" in text
    assert "likely broken" not in text
