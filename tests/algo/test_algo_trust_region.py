"""DPPO trust-region masks (rlvr_cli/algo/trust_region.py): the worked example against PPO's clip, both
divergences by hand, the one-sidedness, the importance-weight cap and a loop reference."""

from __future__ import annotations

import math

import pytest
import torch

from rlvr_cli.algo.aggregation import aggregate
from rlvr_cli.algo.policy_loss import clipped_surrogate
from rlvr_cli.algo.trust_region import binary_kl, dppo_keep_mask, dppo_surrogate


def _one(p_old: float, p: float, adv: float, divergence="tv", delta=0.15, is_cap=20.0):
    """Loss, d loss / d log pi and (masked low, masked high) for one token."""
    logp = torch.tensor([[math.log(p)]], dtype=torch.float64, requires_grad=True)
    old = torch.tensor([[math.log(p_old)]], dtype=torch.float64)
    out = dppo_surrogate(logp, old, torch.tensor([[adv]], dtype=torch.float64), divergence, delta, delta, is_cap)
    out.loss.sum().backward()
    return out.loss.item(), logp.grad.item(), (bool(out.clip_low), bool(out.clip_high))


def _ppo_grad(p_old: float, p: float, adv: float, eps=0.2) -> float:
    lr = torch.tensor([[math.log(p / p_old)]], dtype=torch.float64, requires_grad=True)
    clipped_surrogate(lr, torch.tensor([[adv]], dtype=torch.float64), eps, eps).loss.sum().backward()
    return lr.grad.item()


def test_dppo_tv_worked_example():
    # p_old 0.5 -> p 0.7 (rho 1.4), A = +1: rise 0.2 > 0.15 -> masked; PPO (eps 0.2) clips it too
    loss, grad, flags = _one(0.5, 0.7, 1.0)
    assert (loss, grad, flags) == (0.0, 0.0, (False, True))
    assert _ppo_grad(0.5, 0.7, 1.0) == 0.0
    # p_old 0.01 -> p 0.05 (rho 5), A = +1: rise 0.04 -> kept, gradient -A * rho = -5; PPO cuts it
    loss, grad, flags = _one(0.01, 0.05, 1.0)
    assert grad == pytest.approx(-5.0) and loss == pytest.approx(-5.0 * math.log(0.05)) and flags == (False, False)
    assert _ppo_grad(0.01, 0.05, 1.0) == 0.0
    # p_old 0.99 -> p 0.8 (rho 0.808), A = -1: fall 0.19 > 0.15 -> masked; PPO keeps it (0.808 > 0.8)
    loss, grad, flags = _one(0.99, 0.8, -1.0)
    assert grad == 0.0 and flags == (True, False)
    assert _ppo_grad(0.99, 0.8, -1.0) == pytest.approx(0.8 / 0.99)


def test_binary_kl_by_hand():
    # 0.5 log(0.5/0.7) + 0.5 log(0.5/0.3) = -0.168236 + 0.255413 = 0.087177
    got = binary_kl(torch.tensor([math.log(0.5)], dtype=torch.float64), torch.tensor([math.log(0.7)], dtype=torch.float64))
    assert got.item() == pytest.approx(0.087177, abs=1e-6)
    # 0.01 -> 0.05: 0.01 log(0.2) + 0.99 log(0.99/0.95) = -0.016094 + 0.040830 = 0.024736
    got = binary_kl(torch.tensor([math.log(0.01)], dtype=torch.float64), torch.tensor([math.log(0.05)], dtype=torch.float64))
    assert got.item() == pytest.approx(0.024736, abs=1e-6)


def test_dppo_kl_worked_example():
    # delta 0.05: 0.5 -> 0.7 has KL 0.0872 > 0.05 with p rising and A > 0 -> masked; 0.01 -> 0.05 (KL 0.0247) kept
    assert _one(0.5, 0.7, 1.0, "kl", 0.05)[1:] == (0.0, (False, True))
    assert _one(0.01, 0.05, 1.0, "kl", 0.05)[1] == pytest.approx(-5.0)


