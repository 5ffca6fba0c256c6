"""Fitted learning curves: held-out pass@1 against training compute, to tell "faster" from "better".

ScaleRL (Khatri et al. 2025, "The Art of Scaling Reinforcement Learning Compute for LLMs",
arXiv:2510.13786, eq. 1, §2.1) fits a sigmoid in compute C to the held-out pass rate R_C:

    R_C - R_0 = (A - R_0) / (1 + (C_mid / C)^B)

R_0 is the starting pass rate (here the step-0 evaluation, held fixed), A the asymptote (the ceiling
the recipe approaches), C_mid the compute at which half of the gain A - R_0 is reached and B > 0 the
steepness. They found that loss aggregation, advantage normalisation, curriculum and off-policy choices
mostly move C_mid and B (efficiency) and leave A in place, so a final-step table at a fixed budget reads
"faster" as "better"; comparing fitted A and C_mid separates the two.

Fit (:func:`fit_seed`): ``scipy.optimize.curve_fit`` (bounded trust-region least squares) in
(A, B, log C_mid), started from the three best points of a coarse grid over the three (the paper
grid-searches A and C_mid and fits B), keeping the least squared error. Bounds: 0 <= A <= 1; B in [B_BOUNDS]; C_mid within a factor
MID_RANGE of the evaluated compute. Compute is whatever axis the caller gives (training steps, tokens,
GPU-hours); the paper fits GPU-hours and drops its first ~1.5k (``skip_before``).

Uncertainty (:func:`fit_arm`) comes from seeds, by fitting each training seed separately: the estimate
is the mean over seeds (of A and B; of log C_mid, i.e. the geometric mean of C_mid) and the interval
the Student-t interval mean ± t_{0.975, S-1} * sd / sqrt(S). One seed gives an estimate and no
interval. The paper judged run-to-run noise in A from three independent runs (±0.02, its Fig. 8a);
here it is measured per arm. :func:`compare_fits` says whether two arms differ in ceiling, in
efficiency (midpoint), in both, or neither, by Welch's t-test on the per-seed estimates.

A fit is refused, with the reason, when a seed has fewer than MIN_EVALS evaluations after step 0,
no step-0 evaluation, or non-finite values only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, stats

MIN_EVALS = 4
"""Evaluations after step 0 a seed needs: one more than the three fitted parameters (A, B, C_mid),
so that the fit has a residual (R_0 comes from step 0)."""
B_BOUNDS = (0.05, 20.0)
"""B is the slope in log compute: 0.05 is nearly flat over a thousandfold of compute, 20 a step."""
MID_RANGE = 100.0
"""C_mid may lie at most this factor below the first or above the last evaluated compute (beyond it
the data say nothing about where the midpoint is)."""
MIN_GAIN = 0.01
"""A fitted gain by the last evaluation below one point of pass@1 leaves no midpoint to speak of: the
efficiency comparison is then not made."""
ALPHA = 0.05
"""Level of the interval (1 - ALPHA) and of the ceiling / efficiency tests."""


@dataclass(frozen=True)
class SeedFit:
    """One seed's fitted curve."""

    a: float
    b: float
    c_mid: float
    r0: float
    rmse: float
    points: int
    c_last: float
    """The largest compute evaluated: beyond it A and C_mid are extrapolations."""

    @property
    def gain(self) -> float:
        """Fitted gain over R_0 at the last evaluation, R(c_last) - R_0 (what the data saw)."""
        return float(sigmoid(self.c_last, self.r0, self.a, self.b, self.c_mid)) - self.r0


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float | None
    high: float | None
    """None with a single seed."""


@dataclass(frozen=True)
class ArmFit:
    """An arm's curve: ceiling A and midpoint C_mid with intervals over seeds, or the reason there is none."""

    name: str
    a: Interval | None = None
    c_mid: Interval | None = None
    b: Interval | None = None
    r0: float | None = None
    seeds: list[SeedFit] = field(default_factory=list)
    reason: str | None = None
    """Why there is no fit (every seed refused); None when there is one."""
    notes: list[str] = field(default_factory=list)
    """Dropped evaluations and refused seeds of an arm that was still fitted."""


