"""rlvr_cli/console.py: a console on stderr, PIPE_WIDTH wide where no terminal says a width."""

from __future__ import annotations

from rlvr_cli import console


def test_without_a_terminal_the_console_is_pipe_width_unless_columns_says(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    out = console.make_console()  # pytest captures stderr: no terminal
    assert out.width == console.PIPE_WIDTH == 200 and out.stderr
    monkeypatch.setenv("COLUMNS", "91")
    assert console.make_console().width == 91
    assert not console.make_console(stderr=False).stderr
