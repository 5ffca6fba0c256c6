"""Top-entropy mask, Clip-Cov and KL-Cov (rlvr_cli/algo/entropy_remedies.py): hand-computed selections."""

from __future__ import annotations

import pytest
import torch

from rlvr_cli.algo.aggregation import aggregate
from rlvr_cli.algo.entropy_remedies import (
    clip_cov_selection,
    cov_selection_count,
    detach_selected,
    high_entropy_threshold,
    kl_cov_penalty,
    kl_cov_selection,
    token_covariance,
    top_entropy_mask,
)

# ---------------------------------------------------------------- top-entropy mask


def test_threshold_is_the_linear_quantile_of_valid_tokens():
    # valid entropies [0, 1, 2, 3, 4]; quantile 0.8 at position 0.8 * 4 = 3.2 -> 3.2
    ent = torch.tensor([[0.0, 1.0, 2.0, 9.0], [3.0, 4.0, 9.0, 9.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])  # the 9s are padding
    assert float(high_entropy_threshold(ent, mask, 0.2)) == pytest.approx(3.2)
    keep = top_entropy_mask(ent, mask, 0.2)
    assert keep.tolist() == [[False, False, False, False], [False, True, False, False]]


def test_quantile_one_keeps_every_valid_token_and_no_padding():
    ent = torch.tensor([[0.5, 0.1, 7.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    assert top_entropy_mask(ent, mask, 1.0).tolist() == [[True, True, False]]


def test_ties_at_the_threshold_are_kept():
    # [1, 1, 1, 1]: every quantile is 1 and every token is >= 1
    ent = torch.ones(1, 4)
    assert top_entropy_mask(ent, torch.ones(1, 4), 0.2).all()


def test_no_valid_token_keeps_nothing():
    assert not top_entropy_mask(torch.ones(2, 3), torch.zeros(2, 3), 0.2).any()


def test_bad_quantile_is_an_error():
    with pytest.raises(ValueError):
        high_entropy_threshold(torch.ones(1, 2), torch.ones(1, 2), 0.0)


def test_mask_shrinks_the_numerator_only():
    # token_mean over 4 valid tokens with losses [1, 2, 3, 4], entropy keeps the last one:
    # the paper / TRL denominator stays 4 -> 4/4 = 1.0 (not 4/1)
    loss = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    mask = torch.ones(1, 4)
    keep = top_entropy_mask(torch.tensor([[0.1, 0.2, 0.3, 0.9]]), mask, 0.25)
    assert keep.tolist() == [[False, False, False, True]]
    assert float(aggregate(loss * keep, mask, "token_mean")) == pytest.approx(1.0)


# ---------------------------------------------------------------- covariance


def test_covariance_hand_values():
    # logp [-1, -3] mean -2; A [1, -1] mean 0 -> [(1)(1), (-1)(-1)] = [1, 1]
    cov = token_covariance(torch.tensor([[-1.0], [-3.0]]), torch.tensor([[1.0], [-1.0]]), torch.ones(2, 1))
    assert cov.flatten().tolist() == pytest.approx([1.0, 1.0])


def test_covariance_uses_valid_tokens_only_and_broadcasts_advantages():
    # valid logp [-1, -2, -3] (mean -2), A per sequence [2, 2 | -1] over valid tokens (mean 1)
    logp = torch.tensor([[-1.0, -2.0, 50.0], [-3.0, 50.0, 50.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    cov = token_covariance(logp, torch.tensor([[2.0], [-1.0]]), mask)
    # (1)(1) = 1, (0)(1) = 0, (-1)(-2) = 2; padding 0
    assert cov.flatten().tolist() == pytest.approx([1.0, 0.0, 0.0, 2.0, 0.0, 0.0])


def test_selection_count_is_at_least_one():
    mask = torch.ones(10, 100)  # N = 1000
    assert cov_selection_count(mask, 2e-4) == 1  # floor(0.2) = 0 -> 1 (verl's max(., 1))
    assert cov_selection_count(mask, 2e-3) == 2
    assert cov_selection_count(mask, 0.5) == 500
    assert cov_selection_count(torch.zeros(2, 2), 0.5) == 0


# ---------------------------------------------------------------- Clip-Cov

COV = torch.tensor([[0.5, 1.0, 2.0, 5.0], [6.0, 3.0, -1.0, 4.0]])
MASK = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 0.0]])  # 7 valid tokens


def test_clip_cov_picks_only_candidates_in_the_closed_interval():
    # candidates in [1, 5]: 1.0, 2.0, 5.0, 3.0 (4.0 is padding); ratio 0.5 -> floor(3.5) = 3 of 4
    sel = clip_cov_selection(COV, MASK, 0.5, 1.0, 5.0, torch.Generator().manual_seed(0))
    cand = torch.tensor([[False, True, True, True], [False, True, False, False]])
    assert int(sel.sum()) == 3 and not (sel & ~cand).any()


def test_clip_cov_takes_every_candidate_when_fewer_than_n():
    sel = clip_cov_selection(COV, MASK, 1.0, 1.0, 5.0, torch.Generator().manual_seed(0))
    assert sel.tolist() == [[False, True, True, True], [False, True, False, False]]


def test_clip_cov_is_reproducible_from_the_generator_and_varies_with_it():
    cov = torch.linspace(1.0, 5.0, 200).view(10, 20)
    mask = torch.ones(10, 20)
    a = clip_cov_selection(cov, mask, 0.05, 1.0, 5.0, torch.Generator().manual_seed(3))
    b = clip_cov_selection(cov, mask, 0.05, 1.0, 5.0, torch.Generator().manual_seed(3))
    c = clip_cov_selection(cov, mask, 0.05, 1.0, 5.0, torch.Generator().manual_seed(4))
    assert int(a.sum()) == 10 and torch.equal(a, b) and not torch.equal(a, c)


def test_clip_cov_exclude_removes_candidates():
    exclude = torch.tensor([[False, True, True, False], [False, True, False, False]])
    sel = clip_cov_selection(COV, MASK, 1.0, 1.0, 5.0, torch.Generator().manual_seed(0), exclude=exclude)
    assert sel.tolist() == [[False, False, False, True], [False, False, False, False]]


def test_clip_cov_no_candidate_selects_nothing():
    sel = clip_cov_selection(COV, MASK, 0.5, 10.0, 20.0, torch.Generator().manual_seed(0))
    assert not sel.any()


def test_detach_selected_keeps_value_and_cuts_gradient():
    x = torch.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    loss = detach_selected(x * 2.0, torch.tensor([[False, True, False]]))
    assert loss.tolist() == [[2.0, 4.0, 6.0]]
    loss.sum().backward()
    assert x.grad.tolist() == [[2.0, 0.0, 2.0]]


# ---------------------------------------------------------------- KL-Cov


def test_kl_cov_selects_the_top_covariances_among_valid_tokens():
    # valid covariances 0.5, 1, 2, 5, 6, 3, -1 (4.0 is padding); ratio 0.3 -> floor(2.1) = 2 -> 6 and 5
    sel = kl_cov_selection(COV, MASK, 0.3)
    assert sel.tolist() == [[False, False, False, True], [True, False, False, False]]


def test_kl_cov_selects_by_rank_even_when_negative():
    sel = kl_cov_selection(torch.tensor([[-3.0, -1.0, -2.0]]), torch.ones(1, 3), 0.1)
    assert sel.tolist() == [[False, True, False]]


def test_kl_cov_penalty_values_and_gradient():
    lr = torch.tensor([[0.5, -0.25, 0.1]], requires_grad=True)
    pen = kl_cov_penalty(lr, torch.tensor([[True, True, False]]), 2.0)
    # 2 * |0.5| = 1, 2 * |-0.25| = 0.5, unselected 0; gradient 2 * sign
    assert pen.flatten().tolist() == pytest.approx([1.0, 0.5, 0.0])
    pen.sum().backward()
    assert lr.grad.tolist() == [[2.0, -2.0, 0.0]]


def test_kl_cov_penalty_is_inert_on_policy():
    # mu = 1, one minibatch: log pi = log pi_old, so the penalty and its gradient are 0
    lr = torch.zeros(2, 3, requires_grad=True)
    pen = kl_cov_penalty(lr, torch.ones(2, 3, dtype=torch.bool), 1.0)
    pen.sum().backward()
    assert float(pen.detach().abs().sum()) == 0.0 and float(lr.grad.abs().sum()) == 0.0
