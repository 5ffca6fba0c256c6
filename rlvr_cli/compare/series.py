"""Small robust statistics on per-step series (pandas Series indexed by step) and across seeds."""

from __future__ import annotations

import numpy as np
import pandas as pd


def finite(s: pd.Series) -> pd.Series:
    """The finite values of ``s`` (NaN, +-inf and nulls dropped), still indexed by step."""
    return s[np.isfinite(s.to_numpy(dtype=float))]


def start_level(s: pd.Series, n: int) -> float:
    """Median of the first ``n`` finite values: the level a run starts from, robust to one odd step."""
    head = finite(s).iloc[:n]
    return float(head.median()) if len(head) else float("nan")


def tail_level(s: pd.Series, n: int, nonfinite: pd.Series | None = None) -> float:
    """Median of the last ``n`` logged values. Nulls (NaN not flagged in ``nonfinite``) are skipped;
    logged infinities take part in the median, and when most of those values are logged NaN the
    result is NaN: a run that diverged at the end ends non-finite."""
    keep = s.notna() if nonfinite is None else (s.notna() | nonfinite.reindex(s.index, fill_value=False))
    tail = s[keep].iloc[-n:].to_numpy(dtype=float)
    if not len(tail):
        return float("nan")
    nan = np.isnan(tail)
    if nan.sum() * 2 > len(tail):  # mostly NaN: the run ended diverged
        return float("nan")
    return float(np.median(tail[~nan]))


def rolling_median(s: pd.Series, window: int) -> pd.Series:
    """Centred rolling median over ``window`` logged points of the finite values: a single noisy step
    (or two, for window 5) cannot move it, and a step change stays at the step where it happened."""
    f = finite(s)
    if window <= 1 or f.empty:
        return f
    return f.rolling(window, center=True, min_periods=1).median()


def rolling_mean(s: pd.Series, window: int) -> pd.Series:
    """Centred rolling mean over ``window`` points of the finite values (the plots' light smoothing)."""
    f = finite(s)
    if window <= 1 or f.empty:
        return f
    return f.rolling(window, center=True, min_periods=1).mean()


def first_sustained(mask: pd.Series, persist: int) -> int | None:
    """First step t where ``mask`` is True at t and at the next ``persist - 1`` points (or at every
    point left, for a run that has not logged that many more)."""
    values = mask.to_numpy(dtype=bool)
    steps = mask.index.to_numpy()
    for i in range(len(values)):
        if values[i] and values[i : i + persist].all():
            return int(steps[i])
    return None


def stretch_start(mask: pd.Series, step: int) -> int:
    """Earliest step of the unbroken run of True in ``mask`` that ends at ``step`` (``step`` itself
    when ``mask`` is False there)."""
    upto = mask.loc[:step]
    values = upto.to_numpy(dtype=bool)
    i = len(values) - 1
    if i < 0 or not values[i]:
        return step
    while i > 0 and values[i - 1]:
        i -= 1
    return int(upto.index[i])


def across_seeds(per_seed: list[pd.Series], band: str) -> pd.DataFrame:
    """Mean over the seeds that logged each step, with a band: ``minmax`` (lo = min, hi = max) or
    ``std`` (mean -+ sample std, ddof=1; zero width with one seed). Columns: mean, lo, hi, n.

    NaN means "not logged" and is skipped; a step where some seed holds +-inf (a diverged value)
    gets NaN mean and band, so a plot shows a gap there rather than the mean of the seeds that survived."""
    table = pd.concat(per_seed, axis=1) if per_seed else pd.DataFrame()
    if table.empty:
        return pd.DataFrame(columns=["mean", "lo", "hi", "n"], dtype=float)
    table = table.sort_index()
    diverged = np.isinf(table.to_numpy(dtype=float)).any(axis=1)
    table = table.where(~np.isinf(table.to_numpy(dtype=float)))
    mean = table.mean(axis=1)
    if band == "std":
        sd = table.std(axis=1, ddof=1).fillna(0.0)
        lo, hi = mean - sd, mean + sd
    else:
        lo, hi = table.min(axis=1), table.max(axis=1)
    out = pd.DataFrame({"mean": mean, "lo": lo, "hi": hi, "n": table.count(axis=1)})
    out.loc[diverged, ["mean", "lo", "hi"]] = np.nan
    return out[(out["n"] > 0) | diverged]


def spread(values: list[float | None]) -> dict:
    """Seed spread of one number over the seeds where it is finite: mean, std (ddof=1; null with one
    seed), min, max, n; ``nonfinite`` counts seeds whose value was NaN or infinite (a diverged run)."""
    given = [float(v) for v in values if v is not None]
    x = np.array([v for v in given if np.isfinite(v)], dtype=float)
    bad = len(given) - int(x.size)
    if x.size == 0:
        return {"mean": None, "std": None, "min": None, "max": None, "n": 0, "nonfinite": bad}
    return {
        "mean": float(x.mean()),
        "std": float(x.std(ddof=1)) if x.size > 1 else None,
        "min": float(x.min()),
        "max": float(x.max()),
        "n": int(x.size),
        "nonfinite": bad,
    }
