"""The dataset task's column mapping (reward columns, conversations), its hostile-data errors naming
`file:line`, and its data fingerprint."""

from __future__ import annotations

import json

import pytest

from rlvr_cli.errors import UserError
from rlvr_cli.recipe.schema import DatasetTaskSpec
from rlvr_cli.tasks import build_task, chat_messages, data_fingerprint


def rows(n: int = 40) -> list[dict]:
    return [{"problem": f"{i}+{i}=", "sum": 2 * i, "level": i % 3, "note": "x"} for i in range(n)]


def write(path, records) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def spec(path, **kw) -> DatasetTaskSpec:
    kw = {"question_field": "problem", "answer_field": "sum", "prompt_template": "{problem}", "verifier": "integer", **kw}
    return DatasetTaskSpec(path=str(path), **kw)


# --- column mapping -----------------------------------------------------------------------------------------
def test_mapped_columns_make_prompt_answer_and_reward_columns(tmp_path):
    t = build_task(spec(write(tmp_path / "d.jsonl", rows()), reward_columns=["level"]))
    p = t.eval_problems()[0]
    i = int(p.prompt.split("+")[0])
    assert p.prompt == f"{i}+{i}=" and p.reference == str(2 * i)
    assert p.meta["columns"] == {"sum": 2 * i, "level": i % 3, "note": "x"}  # as the file has it (ints), not text
    assert t.column_names == ["sum", "level", "note"]  # every column but the question's, as TRL passes them


def test_a_reward_column_missing_from_the_file_is_named(tmp_path):
    with pytest.raises(UserError, match=r"has no field\(s\) \['difficulty'\].*task.reward_columns"):
        build_task(spec(write(tmp_path / "d.jsonl", rows()), reward_columns=["difficulty"]))


@pytest.mark.parametrize("columns, match", [
    (["answer"], "keyword rlvr passes itself"),
    (["completions"], "keyword rlvr passes itself"),
    (["rlvr_meta"], "keyword rlvr passes itself"),
    (["a-b"], "not a Python identifier"),
    (["level", "level"], "twice"),
])
def test_schema_refuses_reward_columns_that_cannot_be_keywords(columns, match):
    with pytest.raises(ValueError, match=match):
        DatasetTaskSpec(path="d.jsonl", reward_columns=columns)


def test_a_conversation_column_is_the_chat_prompt(tmp_path):
    convs = [{"prompt": [{"role": "user", "content": f"What is {i} + {i}?"}], "answer": str(2 * i)} for i in range(30)]
    convs[0]["prompt"] = [{"role": "system", "content": "Be brief."}, *convs[0]["prompt"]]
    path = write(tmp_path / "c.jsonl", convs)
    s = DatasetTaskSpec(path=path, question_field="prompt", chat_template=True, system_prompt="Answer in digits.",
                        eval_fraction=0.2)
    t = build_task(s)
    problems = t.eval_problems() + t._train
    by_text = {p.prompt: p for p in problems}
    own_system = by_text["What is 0 + 0?"]
    assert chat_messages(s, own_system) == convs[0]["prompt"]  # its own system message wins
    other = by_text["What is 5 + 5?"]
    assert chat_messages(s, other) == [{"role": "system", "content": "Answer in digits."},
                                       {"role": "user", "content": "What is 5 + 5?"}]
    with pytest.raises(UserError, match=r"c.jsonl:1: row 0: prompt is a conversation .*chat_template: true"):
        build_task(DatasetTaskSpec(path=path, question_field="prompt"))


