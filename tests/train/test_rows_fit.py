"""A file task's row too long for the model's context is named before step 1 (issue 49): `rlvr train` exits 2
with the row's file and line and writes nothing, where it used to stop at the step that drew the row, naming
none. The check is the doctor's (rlvr_cli.evaluation.doctor_data.too_long)."""

from __future__ import annotations

import json

from rlvr_cli.evaluation.doctor_data import Row, too_long
from rlvr_cli.tasks.base import Problem


def test_too_long_names_the_rows_over_the_room_the_new_tokens_leave():
    rows = [Row(f"d.jsonl:{i + 1}: row {i}", Problem(id=str(i), prompt="x", reference="1")) for i in range(5)]
    # limit 100, 40 new tokens: a prompt of 60 fits exactly, 61 does not
    said = too_long(rows, [60, 61, 10, 99, 100], 100, 40)
    assert said == ("prompt + rollout.max_new_tokens (40) exceeds the model's 100 positions at d.jsonl:2: row 1 "
                    "(61 tokens); d.jsonl:4: row 3 (99 tokens); d.jsonl:5: row 4 (100 tokens)")
    assert too_long(rows, [60, 1, 2, 3, 4], 100, 40) is None
    assert too_long(rows, [61] * 5, 100, 40).endswith("d.jsonl:3: row 2 (61 tokens) and 2 more")


def test_train_refuses_a_too_long_row_before_step_1_naming_its_line(cli, tiny_base, tmp_path):
    rows = [{"question": f"{a:03d}+{a:03d}=", "sum": 2 * a} for a in range(100, 120)]
    rows[11] = {"question": "1" * 600 + "+1=", "sum": 2}  # 603 tokens + 64 new > builtin:tiny's 512 positions
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = tmp_path / "run"
    res = cli("train", "dr_grpo", "--out", str(run), "--set", f"model.name={tiny_base}", "--set", "task.name=dataset",
              "--set", f"task.path={data}", "--set", "task.answer_field=sum", "--set", 'task.prompt_template="{question}"',
              "--set", "steps=2", "--set", "eval.every=0")
    assert res.code == 2, res.stderr
    assert "Traceback" not in res.stderr
    said = " ".join(res.stderr.split())
    assert (f"error: task: prompt + rollout.max_new_tokens (64) exceeds the model's 512 positions at {data}:12: row 11 "
            "(603 tokens); shorten those prompts") in said, said
    assert not run.exists()
