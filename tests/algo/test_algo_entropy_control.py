"""Adaptive entropy coefficient (rlvr_cli/algo/entropy_control.py): the update rule by hand, its bounds and
gate, and a closed loop that holds entropy near the target."""

from __future__ import annotations

import math

import pytest

from rlvr_cli.algo.entropy_control import applied_entropy_coef, next_entropy_coef

TARGET, DELTA = 0.2, 0.005  # TRL's defaults


def test_adaptive_entropy_worked_example():
    # c_0 = 0; e = 0.5 -> max(0 - 0.005, 0) = 0, alpha 0; e = 0.1 -> 0.005, alpha 0.005; e = 0.1 -> 0.010;
    # e = 0.3 -> 0.005 with alpha 0 (entropy above target: no bonus)
    c, seen = 0.0, []
    for e in (0.5, 0.1, 0.1, 0.3):
        c = next_entropy_coef(c, e, TARGET, DELTA)
        seen.append((round(c, 12), applied_entropy_coef(c, e, TARGET)))
    assert seen == [(0.0, 0.0), (0.005, 0.005), (0.01, 0.01), (0.005, 0.0)]


def test_bounds_and_equality():
    assert next_entropy_coef(0.999, 0.0, TARGET, DELTA) == 1.0  # clamped at coef_max
    assert next_entropy_coef(0.3, 0.0, TARGET, 0.5, coef_max=0.5) == 0.5
    assert next_entropy_coef(0.002, 9.0, TARGET, DELTA) == 0.0  # clamped at coef_min
    assert next_entropy_coef(0.01, TARGET, TARGET, DELTA) == pytest.approx(0.015)  # equality counts as at-or-below
    assert applied_entropy_coef(0.01, TARGET, TARGET) == 0.01


def test_no_bonus_before_the_first_measurement():
    assert applied_entropy_coef(0.3, math.inf, TARGET) == 0.0


def test_bad_arguments():
    with pytest.raises(ValueError):
        next_entropy_coef(0.0, 0.1, TARGET, -0.1)
    with pytest.raises(ValueError):
        next_entropy_coef(0.0, 0.1, TARGET, DELTA, coef_min=0.5, coef_max=0.1)
    with pytest.raises(ValueError):
        next_entropy_coef(0.0, math.nan, TARGET, DELTA)


def test_closed_loop_holds_entropy_near_the_target():
    # toy dynamics: entropy drifts down by 0.01 per update, and the applied bonus alpha raises it by 2 * alpha.
    # From 0.6 the bonus stays off (c = 0) until entropy first reaches the target, then c grows until the bonus
    # outweighs the drift (alpha > 0.005) and entropy oscillates in a band around the target.
    c, last, e = 0.0, math.inf, 0.6
    trace = []
    for _ in range(400):
        alpha = applied_entropy_coef(c, last, TARGET)
        e = e - 0.01 + 2 * alpha
        c = next_entropy_coef(c, e, TARGET, DELTA)
        last = e
        trace.append((e, alpha))
    first_low = next(k for k, (e, _) in enumerate(trace) if e <= TARGET)
    assert all(a == 0.0 for _, a in trace[: first_low + 1])  # off until measured at or below the target
    tail = [e for e, _ in trace[200:]]
    assert min(tail) > TARGET - 0.03 and max(tail) < TARGET + 0.03  # without the controller: 0.6 - 4.0 = -3.4
    assert sum(tail) / len(tail) == pytest.approx(TARGET, abs=0.02)
