"""A CSV row is named by the file line it starts on, as a JSONL row is (issue 49): blank lines and quoted
fields that span lines are counted."""

from __future__ import annotations

import pytest

from rlvr_cli.errors import UserError
from rlvr_cli.recipe.schema import DatasetTaskSpec
from rlvr_cli.tasks.dataset import DatasetTask, _csv_record_lines


def test_record_lines_count_blank_lines_and_multiline_fields(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text('question,answer\n"1+1=",2\n\n"two\nlines",4\n"3+3=",6\n')
    assert _csv_record_lines(p) == [2, 4, 6]


def test_a_bad_csv_row_names_its_file_line(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("question,answer\n" + "".join(f"{a}+1=,{a + 1}\n" for a in range(10, 30)) + "\n31+1=,\n")
    spec = DatasetTaskSpec(path=str(p), verifier="integer")
    with pytest.raises(UserError) as e:
        DatasetTask(spec)
    assert e.value.problems[0].startswith(f"task: {p}:23: row 20: answer is null"), e.value.problems


def test_every_located_csv_row_carries_its_line(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("question,answer\n" + "".join(f"{a}+1=,{a + 1}\n" for a in range(10, 50)))
    located = DatasetTask(DatasetTaskSpec(path=str(p), verifier="integer")).located_rows()
    assert [w for w, _ in located][:2] == [f"{p}:2: row 0", f"{p}:3: row 1"] and len(located) == 40
