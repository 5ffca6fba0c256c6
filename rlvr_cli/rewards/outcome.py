"""What every check returns: an outcome, the reward, the canonical answer and a short reason.

The five outcomes keep a broken checker visible: training turns everything but ``correct`` into reward
0, but the counts are logged apart, so a run whose "incorrect" answers are really ``timeout`` or
``error`` (a checker or limit problem, not a model problem) shows it.

- ``correct``: the answer was extracted and is equal to the reference.
- ``incorrect``: the answer was extracted (and parsed) and is not equal, or breaks a rule of the task.
- ``unparseable``: no answer could be extracted, or what was extracted cannot be read.
- ``timeout``: the check hit a time limit (the checker's or the program's) and was stopped.
- ``error``: the checker itself failed (a bad reference, a crashed worker, out of memory).
"""

from __future__ import annotations

from dataclasses import dataclass

OUTCOMES = ("correct", "incorrect", "unparseable", "timeout", "error")


@dataclass(frozen=True)
class Outcome:
    """The result of one check of a response against a reference."""

    outcome: str
    """One of OUTCOMES."""
    reward: float
    """1.0 if correct else 0.0 for the correctness verifiers."""
    answer: str | None
    """Canonical extracted answer: equal answers give equal strings (a majority-vote key); None if nothing was extracted."""
    detail: str = ""
    """A short reason, for humans."""

    def __post_init__(self):
        if self.outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {self.outcome!r} (expected one of {OUTCOMES})")


def correct(answer: str | None, detail: str = "") -> Outcome:
    return Outcome("correct", 1.0, answer, detail)


def incorrect(answer: str | None, detail: str = "") -> Outcome:
    return Outcome("incorrect", 0.0, answer, detail)


def unparseable(detail: str, answer: str | None = None) -> Outcome:
    return Outcome("unparseable", 0.0, answer, detail)


def timeout(detail: str) -> Outcome:
    return Outcome("timeout", 0.0, None, detail)


def error(detail: str) -> Outcome:
    return Outcome("error", 0.0, None, detail)


def judged(equal: bool, answer: str | None, detail: str = "") -> Outcome:
    """``correct`` or ``incorrect`` from a comparison."""
    return correct(answer, detail) if equal else incorrect(answer, detail)


def outcome_counts(results) -> dict[str, int]:
    """Counts per outcome of Scores or Outcomes (anything with ``.outcome``); every outcome is present."""
    counts = dict.fromkeys(OUTCOMES, 0)
    for r in results:
        counts[r.outcome] += 1
    return counts
