"""Corrections for off-policy (stale) batches: decoupled PPO, M2PO's mask, the KL to the behaviour policy
(rlvr_cli/algo/off_policy.py), with hand-computed numbers, and their glue in the per-token loss."""

from __future__ import annotations

import math

import pytest
import torch

from rlvr_cli.algo.off_policy import behaviour_kl, decoupled_ppo_loss, m2po_mask
from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.train.objective import LossInputs, token_loss, zero_loss_rows

# one response, two tokens and padding: u = pi_theta / pi_prox = [1.5, 0.9]; w = pi_prox / pi_b = [3, 0.5]
LOGP = torch.tensor([[math.log(1.5), math.log(0.9), 0.0]])
PROX = torch.zeros(1, 3)
BEHAV = torch.tensor([[-math.log(3.0), math.log(2.0), 0.0]])
MASK = torch.tensor([[1.0, 1.0, 0.0]])


@pytest.mark.parametrize("mode, weights", [("token_mask", [0.0, 0.5]), ("token_truncate", [2.0, 0.5])])
def test_decoupled_ppo_by_hand(mode, weights):
    # token 1: A = +1, u = 1.5 clipped at 1.2: PPO loss -1.2, times w = 3 -> masked (0) at cap 2, or 2 -> -2.4
    # token 2: u = 0.9 inside the band: -0.9, times w = 0.5 -> -0.45
    logp = LOGP.clone().requires_grad_(True)
    loss, sur, w = decoupled_ppo_loss(logp, PROX, BEHAV, torch.tensor([[1.0]]), MASK, (0.2, 0.2), mode, cap=2.0)
    assert w.weights[0, :2].tolist() == pytest.approx(weights)
    assert loss[0, :2].tolist() == pytest.approx([-1.2 * weights[0], -0.9 * 0.5])
    assert sur.clipped_high.tolist() == [[True, False, False]]
    (loss * MASK).sum().backward()
    # the clipped token has no gradient; the kept one d(-w u)/d log pi = -w u = -0.45
    assert logp.grad[0, :2].tolist() == pytest.approx([0.0, -0.45])


def test_decoupled_ppo_is_the_trainers_recompute_with_is_correction():
    """The trainer's composition: pi_old = the recomputed (proximal) log-probs, is_correction's weights
    pi_old / pi_sampler on the token loss -- exactly the decoupled loss."""
    r = load_recipe("grpo", ["rollout.old_logprobs=recompute", "rollout.is_correction.mode=token_truncate",
                             "rollout.is_correction.cap=2", "kl.placement=none", "rollout.staleness.max=2"])
    loss, _, w = decoupled_ppo_loss(LOGP, PROX, BEHAV, torch.tensor([[1.0]]), MASK, (0.2, 0.2), "token_truncate", 2.0)
    got, _ = token_loss(r, LOGP, torch.zeros_like(LOGP), LossInputs(PROX, None, torch.tensor([[1.0]]), MASK, w.weights))
    assert torch.equal(got, loss)


def test_m2po_masks_the_largest_squared_log_ratios_until_the_mean_is_under_tau():
    # squares [0.01, 0.01, 0.25, 0]: mean 0.0675 > 0.04; sorted prefix means 0, 0.005, 0.00667, 0.0675
    m = m2po_mask(torch.tensor([0.1, -0.1, 0.5, 0.0]), 0.04)
    assert m.keep.tolist() == [True, True, False, True]
    assert m.second_moment == pytest.approx(0.0675)
    assert m.second_moment_kept == pytest.approx(0.02 / 3)
    assert m2po_mask(torch.tensor([0.1, -0.1]), 0.04).keep.tolist() == [True, True]  # 0.01 <= tau: nothing masked
    assert m2po_mask(torch.zeros(0)).keep.numel() == 0


def test_m2po_ties_keep_the_earlier_token_and_the_bound_holds():
    # every square is 0.09 > tau 0.05: even one token alone exceeds the bound, so every token is masked
    assert m2po_mask(torch.tensor([0.3, -0.3, 0.3, -0.3]), 0.05).keep.tolist() == [False] * 4
    # [0, 0.3, 0.3]: 0 then 0.045 <= 0.05 then 0.06 > 0.05: the first of the tied tokens is kept
    assert m2po_mask(torch.tensor([0.0, 0.3, -0.3]), 0.05).keep.tolist() == [True, True, False]
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(200, generator=gen)
    m = m2po_mask(x, 0.3)
    assert x[m.keep].square().mean() <= 0.3 and m.keep.sum() < 200
    # the largest kept square is no larger than the smallest masked one
    assert x[m.keep].abs().max() <= x[~m.keep].abs().min()


@pytest.mark.parametrize("estimator, value", [("k1", math.log(2)), ("k2", math.log(2) ** 2 / 2),
                                              ("k3", 0.5 - 1 + math.log(2))])
def test_behaviour_kl_by_hand(estimator, value):
    logp = torch.tensor([[math.log(0.5)]], requires_grad=True)
    kl = behaviour_kl(logp, torch.tensor([[math.log(0.25)]]), estimator)
    assert kl.item() == pytest.approx(value, abs=1e-6)
    kl.sum().backward()
    # d/dlogp: k1 -> 1, k2 -> logp - logp_b = log 2, k3 -> 1 - exp(d) = 1 - 0.5
    assert logp.grad.item() == pytest.approx({"k1": 1.0, "k2": math.log(2), "k3": 0.5}[estimator], abs=1e-6)


def test_behaviour_kl_joins_the_token_loss_and_keeps_zero_advantage_rows():
    r = load_recipe("grpo", ["kl.placement=none", "off_policy.behaviour_kl={coef: 0.5, estimator: k2}"])
    logp = torch.tensor([[math.log(0.5), 0.0]])
    behav = torch.tensor([[math.log(0.25), 0.0]])
    rows = LossInputs(logp.clone(), None, torch.tensor([[0.0]]), torch.ones(1, 2), None, behav)
    loss, _ = token_loss(r, logp, torch.zeros_like(logp), rows)
    assert loss[0].tolist() == pytest.approx([0.5 * math.log(2) ** 2 / 2, 0.0])  # A = 0: only the KL term
    assert zero_loss_rows(r, torch.tensor([0.0]), None, torch.ones(1, 2)).tolist() == [False]
