"""rlvr_cli/train/step_stats.py in one process: the update's clip and ratio statistics and the step's KL, by hand."""

from __future__ import annotations

import math

import pytest
import torch

from rlvr_cli.algo.policy_loss import SurrogateOut
from rlvr_cli.train.step_stats import UpdateStats, kl_metrics, mean


def test_clip_and_ratio_statistics_count_only_loss_tokens():
    ratio = torch.tensor([[0.7, 1.0, 1.4], [9.0, 1.1, 0.5]])
    sur = SurrogateOut(loss=torch.zeros(2, 3), ratio=ratio,
                       clip_low=torch.tensor([[True, False, False], [False, False, True]]),
                       clip_high=torch.tensor([[False, False, True], [False, False, False]]),
                       dual_clip=torch.zeros(2, 3, dtype=torch.bool))
    mask = torch.tensor([[1.0, 1.0, 1.0], [0.0, 1.0, 1.0]])  # the 9.0 is not a loss token
    s = UpdateStats()
    s.add_tokens(sur, mask)
    s.add_entropy(torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), mask)
    s.losses += [0.5, 1.5]
    s.norms += [2.0, 3.0]
    s.reduce()  # one process: unchanged
    m = s.metrics()
    # 5 loss tokens: 2 clipped low (0.7, 0.5), 1 high (1.4); entropy (1+2+3+5+6)/5 = 3.4
    assert (m["clip_low_frac"], m["clip_high_frac"], m["dual_clip_frac"]) == (0.4, 0.2, 0.0)
    assert (m["ratio_max"], m["ratio_min"]) == (pytest.approx(1.4), pytest.approx(0.5))
    assert m["entropy"] == pytest.approx(3.4) and m["loss"] == 1.0 and m["grad_norm"] == 3.0


def test_an_update_without_tokens_reports_none_not_a_division_by_zero():
    m = UpdateStats().metrics()
    assert m["entropy"] is None and m["ratio_max"] is None and m["ratio_min"] is None and m["clip_low_frac"] == 0.0
    assert m["loss"] is None and m["grad_norm"] is None and mean([]) is None


def test_kl_by_hand():
    # k1 = logp - logp_ref: tokens log(0.5/0.25) = log 2 and 0 (and one masked out)
    old = torch.log(torch.tensor([[0.5, 0.3], [0.9, 0.2]]))
    ref = torch.log(torch.tensor([[0.25, 0.3], [0.1, 0.2]]))
    mask = torch.tensor([[1.0, 1.0], [0.0, 1.0]])
    m = kl_metrics("k1", old, ref, mask, n_rows=2)
    assert m["kl_mean"] == pytest.approx(math.log(2) / 3, abs=1e-6)
    assert m["kl_max"] == pytest.approx(math.log(2), abs=1e-6) and m["kl_seq_mean"] == pytest.approx(math.log(2) / 2, abs=1e-6)
    assert kl_metrics("k3", old, None, mask, 2) == {"kl_mean": None, "kl_max": None, "kl_seq_mean": None}