@pytest.mark.parametrize("divergence", ["tv", "kl"])
def test_mask_acts_only_in_the_advantage_direction(divergence):
    # a large move *against* the advantage's push is never masked (as PPO's clip acts on one side only)
    assert _one(0.9, 0.1, 1.0, divergence)[2] == (False, False)  # A > 0 but p fell: kept, gradient -A rho
    assert _one(0.9, 0.1, 1.0, divergence)[1] == pytest.approx(-0.1 / 0.9)
    assert _one(0.1, 0.9, -1.0, divergence)[2] == (False, False)  # A < 0 but p rose: kept
    # the same moves in the advantage's direction are masked
    assert _one(0.1, 0.9, 1.0, divergence)[2] == (False, True)
    assert _one(0.9, 0.1, -1.0, divergence)[2] == (True, False)


def test_importance_weight_cap():
    # p_old 0.001 -> p 0.1: rho 100, rise 0.099 < 0.15 -> kept; weight min(100, C)
    assert _one(0.001, 0.1, 1.0, is_cap=20.0)[1] == pytest.approx(-20.0)
    assert _one(0.001, 0.1, 1.0, is_cap=1e4)[1] == pytest.approx(-100.0)
    assert _one(0.001, 0.1, 1.0, is_cap=3.0)[1] == pytest.approx(-3.0)  # verl's ActorConfig.clip_ratio_c default


def test_kept_tokens_have_ppo_unclipped_gradient_and_masked_stay_in_the_denominator():
    # token_mean over 3 tokens, one masked: loss = sum over the 2 kept / 3
    p_old = torch.tensor([[0.5, 0.01, 0.3]], dtype=torch.float64)
    p = torch.tensor([[0.7, 0.05, 0.32]], dtype=torch.float64)
    logp = p.log().requires_grad_(True)
    adv = torch.tensor([[1.0]], dtype=torch.float64)
    out = dppo_surrogate(logp, p_old.log(), adv, "tv", 0.15, 0.15)
    loss = aggregate(out.loss, torch.ones(1, 3), "token_mean")
    loss.backward()
    rho = p / p_old
    want = torch.tensor([[0.0, -rho[0, 1].item() / 3, -rho[0, 2].item() / 3]], dtype=torch.float64)
    assert torch.allclose(logp.grad, want, atol=1e-12)
    assert loss.item() == pytest.approx(-(5.0 * math.log(0.05) + (0.32 / 0.3) * math.log(0.32)) / 3)


def reference_keep(p_old, p, adv, divergence, d_low, d_high):
    """Slow loop from the docstring's definitions (verl's 1e-8 inside the log of 1 - p)."""
    out = []
    for po, pp, a in zip(p_old, p, adv):
        if divergence == "tv":
            keep = (pp - po <= d_high) if a > 0 else (pp - po >= -d_low)
        else:
            kl = po * math.log(po / pp) + (1 - po) * math.log((1 - po + 1e-8) / (1 - pp + 1e-8))
            keep = (kl <= d_high or pp <= po) if a > 0 else (kl <= d_low or pp >= po)
        out.append(keep)
    return out


@pytest.mark.parametrize("divergence,d_low,d_high", [("tv", 0.15, 0.15), ("tv", 0.1, 0.3), ("kl", 0.05, 0.05), ("kl", 0.02, 0.1)])
def test_keep_mask_matches_loop_reference(divergence, d_low, d_high):
    gen = torch.Generator().manual_seed(4)
    p_old = torch.rand(500, generator=gen, dtype=torch.float64) * 0.98 + 0.01
    p = (p_old + 0.3 * torch.randn(500, generator=gen, dtype=torch.float64)).clamp(0.005, 0.995)
    adv = torch.randn(500, generator=gen, dtype=torch.float64)
    adv[:20] = 0.0  # A = 0 takes the A <= 0 side, as verl
    got = dppo_keep_mask(p.log(), p_old.log(), adv, divergence, d_low, d_high)
    want = reference_keep(p_old.tolist(), p.tolist(), adv.tolist(), divergence, d_low, d_high)
    assert got.tolist() == want
    assert 0 < sum(want) < 500  # both kinds present


def test_bad_arguments():
    z = torch.zeros(1, 1)
    with pytest.raises(ValueError):
        dppo_keep_mask(z, z, z, "js", 0.1, 0.1)
    with pytest.raises(ValueError):
        dppo_keep_mask(z, z, z, "tv", -0.1, 0.1)
    with pytest.raises(ValueError):
        dppo_surrogate(z, z, z, "tv", 0.1, 0.1, is_cap=0.0)
