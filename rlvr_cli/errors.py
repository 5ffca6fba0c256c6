"""Errors that the CLI turns into exit codes (docs/design.md §1: 2 = bad input, 1 = internal failure)."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user: a recipe, a data file, a flag, a model reference.

    ``problems`` holds one line per problem, each naming the file and the field or line, so the CLI
    can print them one per line and exit with status 2 (never a traceback).
    """

    def __init__(self, problems: str | list[str]):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


class RunFailed(Exception):
    """A run stopped for a reason the run itself detected (e.g. too many non-finite updates)."""
