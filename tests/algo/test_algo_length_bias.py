"""Length bias of the aggregation (rlvr_cli/algo/length_bias.py) against hand-computed numbers."""

from __future__ import annotations

import pytest
import torch

from rlvr_cli.algo.aggregation import aggregate
from rlvr_cli.algo.length_bias import length_bias, per_token_gradient_weight

# the module docstring's worked example: one right response, three wrong ones of lengths 2, 4, 8
ADV = [1.0, -1.0, -1.0, -1.0]
LENS = [2, 2, 4, 8]
OK = [True, False, False, False]


def test_grpo_weight_is_abs_advantage_over_n_seq_times_length():
    g = per_token_gradient_weight(ADV, LENS, "seq_mean_token_mean")
    assert g.tolist() == pytest.approx([1 / 8, 1 / 8, 1 / 16, 1 / 32])


def test_dr_grpo_weight_is_constant():
    g = per_token_gradient_weight(ADV, LENS, "seq_mean_token_sum_norm", length_constant=10)
    assert g.tolist() == pytest.approx([1 / 40] * 4)


def test_token_mean_weight_is_abs_advantage_over_all_tokens():
    g = per_token_gradient_weight([2.0, -1.0, 0.0], [1, 3, 4], "token_mean")
    assert g.tolist() == pytest.approx([2 / 8, 1 / 8, 0.0])


@pytest.mark.parametrize("mode", ["seq_mean_token_mean", "token_mean", "seq_mean_token_sum_norm"])
def test_weight_is_the_gradient_of_the_aggregated_loss(mode):
    # d loss / d logp_it of loss = aggregate(-A_i * logp_it) is -A_i * g_i / |A_i| on every counted token
    adv = torch.tensor([0.5, -1.5, 2.0])
    lens = torch.tensor([3, 1, 2])
    mask = (torch.arange(3).unsqueeze(0) < lens.unsqueeze(1)).float()
    logp = torch.zeros(3, 3, requires_grad=True)
    aggregate(-adv.unsqueeze(1) * logp, mask, mode, length_constant=7).backward()
    g = per_token_gradient_weight(adv, lens, mode, length_constant=7)
    expected = (-torch.sign(adv) * g).unsqueeze(1) * mask
    assert torch.allclose(logp.grad, expected)


def test_masked_response_gets_no_weight_and_leaves_n_seq():
    # lengths [2, 0]: N_seq = 1, so the live response gets |A| / (1 * 2)
    g = per_token_gradient_weight([1.0, -1.0], [2, 0], "seq_mean_token_mean")
    assert g.tolist() == pytest.approx([0.5, 0.0])


def test_grpo_shares_and_correlation_worked_example():
    b = length_bias(ADV, LENS, OK, "seq_mean_token_mean")
    assert b.share_incorrect == pytest.approx(7 / 11)
    assert b.share_incorrect_terciles == pytest.approx((4 / 11, 2 / 11, 1 / 11))
    # Pearson of (2, 4, 8) with (4, 2, 1)/32: -78 / sqrt(168 * 42) = -78/84
    assert b.corr_len_weight_incorrect == pytest.approx(-78 / 84)


def test_dr_grpo_shares_are_flat_and_correlation_undefined():
    b = length_bias(ADV, LENS, OK, "seq_mean_token_sum_norm", length_constant=16)
    assert b.share_incorrect == pytest.approx(3 / 4)
    assert b.share_incorrect_terciles == pytest.approx((1 / 4, 1 / 4, 1 / 4))
    assert b.corr_len_weight_incorrect is None  # constant weight


def test_terciles_split_by_rank_larger_groups_first_and_skip_zero_advantage():
    # incorrect with gradient: lengths 5, 1, 3, 2 (the A=0 one is left out); ranks -> [1, 2] [3] [5]
    adv = [1.0, -1.0, -1.0, -1.0, -1.0, 0.0]
    lens = [4, 5, 1, 3, 2, 9]
    ok = [True, False, False, False, False, False]
    b = length_bias(adv, lens, ok, "seq_mean_token_sum_norm", length_constant=10)
    assert b.share_incorrect == pytest.approx(4 / 5)
    assert b.share_incorrect_terciles == pytest.approx((2 / 5, 1 / 5, 1 / 5))


def test_no_gradient_gives_none_and_metric_names():
    b = length_bias([0.0, 0.0], [3, 4], [False, False], "seq_mean_token_mean")
    assert b.share_incorrect is None and b.corr_len_weight_incorrect is None
    m = length_bias(ADV, LENS, OK, "seq_mean_token_mean").as_metrics()
    assert list(m) == [
        "gw_incorrect_share",
        "gw_incorrect_short_share",
        "gw_incorrect_mid_share",
        "gw_incorrect_long_share",
        "gw_len_corr_incorrect",
    ]
    assert m["gw_incorrect_long_share"] == pytest.approx(1 / 11)


def test_size_mismatch_is_an_error():
    with pytest.raises(ValueError, match="differ in size"):
        length_bias([1.0], [1, 2], [True], "token_mean")
    with pytest.raises(ValueError, match="length_constant"):
        per_token_gradient_weight([1.0], [1], "seq_mean_token_sum_norm")
