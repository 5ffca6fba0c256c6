"""Fitted learning curves (rlvr_cli/compare/curves.py): the fit recovers a synthetic ScaleRL curve with
noise, intervals come from seeds, refusals say why, and the comparison separates ceiling from efficiency."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlvr_cli.compare.curves import MIN_EVALS, compare_fits, fit_arm, fit_seed, sigmoid

R0, A, B, MID = 0.30, 0.70, 1.5, 200.0
STEPS = np.arange(20, 1001, 20, dtype=float)  # 50 evaluations after step 0


def seeds(a=A, b=B, mid=MID, noise=0.01, n=3, seed=0, steps=STEPS):
    rng = np.random.default_rng(seed)
    return [(steps, sigmoid(steps, R0, a, b, mid) + rng.normal(0, noise, len(steps)), R0) for _ in range(n)]


def test_sigmoid_worked_example():
    # at C = C_mid half the gain: 0.3 + 0.4 / 2 = 0.5; at C = C_mid / 2 with B = 1: 0.3 + 0.4 / 3
    assert sigmoid(200.0, 0.3, 0.7, 1.0, 200.0) == pytest.approx(0.5)
    assert sigmoid(100.0, 0.3, 0.7, 1.0, 200.0) == pytest.approx(0.3 + 0.4 / 3)
    assert sigmoid(1e12, 0.3, 0.7, 1.5, 200.0) == pytest.approx(0.7)


def test_fit_recovers_a_noiseless_curve():
    f = fit_seed(STEPS, sigmoid(STEPS, R0, A, B, MID), R0)
    assert (f.a, f.b, f.c_mid) == (pytest.approx(A, abs=1e-4), pytest.approx(B, rel=1e-3), pytest.approx(MID, rel=1e-3))
    assert f.rmse < 1e-6 and f.points == 50


def test_fit_recovers_a_noisy_curve_with_intervals_from_seeds():
    fit = fit_arm("arm", seeds())
    assert fit.reason is None and len(fit.seeds) == 3
    assert fit.a.estimate == pytest.approx(A, abs=0.02)
    assert fit.c_mid.estimate == pytest.approx(MID, rel=0.15)
    assert fit.b.estimate == pytest.approx(B, rel=0.25)
    assert fit.a.low < A < fit.a.high and fit.c_mid.low < MID < fit.c_mid.high
    for f in fit.seeds:
        assert f.rmse == pytest.approx(0.01, rel=0.3)  # the residual is the noise


def test_one_seed_has_no_interval():
    fit = fit_arm("arm", seeds(n=1))
    assert fit.a.low is None and fit.a.high is None and fit.a.estimate == pytest.approx(A, abs=0.03)


def test_refuses_too_few_evaluations():
    few = STEPS[: MIN_EVALS - 1]
    got = fit_seed(few, sigmoid(few, R0, A, B, MID), R0)
    assert got == "3 usable evaluation(s) after step 0, need 4 (one more than the 3 fitted parameters)"
    fit = fit_arm("short", [(few, sigmoid(few, R0, A, B, MID), R0)] * 2)
    assert fit.a is None and fit.reason.startswith("no curve fitted: 3 usable evaluation(s)")
    assert fit_seed(STEPS, sigmoid(STEPS, R0, A, B, MID), float("nan")) == "no finite step-0 pass@1 (R_0)"
    assert fit_arm("none", []).reason == "no curve fitted: no seeds"


def test_nan_evaluations_are_left_out_and_said():
    c, r, r0 = seeds(n=1)[0]
    r = r.copy()
    r[[3, 10, 40]] = np.nan
    fit = fit_arm("arm", [(c, r, r0), seeds(n=1, seed=1)[0]])
    assert fit.reason is None and fit.seeds[0].points == 47
    assert fit.notes == ["seed 0: 3 evaluation(s) with a non-finite pass@1 left out"]
    # a seed left with too few finite points is refused, the other still fitted
    bad = np.full_like(r, np.nan)
    bad[:2] = 0.4
    fit = fit_arm("arm", [(c, bad, r0), seeds(n=1, seed=1)[0]])
    assert len(fit.seeds) == 1 and fit.notes[0].startswith("seed 0: not fitted: 2 usable evaluation(s)")


def test_skip_before_drops_early_evaluations():
    c, r, r0 = seeds(n=1)[0]
    assert fit_seed(c, r, r0, skip_before=500).points == 26


def test_compare_separates_efficiency_from_ceiling():
    control = fit_arm("control", seeds(seed=0))
    slower = fit_arm("slower", seeds(mid=500.0, seed=1))  # same ceiling, midpoint 2.5x later
    lower = fit_arm("lower", seeds(a=0.55, seed=2))  # same midpoint, lower ceiling
    twin = fit_arm("twin", seeds(seed=3))
    s = compare_fits(control, slower)
    assert (s.ceiling, s.efficiency) == ("same", "slower") and s.summary == "differs in efficiency"
    assert s.p_midpoint < 0.05 <= s.p_ceiling
    lo = compare_fits(control, lower)
    assert lo.ceiling == "lower" and lo.summary.startswith("differs in ceiling")
    assert compare_fits(slower, control).efficiency == "faster"
    t = compare_fits(control, twin)
    assert (t.ceiling, t.efficiency) == ("same", "same") and t.summary.startswith("neither")


def test_compare_refuses_without_seeds_or_fit():
    one = fit_arm("one", seeds(n=1))
    assert compare_fits(fit_arm("c", seeds()), one).summary == "not compared: one has 1 fitted seed (need 2 for a test)"
    short = fit_arm("short", [(STEPS[:2], [0.3, 0.4], R0)])
    assert compare_fits(short, one).summary.startswith("not compared: short: no curve fitted")


def test_flat_curve_has_no_midpoint_comparison():
    # no gain at all: A and C_mid are not identified (any A with C_mid far beyond the data fits)
    flat = [(STEPS, np.full(len(STEPS), R0) + np.random.default_rng(s).normal(0, 0.005, len(STEPS)), R0)
            for s in range(3)]
    f = fit_arm("flat", flat)
    assert all(abs(s.gain) < 0.01 for s in f.seeds)
    assert 0.0 <= f.a.low <= f.a.high <= 1.0  # the interval is clipped to pass rates
    c = compare_fits(f, fit_arm("control", seeds()))
    assert c.efficiency is None and c.p_midpoint is None
    assert math.isfinite(c.p_ceiling)


def test_midpoint_beyond_the_data_is_said():
    early = STEPS[:10]  # up to step 200 = C_mid: the ceiling is mostly extrapolated
    fit = fit_arm("early", seeds(steps=early, mid=800.0))
    assert any("the ceiling A is an extrapolation" in n for n in fit.notes)
