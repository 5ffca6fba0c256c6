"""The one console every layer writes to (progress bars, tables, notes).

It writes to stderr, so stdout stays clean for data (e.g. `rlvr recipes show`). It lives at the
bottom of the package so that `train/` and `models/` can print without importing the CLI.
"""

from __future__ import annotations

from rich.console import Console

console = Console(stderr=True)
