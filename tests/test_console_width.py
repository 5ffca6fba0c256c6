"""Output to a file or a pipe is not cut at 80 columns (issue 49): the console is PIPE_WIDTH wide there,
unless COLUMNS says otherwise."""

from __future__ import annotations

import io

from rlvr_cli.console import PIPE_WIDTH, make_console


def test_a_pipe_gets_the_wide_console(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr("sys.stderr", io.StringIO())
    out = make_console()
    assert out.width == PIPE_WIDTH
    out.print("x" * 150, highlight=False)
    assert out.file.getvalue() == "x" * 150 + "\n"  # one line, not cut at 80


def test_columns_wins(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert make_console().width == 100


def test_a_doctor_table_is_not_folded_in_a_pipe(cli):
    res = cli("doctor", "dr_grpo", "--prompts", "1", "--set", "rollout.group_size=2", "--set", "rollout.max_new_tokens=16")
    line = next(x for x in res.stderr.splitlines() if "prompts longer than the context" in x)
    assert "tokens" in line, res.stderr  # the value on the check's own line, not folded onto the next
