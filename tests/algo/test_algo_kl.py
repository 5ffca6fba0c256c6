"""KL estimators and KL-in-reward (rlvr_cli/algo/kl.py)."""

from __future__ import annotations

import math

import pytest
import torch

from rlvr_cli.algo.kl import KL_ESTIMATORS, MAX_KL_LOG_RATIO, kl_k1, kl_k2, kl_k3, kl_penalized_rewards

LOG2 = math.log(2)


def test_estimators_at_d_minus_log2():
    # logp = log 0.5, ref = log 0.25 -> d = ref - logp = -log 2
    logp, ref = torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)])
    assert kl_k1(logp, ref).item() == pytest.approx(0.693147, abs=1e-6)  # -d = log 2
    assert kl_k2(logp, ref).item() == pytest.approx(0.240227, abs=1e-6)  # (log 2)^2 / 2 = 0.480453 / 2
    assert kl_k3(logp, ref).item() == pytest.approx(0.193147, abs=1e-6)  # e^-log2 - 1 + log 2 = 0.5 - 1 + 0.693147


def test_estimators_at_d_plus_log2():
    # logp = log 0.25, ref = log 0.5 -> d = +log 2
    logp, ref = torch.tensor([math.log(0.25)]), torch.tensor([math.log(0.5)])
    assert kl_k1(logp, ref).item() == pytest.approx(-0.693147, abs=1e-6)  # k1 can be negative
    assert kl_k2(logp, ref).item() == pytest.approx(0.240227, abs=1e-6)  # symmetric in d
    assert kl_k3(logp, ref).item() == pytest.approx(0.306853, abs=1e-6)  # 2 - 1 - 0.693147


def test_all_zero_when_policies_agree():
    x = torch.randn(4, 5)
    for name, fn in KL_ESTIMATORS.items():
        assert torch.equal(fn(x, x.clone()), torch.zeros(4, 5)), name


def test_k1_and_k3_are_unbiased_for_the_true_kl():
    # pi = [0.5, 0.5], pi_ref = [0.25, 0.75]: KL(pi||ref) = 0.5 log 2 + 0.5 log(2/3) = 0.5 * (0.693147 - 0.405465) = 0.143841
    # the exact expectation under pi of each estimator: E[k1] = E[k3] = KL; E[k2] differs (biased)
    logp = torch.log(torch.tensor([0.5, 0.5]))
    ref = torch.log(torch.tensor([0.25, 0.75]))
    p = logp.exp()
    assert (p * kl_k1(logp, ref)).sum().item() == pytest.approx(0.143841, abs=1e-6)
    assert (p * kl_k3(logp, ref)).sum().item() == pytest.approx(0.143841, abs=1e-6)
    # E[k2] = 0.5 * (0.5 * 0.693147^2 + 0.5 * 0.405465^2) = 0.5 * (0.240227 + 0.082201) = 0.161214
    assert (p * kl_k2(logp, ref)).sum().item() == pytest.approx(0.161214, abs=1e-6)


@pytest.mark.parametrize("name", sorted(KL_ESTIMATORS))
def test_extreme_log_ratios_finite_with_finite_gradients(name):
    logp = torch.tensor([1e4, -1e4, 30.0, -30.0, 0.0], requires_grad=True)
    ref = torch.zeros(5)
    k = KL_ESTIMATORS[name](logp, ref)
    assert torch.isfinite(k).all()
    k.sum().backward()
    assert torch.isfinite(logp.grad).all()


def test_k3_clamped_values_at_the_extremes():
    # d = ref - logp clamped to +-20: d = -20 -> e^-20 - 1 + 20 = 19.0000000021; d = +20 -> e^20 - 21 = 4.85165174e8
    k = kl_k3(torch.tensor([1e4, -1e4], dtype=torch.float64), torch.zeros(2, dtype=torch.float64))
    assert k[0].item() == pytest.approx(19.0, abs=1e-6)
    assert k[1].item() == pytest.approx(math.exp(MAX_KL_LOG_RATIO) - 21, rel=1e-9)


def test_k3_nonnegative_everywhere_in_float32():
    # including |d| ~ 1e-4, where exp(d) - 1 - d in float32 rounded to about -6e-8
    d = torch.cat([torch.linspace(-1e-3, 1e-3, 20001), torch.linspace(-40, 40, 2001), torch.tensor([1e4, -1e4])])
    k = kl_k3(torch.zeros_like(d), d)
    assert torch.isfinite(k).all() and (k >= 0).all()
    assert (kl_k2(torch.zeros_like(d), d) >= 0).all()


def test_kl_in_reward_by_hand():
    # seq 0: k1 per token [0.5, 0.5] -> r = 1 - 0.1 * 1.0 = 0.9
    # seq 1: k1 per token [0.2, (masked 7.0)] -> r = 0 - 0.1 * 0.2 = -0.02
    # seq 2: k1 per token [-0.3, 0.1] (k1 can be negative) -> r = 0.5 - 0.1 * (-0.2) = 0.52
    logp = torch.tensor([[0.5, 0.5], [0.2, 7.0], [-0.3, 0.1]])
    ref = torch.zeros(3, 2)
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    got = kl_penalized_rewards(torch.tensor([1.0, 0.0, 0.5]), logp, ref, mask, beta=0.1)
    assert torch.allclose(got, torch.tensor([0.9, -0.02, 0.52]), atol=1e-6)


def test_kl_in_reward_beta_zero_is_identity():
    r = torch.tensor([1.0, 0.0])
    logp = torch.randn(2, 3)
    assert torch.equal(kl_penalized_rewards(r, logp, torch.zeros(2, 3), torch.ones(2, 3), beta=0.0), r)
