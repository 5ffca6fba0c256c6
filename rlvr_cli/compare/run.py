"""One run as ``rlvr compare`` holds it, whoever wrote it: rlvr's trainer (:mod:`.load`) or TRL / verl
(:mod:`.foreign`). The readers sit above this module and beside each other."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd


class RunUnreadable(Exception):
    """A run that cannot be compared at all; the message is the reason shown to the user."""


@dataclass
class Run:
    """One run as read from disk. ``metrics`` is indexed by step (ascending, unique) with float
    columns (null and missing -> NaN); ``nonfinite`` has the same shape and is True exactly where the
    log held NaN or +-Infinity (a diverged value, as opposed to a value that was not logged)."""

    path: Path
    recipe: dict
    status: str
    seed: int | None
    metrics: pd.DataFrame
    nonfinite: pd.DataFrame
    evals: dict[int, dict] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    seconds: float | None = None
    """Wall time of the run from run.json's ``started`` to ``ended`` (None when unknown): what a plan costs."""

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def algorithm(self) -> str:
        return str(self.recipe.get("algorithm", "rl"))

    @property
    def last_step(self) -> int:
        return int(self.metrics.index.max())

    def series(self, key: str) -> pd.Series | None:
        """The logged values of ``key`` by step, or None when the run never logged it (all null)."""
        if key not in self.metrics.columns:
            return None
        s = self.metrics[key]
        if s.isna().all() and not self.nonfinite[key].any():
            return None
        return s


@dataclass
class Skipped:
    path: str
    reason: str


def unreadable(e: OSError, given: str | Path = "") -> str:
    """A Skipped reason for a file or directory the operating system would not let us read (naming it
    unless it is ``given``, the argument the reason is reported under)."""
    name = getattr(e, "filename", None)
    where = f" {name}" if name and str(name) != str(given) else ""
    return f"cannot read{where}: {e.strerror or type(e).__name__}"


def to_frames(rows: dict[int, dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Metric rows by step -> (values, where a value was NaN or +-inf) as :attr:`Run.metrics` holds them."""
    steps = sorted(rows)
    keys: list[str] = []
    for s in steps:
        keys.extend(k for k in rows[s] if k != "step" and k not in keys)
    values = {k: [_as_float(rows[s].get(k)) for s in steps] for k in keys}
    metrics = pd.DataFrame(values, index=pd.Index(steps, name="step"), dtype=float)
    nonfinite = pd.DataFrame(
        {k: [_is_nonfinite_number(rows[s].get(k)) for s in steps] for k in keys},
        index=metrics.index,
        dtype=bool,
    )
    return metrics, nonfinite


def _as_float(v) -> float:
    """Numbers as floats (NaN and +-inf kept, an int beyond float's range -> +-inf); null, strings and
    anything else -> NaN."""
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        try:
            return float(v)
        except OverflowError:
            return math.inf if v > 0 else -math.inf
    return np.nan


def _is_nonfinite_number(v) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float)) and not math.isfinite(_as_float(v))
