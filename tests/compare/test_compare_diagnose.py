"""Each failure-mode rule fires on a run built to have that failure, at the right step, and not on a healthy one."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the synthetic-run helpers, whatever pytest's import mode
from test_compare_synth import BASE_PASSK, healthy_evals, healthy_metrics, write_run

from rlvr_cli.compare.diagnose import diagnose, entropy_collapse, kl_explosion, length_inflation
from rlvr_cli.compare.load import load_run

STEPS = 60
T = np.arange(1, STEPS + 1, dtype=float)


def _run(tmp_path, metrics=None, evals=None, name="run"):
    return load_run(write_run(tmp_path, name, metrics=metrics, evals=evals, steps=STEPS))


def _evals(**pass16_by_step):
    """Eval files whose pass@16 follows the given values ({"s20": 0.9}); other k scaled along."""
    out = {0: dict(BASE_PASSK)}
    for key, p16 in pass16_by_step.items():
        out[int(key[1:])] = {k: v * p16 / BASE_PASSK[16] for k, v in BASE_PASSK.items()}
    return out


def test_healthy_run_has_no_failure_mode(tmp_path):
    verdicts = diagnose(_run(tmp_path))
    assert {m: v.status for m, v in verdicts.items()} == {
        "kl_explosion": "none",
        "entropy_collapse": "none",
        "length_inflation": "none",
    }
    assert all(v.onset_step is None for v in verdicts.values())


# --- KL explosion ----------------------------------------------------------------------------------
def test_kl_explosion_fires_where_the_run_up_begins(tmp_path):
    m = healthy_metrics(STEPS)
    # Healthy ~1e-3 until step 29, then a decade every ~1.3 steps up to 3 nats/token; reward collapses.
    kl = np.where(T < 30, 1e-3, np.minimum(1e-3 * 10 ** ((T - 29) * 0.75), 3.0))
    m["kl_mean"], m["kl_max"] = kl, kl * 30
    m["reward_mean"] = np.where(T < 33, 0.4, 0.0)
    v = kl_explosion(_run(tmp_path, m))
    assert v.status == "detected"
    assert 30 <= v.onset_step <= 33  # kl_max passes 10x its 0.1 floor at step 31
    assert v.evidence["trigger_step"] <= 35 and v.evidence["reward_end"] == 0.0
    assert "reward 0.4 -> 0" in v.message


def test_kl_explosion_on_the_findings_trajectory(tmp_path):
    """docs/design.md §8: per-token KL 1e-5 -> 0.14 (step 5) -> 0.63 (step 13) -> ~2 (step 17)."""
    m = healthy_metrics(STEPS)
    kl = np.interp(T, [1, 2, 5, 13, 17, 60], [0.0, 1e-5, 0.14, 0.63, 2.0, 2.5])
    m["kl_mean"], m["kl_max"] = kl, np.array([None] * STEPS, dtype=object)  # only the mean logged
    v = kl_explosion(_run(tmp_path, m))
    assert v.status == "detected" and 3 <= v.onset_step <= 7


def test_kl_turning_non_finite_is_an_explosion_from_that_step(tmp_path):
    m = healthy_metrics(STEPS)
    m["kl_max"] = np.where(T < 40, m["kl_max"], np.inf)
    m["kl_mean"] = np.where(T < 40, m["kl_mean"], np.nan)
    v = kl_explosion(_run(tmp_path, m))
    assert v.status == "detected" and v.onset_step == 40
    assert "turned non-finite at step 40" in v.message


def test_one_noisy_kl_step_or_one_nan_is_not_an_explosion(tmp_path):
    m = healthy_metrics(STEPS)
    m["kl_max"][24] = 5000.0  # a single spike at step 25
    m["kl_mean"][40] = np.nan  # one overflowed estimate at step 41
    assert kl_explosion(_run(tmp_path, m)).status == "none"


def test_kl_not_tracked_is_not_applicable(tmp_path):
    m = healthy_metrics(STEPS)
    m["kl_mean"] = m["kl_max"] = np.array([None] * STEPS, dtype=object)
    assert kl_explosion(_run(tmp_path, m)).status == "n/a"


# --- entropy collapse ------------------------------------------------------------------------------
def _collapsing_entropy():
    """0.21 until step 30, then down 0.007/step to 0.07 (FINDINGS: 0.21 -> 0.07): half of 0.21 at step 45."""
    return np.where(T <= 30, 0.21, np.maximum(0.21 - 0.007 * (T - 30), 0.07))


def test_entropy_collapse_with_pass_at_k_falling_below_base(tmp_path):
    m = healthy_metrics(STEPS)
    m["entropy"] = _collapsing_entropy()
    v = entropy_collapse(_run(tmp_path, m, _evals(s20=0.98, s40=0.9, s60=0.55)))
    assert v.status == "detected" and 44 <= v.onset_step <= 46
    assert v.evidence["k"] == 16 and v.evidence["passk_last"] == pytest.approx(0.55)
    assert "fell below the base" in v.message


def test_entropy_collapse_when_pass_at_k_stops_rising(tmp_path):
    m = healthy_metrics(STEPS)
    m["entropy"] = _collapsing_entropy()
    evals = {0: {1: 0.3, 16: 0.8}, 20: {1: 0.4, 16: 0.85}, 40: {1: 0.45, 16: 0.86}, 60: {1: 0.42, 16: 0.87}}
    v = entropy_collapse(_run(tmp_path, m, evals))
    assert v.status == "detected" and "stopped rising" in v.message
    # At the ceiling a flat pass@k says nothing: only falling below the base would count.
    at_ceiling = {0: {16: 0.985}, 20: {16: 0.99}, 40: {16: 0.995}, 60: {16: 0.99}}
    assert entropy_collapse(_run(tmp_path, m, at_ceiling, name="ceiling")).status == "none"


def test_entropy_fall_with_pass_at_k_still_rising_is_not_collapse(tmp_path):
    m = healthy_metrics(STEPS)
    m["entropy"] = _collapsing_entropy()
    evals = {0: {1: 0.3, 16: 0.8}, 20: {1: 0.4, 16: 0.82}, 40: {1: 0.5, 16: 0.86}, 60: {1: 0.6, 16: 0.95}}
    v = entropy_collapse(_run(tmp_path, m, evals))
    assert v.status == "none" and "kept rising" in v.message


def test_entropy_fall_without_evals_is_only_possible(tmp_path):
    m = healthy_metrics(STEPS)
    m["entropy"] = _collapsing_entropy()
    v = entropy_collapse(_run(tmp_path, m, evals={}))
    assert v.status == "possible" and 44 <= v.onset_step <= 46


# --- length inflation ------------------------------------------------------------------------------
def _inflating_incorrect_length():
    """23 tokens until step 30, then one more token per step (53 at step 60)."""
    return np.where(T <= 30, 23.0, 23.0 + (T - 30))


def test_length_inflation_when_accuracy_stays_flat(tmp_path):
    m = healthy_metrics(STEPS)
    m["len_incorrect"] = _inflating_incorrect_length()
    m["accuracy"] = 0.35 + np.random.default_rng(1).normal(0, 0.02, STEPS)
    v = length_inflation(_run(tmp_path, m))
    assert v.status == "detected" and 31 <= v.onset_step <= 34
    assert v.evidence["len_incorrect_start"] == pytest.approx(23.0)


def test_longer_work_that_raises_accuracy_is_not_inflation(tmp_path):
    m = healthy_metrics(STEPS)  # accuracy 0.35 -> ~0.7
    m["len_incorrect"] = _inflating_incorrect_length()
    m["len_correct"] = np.where(T <= 30, 21.0, 21.0 + (T - 30) / 2)  # right ones lengthen too: 21 -> 36
    v = length_inflation(_run(tmp_path, m))
    assert v.status == "none" and "correct responses lengthened too" in v.message, v.message
    assert v.evidence["len_correct_at_end"] >= 1.1 * v.evidence["len_correct_at_onset"]


def test_only_wrong_responses_lengthening_is_inflation_even_while_accuracy_rises(tmp_path):
    """Dr. GRPO's signature of 1/|o| (results/length_check: GRPO's wrong responses 60 -> 210 tokens while
    accuracy 0.52 -> 0.74 and the right ones stay at ~40)."""
    m = healthy_metrics(STEPS)  # accuracy 0.35 -> ~0.7, len_correct flat at ~21
    m["len_incorrect"] = _inflating_incorrect_length()
    v = length_inflation(_run(tmp_path, m))
    assert v.status == "detected" and 31 <= v.onset_step <= 34, v.message
    assert "only the incorrect responses lengthened" in v.message
    assert v.evidence["accuracy_end"] > v.evidence["accuracy_at_onset"] + 0.05
    assert v.evidence["len_correct_at_end"] == pytest.approx(21.0, abs=0.5)


def test_without_correct_length_rising_accuracy_still_excuses(tmp_path):
    m = healthy_metrics(STEPS)
    m["len_incorrect"] = _inflating_incorrect_length()
    del m["len_correct"]
    v = length_inflation(_run(tmp_path, m))
    assert v.status == "none" and "accuracy rose" in v.message, v.message


def test_length_inflation_after_accuracy_has_plateaued(tmp_path):
    # accuracy learns first (0.35 -> 0.7 by step 20, flat after), then wrong responses lengthen
    m = healthy_metrics(STEPS)
    m["accuracy"] = np.minimum(0.35 + 0.35 * T / 20, 0.7) + np.random.default_rng(2).normal(0, 0.02, STEPS)
    m["len_incorrect"] = _inflating_incorrect_length()
    m["len_correct"] = np.where(T <= 30, 21.0, 21.0 - (T - 30) / 10)  # 1/|o| pushes correct ones shorter
    v = length_inflation(_run(tmp_path, m))
    assert v.status == "detected" and 31 <= v.onset_step <= 34, v.message
    assert v.evidence["accuracy_at_onset"] == pytest.approx(0.7, abs=0.03)
    assert v.evidence["accuracy_start"] < 0.5  # the run-start level would have excused it
    assert "(correct 21 -> 18" in v.message


def test_a_rise_that_fell_back_by_the_end_is_not_inflation(tmp_path):
    m = healthy_metrics(STEPS)
    m["accuracy"] = 0.35 + np.random.default_rng(1).normal(0, 0.02, STEPS)
    m["len_incorrect"] = np.interp(T, [1, 20, 35, 45, 60], [23, 23, 60, 15, 13])  # up to 60, then down to 13
    v = length_inflation(_run(tmp_path, m))
    assert v.status == "none" and "but ended below it" in v.message, v.message
    assert 50 < v.evidence["len_incorrect_max"] <= 60 and v.evidence["trigger_step"] < 35  # smoothed peak


def test_incorrect_length_with_nulls_when_all_correct(tmp_path):
    m = healthy_metrics(STEPS)
    li = list(m["len_incorrect"])
    for i in range(0, STEPS, 3):
        li[i] = None  # steps where every response was correct
    m["len_incorrect"] = np.array(li, dtype=object)
    assert length_inflation(_run(tmp_path, m)).status == "none"


def test_sft_run_is_not_applicable_everywhere(tmp_path):
    m = {"loss": np.linspace(2.0, 0.5, 20), "lr": np.full(20, 3e-3), "grad_norm": np.full(20, 1.0)}
    verdicts = diagnose(_run(tmp_path, m, evals={}))
    assert {v.status for v in verdicts.values()} == {"n/a"}


def test_healthy_evals_helper_is_monotone():
    ev = healthy_evals(STEPS)
    assert ev[60][16] >= ev[0][16] and ev[60][1] > ev[0][1]
