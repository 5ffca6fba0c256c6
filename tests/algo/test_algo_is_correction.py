"""Truncated / masked importance weights and mismatch statistics (rlvr_cli/algo/is_correction.py)."""

from __future__ import annotations

import math

import pytest
import torch

from rlvr_cli.algo.is_correction import IS_MODES, is_correction_weights, mismatch_stats

# one sequence of 2 valid tokens and a padding slot: token ratios pi_trainer / pi_sampler = 3 and 0.5
TRAINER = torch.tensor([[math.log(3.0), math.log(0.5), 9.0]])
SAMPLER = torch.zeros(1, 3)
MASK = torch.tensor([[1.0, 1.0, 0.0]])


def _w(mode, cap=2.0, cap_low=None, trainer=TRAINER, sampler=SAMPLER, mask=MASK):
    return is_correction_weights(trainer, sampler, mask, mode, cap, cap_low)


def test_token_truncate_caps_above():
    out = _w("token_truncate")
    assert out.weights.flatten().tolist() == pytest.approx([2.0, 0.5, 0.0])
    assert out.corrected.tolist() == [[True, False, False]]
    assert out.stats["is_corrected_frac"] == pytest.approx(0.5)
    assert out.stats["is_weight_mean"] == pytest.approx(1.25)


def test_token_mask_zeroes_above_the_cap():
    out = _w("token_mask")
    assert out.weights.flatten().tolist() == pytest.approx([0.0, 0.5, 0.0])
    assert out.corrected.tolist() == [[True, False, False]]


def test_sequence_ratio_is_the_product_and_both_sequence_modes_keep_1_5():
    # 3 * 0.5 = 1.5 <= 2 on every valid token
    for mode in ("sequence_truncate", "sequence_mask"):
        out = _w(mode)
        assert out.weights.flatten().tolist() == pytest.approx([1.5, 1.5, 0.0])
        assert not out.corrected.any()


def test_sequence_modes_above_the_cap():
    # cap 1.2 < 1.5: truncate -> 1.2 on both tokens, mask -> 0 on both
    assert _w("sequence_truncate", cap=1.2).weights.flatten().tolist() == pytest.approx([1.2, 1.2, 0.0])
    out = _w("sequence_mask", cap=1.2)
    assert out.weights.flatten().tolist() == [0.0, 0.0, 0.0]
    assert out.stats["is_corrected_frac"] == 1.0


def test_lower_cap():
    # cap_low 0.6: token 0.5 is raised to 0.6 (truncate) or zeroed (mask)
    assert _w("token_truncate", cap_low=0.6).weights.flatten().tolist() == pytest.approx([2.0, 0.6, 0.0])
    assert _w("token_mask", cap_low=0.6).weights.flatten().tolist() == pytest.approx([0.0, 0.0, 0.0])


def test_mode_none_is_ones_but_still_measures():
    out = _w("none")
    assert out.weights.flatten().tolist() == [1.0, 1.0, 0.0]
    assert out.stats["is_corrected_frac"] == 0.0
    assert out.stats["mismatch_abs_max"] == pytest.approx(math.log(3.0))


def test_equal_log_probs_give_unit_weights_in_every_mode():
    lp = torch.randn(3, 5, generator=torch.Generator().manual_seed(0))
    for mode in IS_MODES:
        out = is_correction_weights(lp, lp.clone(), torch.ones(3, 5), mode)
        assert torch.equal(out.weights, torch.ones(3, 5)) and not out.corrected.any()
        assert out.stats["mismatch_abs_mean"] == 0.0 and out.stats["is_ratio_p50"] == 1.0


def test_weights_are_detached():
    lp = torch.zeros(1, 2, requires_grad=True)
    out = is_correction_weights(lp, torch.full((1, 2), -0.1), torch.ones(1, 2), "token_truncate")
    assert not out.weights.requires_grad


def test_mismatch_stats_hand_values():
    # d = trainer - sampler = [0.1, -0.3]: |d| mean 0.2, max 0.3; ratios e^-0.3 and e^0.1
    s = mismatch_stats(torch.tensor([[0.1, -0.3]]), torch.zeros(1, 2), torch.ones(1, 2))
    assert s["mismatch_abs_mean"] == pytest.approx(0.2) and s["mismatch_abs_max"] == pytest.approx(0.3)
    lo, hi = math.exp(-0.3), math.exp(0.1)
    assert s["is_ratio_p50"] == pytest.approx((lo + hi) / 2)
    assert s["is_ratio_p01"] == pytest.approx(lo + 0.01 * (hi - lo))
    assert s["is_ratio_p99"] == pytest.approx(lo + 0.99 * (hi - lo))
    assert mismatch_stats(torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1, 2)) == {}


def test_extreme_log_differences_stay_finite():
    out = is_correction_weights(torch.tensor([[1e4, -1e4]]), torch.zeros(1, 2), torch.ones(1, 2), "token_truncate")
    assert out.weights.flatten().tolist() == pytest.approx([2.0, math.exp(-20.0)])
    assert math.isfinite(out.stats["is_ratio_p99"])


def test_bad_arguments_are_errors():
    with pytest.raises(ValueError, match="mode"):
        _w("token_clip")
    with pytest.raises(ValueError, match="cap"):
        _w("token_truncate", cap=1.0)
    with pytest.raises(ValueError, match="cap_low"):
        _w("token_truncate", cap_low=1.5)