@dataclass(frozen=True)
class CurveComparison:
    ceiling: str | None
    """"higher" / "lower" (other against control) / "same"; None when it cannot be tested."""
    efficiency: str | None
    """"faster" (smaller C_mid) / "slower" / "same"; None when it cannot be tested."""
    p_ceiling: float | None
    p_midpoint: float | None
    summary: str


def sigmoid(c, r0: float, a: float, b: float, c_mid: float):
    """ScaleRL eq. 1: R_C = R_0 + (A - R_0) / (1 + (C_mid / C)^B), for C > 0."""
    c = np.asarray(c, dtype=float)
    return r0 + (a - r0) / (1.0 + (c_mid / c) ** b)


def fit_seed(compute: Sequence[float], pass1: Sequence[float], r0: float,
             skip_before: float = 0.0) -> SeedFit | str:
    """Fit one seed's curve; the reason (a string) when it cannot be fitted.

    ``compute`` and ``pass1`` are the evaluations after step 0 (C > 0); points with a non-finite
    value, and those below ``skip_before``, are left out. ``r0`` is the step-0 pass@1.
    """
    c = np.asarray(compute, dtype=float)
    r = np.asarray(pass1, dtype=float)
    if c.shape != r.shape or c.ndim != 1:
        raise ValueError("compute and pass1 need the same length")
    if r0 is None or not math.isfinite(r0):
        return "no finite step-0 pass@1 (R_0)"
    keep = np.isfinite(c) & np.isfinite(r) & (c > 0) & (c >= skip_before)
    c, r = c[keep], r[keep]
    if len(c) < MIN_EVALS:
        return (f"{len(c)} usable evaluation(s) after step 0, need {MIN_EVALS} "
                "(one more than the 3 fitted parameters)")
    if len(np.unique(c)) != len(c):
        return "two evaluations at the same compute"
    lo, hi = math.log(c.min() / MID_RANGE), math.log(c.max() * MID_RANGE)
    bounds = ([0.0, B_BOUNDS[0], lo], [1.0, B_BOUNDS[1], hi])
    logc = np.log(c)

    def model(lc, a, b, log_mid):
        return r0 + (a - r0) / (1.0 + np.exp(b * (log_mid - lc)))

    best = None
    for p0 in _grid_starts(model, logc, r, lo, hi):
        try:
            theta, _ = optimize.curve_fit(model, logc, r, p0=p0, bounds=bounds, method="trf", maxfev=2000)
        except (RuntimeError, ValueError):
            continue
        sse = float(np.sum((model(logc, *theta) - r) ** 2))
        if best is None or sse < best[0]:
            best = (sse, theta)
    if best is None:
        return "the least-squares fit did not converge from any starting point"
    sse, (a, b, log_mid) = best
    return SeedFit(float(a), float(b), float(math.exp(log_mid)), float(r0), math.sqrt(sse / len(c)), len(c),
                   float(c.max()))


def _grid_starts(model, logc, r, lo, hi, keep: int = 3) -> list[list[float]]:
    """The ``keep`` best points of a coarse grid over (A, B, log C_mid) by squared error: the starts of
    the least-squares fit (a sigmoid's error surface has flat valleys a single start can stall in)."""
    a = np.linspace(0.0, 1.0, 21)
    b = np.array([0.25, 0.5, 1.0, 2.0, 4.0, 8.0])
    m = np.linspace(lo, hi, 25)
    ga, gb, gm = (x.ravel() for x in np.meshgrid(a, b, m, indexing="ij"))
    err = ((model(logc[None, :], ga[:, None], gb[:, None], gm[:, None]) - r[None, :]) ** 2).sum(axis=1)
    return [[float(ga[i]), float(gb[i]), float(gm[i])] for i in np.argsort(err)[:keep]]