# --- hostile data: the line is named --------------------------------------------------------------------------
@pytest.mark.parametrize("bad_line, match", [
    (b'{"problem": "1+1=", "sum": 2', r"d.jsonl:3: not valid JSON \(Expecting ',' delimiter at column 29\)"),
    (b'[1, 2]', r"d.jsonl:3: a JSON list, not an object of fields"),
    (b'"text"', r"d.jsonl:3: a JSON str, not an object of fields"),
    (b'{"problem": "1\xff", "sum": 2}', r"d.jsonl:3: not UTF-8 text \(invalid start byte at byte 14\)"),
    (b'{"sum": 2}', r"d.jsonl:3: row 1: problem is null or missing"),
    (b'{"problem": "1+1=", "sum": null}', r"d.jsonl:3: row 1: sum is null"),
    (b'{"problem": {"a": 1}, "sum": 2}', r"d.jsonl:3: row 1: problem is a dict, neither text nor a conversation"),
    (b'{"problem": [{"role": "user"}], "sum": 2}', r"d.jsonl:3: row 1: problem\[0\] is not a message"),
])
def test_a_bad_line_is_an_error_naming_file_and_line(tmp_path, bad_line, match):
    good = "".join(json.dumps(r) + "\n" for r in rows(4)).encode()
    lines = good.splitlines(keepends=True)
    path = tmp_path / "d.jsonl"
    path.write_bytes(lines[0] + b"\n" + bad_line + b"\n" + b"".join(lines[1:]))  # line 2 is blank (skipped)
    with pytest.raises(UserError, match=match):
        build_task(spec(path))


def test_a_template_error_names_the_line(tmp_path):
    with pytest.raises(UserError, match=r"task.prompt_template: cannot format row 0 \(.*d.jsonl:1\): KeyError"):
        build_task(spec(write(tmp_path / "d.jsonl", rows()), prompt_template="{nope}"))


def test_an_empty_file_is_named(tmp_path):
    (tmp_path / "e.jsonl").write_text("\n\n")
    with pytest.raises(UserError, match=r"e.jsonl \(split train\): no rows"):
        build_task(spec(tmp_path / "e.jsonl"))


def test_a_byte_order_mark_is_not_part_of_the_first_field(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + "".join(json.dumps(r) + "\n" for r in rows()).encode())
    assert build_task(spec(path)).eval_problems()


def test_the_cli_exits_2_naming_the_line(tmp_path, cli):
    path = tmp_path / "d.jsonl"
    path.write_text('{"question": "1+1=", "answer": "2"}\n{oops}\n')
    res = cli("train", "grpo", "--out", str(tmp_path / "run"), "--set", "task.name=dataset", "--set", f"task.path={path}")
    assert res.code == 2 and f"{path}:2: not valid JSON" in res.stderr, res.stderr
    assert not (tmp_path / "run").exists()


# --- the fingerprint ---------------------------------------------------------------------------------------------
def test_fingerprint_is_stable_and_changes_with_the_rows_used(tmp_path):
    base = rows()
    first = build_task(spec(write(tmp_path / "a.jsonl", base), reward_columns=["level"])).data_fingerprint()
    assert first.startswith("blake2b:") and len(first) == len("blake2b:") + 32
    again = build_task(spec(write(tmp_path / "b.jsonl", base), reward_columns=["level"])).data_fingerprint()
    assert again == first  # the same rows in another file: the same data

    def fp(records, **kw):
        return build_task(spec(write(tmp_path / "x.jsonl", records), **{"reward_columns": ["level"], **kw})).data_fingerprint()

    changed = [dict(r) for r in base]
    changed[7]["sum"] = 999
    assert fp(changed) != first  # one gold answer changed
    changed = [dict(r) for r in base]
    changed[7]["level"] = 9
    assert fp(changed) != first  # a reward column the function reads changed
    changed = [dict(r) for r in base]
    changed[7]["note"] = "y"
    assert fp(changed) != first  # every column reaches a function term (as under TRL): data the run may use
    assert fp(base[::-1]) != first  # the order decides which row a draw picks
    assert fp(base[:-1]) != first
    assert fp(base, eval_fraction=0.3) != first  # another split: other rows trained on
    assert fp(base, prompt_template="Q: {problem}") != first  # other prompts


def test_the_run_fingerprint_takes_the_task_s_own(tmp_path):
    t = build_task(spec(write(tmp_path / "a.jsonl", rows())))
    assert data_fingerprint(t) == t.data_fingerprint()  # run.json's fingerprint.task_data
