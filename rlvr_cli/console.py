"""The one console every layer writes to (progress bars, tables, notes).

It writes to stderr, so stdout stays clean for data (e.g. `rlvr recipes show`). It lives at the
bottom of the package so that `train/` and `models/` can print without importing the CLI.

Written to a file or a pipe (no terminal to ask for a width), Rich would cut every line at 80
columns and fold tables; there it is :data:`PIPE_WIDTH` wide instead, unless ``COLUMNS`` says a width.
"""

from __future__ import annotations

import os

from rich.console import Console

PIPE_WIDTH = 200
"""Columns of the console when stderr is not a terminal and ``COLUMNS`` is unset (a log file, a pipe)."""


def make_console(stderr: bool = True) -> Console:
    """A console on stderr (or stdout): the terminal's width, or PIPE_WIDTH when writing to a file or pipe."""
    out = Console(stderr=stderr)
    if not out.is_terminal and not os.environ.get("COLUMNS"):
        out = Console(stderr=stderr, width=PIPE_WIDTH)
    return out


console = make_console()