def fit_arm(name: str, curves: Sequence[tuple[Sequence[float], Sequence[float], float]],
            skip_before: float = 0.0) -> ArmFit:
    """Fit each seed's (compute, pass@1, R_0) curve and combine them (module docstring): a refused
    seed is left out with a note; the arm is refused when no seed can be fitted."""
    fits, notes = [], []
    for s, (c, r, r0) in enumerate(curves):
        dropped = int(np.sum(~np.isfinite(np.asarray(r, dtype=float))))
        got = fit_seed(c, r, r0, skip_before)
        if isinstance(got, str):
            notes.append(f"seed {s}: not fitted: {got}")
            continue
        if dropped:
            notes.append(f"seed {s}: {dropped} evaluation(s) with a non-finite pass@1 left out")
        fits.append(got)
    if not fits:
        why = notes[0].split(": not fitted: ", 1)[-1] if notes else "no seeds"
        return ArmFit(name, reason=f"no curve fitted: {why}", notes=notes)
    beyond = sum(f.c_mid > f.c_last for f in fits)
    if beyond:
        notes.append(f"{beyond} of {len(fits)} seed(s) have C_mid beyond their last evaluation: "
                     "the ceiling A is an extrapolation")
    return ArmFit(
        name,
        a=_interval([f.a for f in fits], clip=(0.0, 1.0)),
        c_mid=_interval([math.log(f.c_mid) for f in fits], transform=math.exp),
        b=_interval([f.b for f in fits]),
        r0=float(np.mean([f.r0 for f in fits])),
        seeds=fits,
        notes=notes,
    )


def _interval(xs: list[float], transform=lambda x: x, clip=(-math.inf, math.inf)) -> Interval:
    m = float(np.mean(xs))
    if len(xs) < 2:
        return Interval(transform(m), None, None)
    half = float(stats.t.ppf(1 - ALPHA / 2, len(xs) - 1) * np.std(xs, ddof=1) / math.sqrt(len(xs)))
    return Interval(transform(m), max(transform(m - half), clip[0]), min(transform(m + half), clip[1]))


def compare_fits(control: ArmFit, other: ArmFit, alpha: float = ALPHA) -> CurveComparison:
    """Does ``other`` differ from ``control`` in ceiling (A), in efficiency (C_mid), in both, or neither?

    Each is Welch's t-test (unequal variances) on the per-seed estimates (A; log C_mid), at ``alpha``;
    it needs two fitted seeds in each arm. The midpoint is not compared when either arm's mean fitted
    gain at its last evaluation, |R(C_last) - R_0|, is below MIN_GAIN (a flat curve has no midpoint).
    "faster" means a smaller C_mid: half the gain reached with less compute.
    """
    for arm in (control, other):
        if arm.reason is not None:
            return CurveComparison(None, None, None, None, f"not compared: {arm.name}: {arm.reason}")
        if len(arm.seeds) < 2:
            return CurveComparison(None, None, None, None,
                                   f"not compared: {arm.name} has {len(arm.seeds)} fitted seed (need 2 for a test)")
    p_a = _welch([f.a for f in control.seeds], [f.a for f in other.seeds])
    ceiling = _direction(p_a, alpha, other.a.estimate - control.a.estimate, ("higher", "lower"))
    gains = [abs(float(np.mean([f.gain for f in arm.seeds]))) for arm in (control, other)]
    if min(gains) < MIN_GAIN:
        p_m, efficiency = None, None
    else:
        p_m = _welch([math.log(f.c_mid) for f in control.seeds], [math.log(f.c_mid) for f in other.seeds])
        efficiency = _direction(p_m, alpha, control.c_mid.estimate - other.c_mid.estimate, ("faster", "slower"))
    differs = [what for what, v in (("ceiling", ceiling), ("efficiency", efficiency)) if v not in (None, "same")]
    if differs:
        summary = "differs in " + " and ".join(differs)
    elif efficiency is None:
        summary = "same ceiling; efficiency not compared (a curve gains less than MIN_GAIN)"
    else:
        summary = "neither: not distinguishable in ceiling or efficiency at this budget"
    return CurveComparison(ceiling, efficiency, p_a, p_m, summary)


def _welch(x: list[float], y: list[float]) -> float:
    if np.std(x) == 0 and np.std(y) == 0:
        return 1.0 if np.mean(x) == np.mean(y) else 0.0
    return float(stats.ttest_ind(x, y, equal_var=False).pvalue)


def _direction(p: float, alpha: float, delta: float, words: tuple[str, str]) -> str:
    if p >= alpha:
        return "same"
    return words[0] if delta > 0 else words[1]
