"""CISPO, SAPO and GMPO (rlvr_cli/algo/objectives.py): hand-computed values, gradients where PPO's clip cuts,
SAPO's temperature limits, GMPO against a loop, and micro-batch invariance of every new objective."""

from __future__ import annotations

import math

import pytest
import torch

from rlvr_cli.algo.aggregation import AGGREGATIONS, aggregate, aggregation_normalizer
from rlvr_cli.algo.logprobs import token_logprobs
from rlvr_cli.algo.objectives import cispo_surrogate, gmpo_surrogate, sapo_gate_weight, sapo_surrogate
from rlvr_cli.algo.policy_loss import RATIOS, clipped_surrogate, sequence_log_ratio, token_log_ratio
from rlvr_cli.algo.trust_region import dppo_surrogate
from test_algo_aggregation import B, L_CONST, _problem  # a tiny linear policy, ragged masks, ratios != 1


def _cispo_one(rho: float, adv: float, eps_low=None, eps_high=0.2, logp_old=-1.0):
    """Loss and d loss / d log pi of one token with log pi_old = logp_old."""
    logp = torch.tensor([[logp_old + math.log(rho)]], dtype=torch.float64, requires_grad=True)
    out = cispo_surrogate(logp, logp - logp_old, torch.tensor([[adv]], dtype=torch.float64), eps_low, eps_high)
    out.loss.sum().backward()
    return out, logp.grad.item()


def _ppo_grad(rho: float, adv: float, eps_low=0.2, eps_high=0.2) -> float:
    lr = torch.tensor([[math.log(rho)]], dtype=torch.float64, requires_grad=True)
    clipped_surrogate(lr, torch.tensor([[adv]], dtype=torch.float64), eps_low, eps_high).loss.sum().backward()
    return lr.grad.item()


# ---------------------------------------------------------------- CISPO


def test_cispo_worked_example():
    # rho 1.5, A = +1, eps_high 0.2: weight sg(min(1.5, 1.2)) = 1.2; loss = -1.2 * 1 * log pi = -1.2 * (-1 + log 1.5)
    out, grad = _cispo_one(1.5, 1.0)
    assert out.loss.item() == pytest.approx(-1.2 * (-1.0 + math.log(1.5)))
    assert grad == pytest.approx(-1.2)
    assert _ppo_grad(1.5, 1.0) == 0.0  # PPO's clip cuts this token
    assert bool(out.clip_high) and not bool(out.clip_low)


def test_cispo_negative_advantage_low_ratio():
    # rho 0.5, A = -1, eps_low 0.2: weight max(0.5, 0.8) = 0.8 -> d loss / d log pi = -0.8 * (-1) = +0.8; PPO: 0
    out, grad = _cispo_one(0.5, -1.0, eps_low=0.2)
    assert grad == pytest.approx(0.8) and bool(out.clip_low)
    assert _ppo_grad(0.5, -1.0) == 0.0
    # without a lower bound (the paper, TRL) the weight is the ratio itself: +0.5
    assert _cispo_one(0.5, -1.0, eps_low=None)[1] == pytest.approx(0.5)


def test_cispo_gradient_nonzero_on_every_token_ppo_cuts():
    gen = torch.Generator().manual_seed(0)
    lr = (0.6 * torch.randn(1, 200, generator=gen, dtype=torch.float64))
    adv = torch.randn(1, 200, generator=gen, dtype=torch.float64)
    old = -2.0 + 0.5 * torch.randn(1, 200, generator=gen, dtype=torch.float64)
    lr_ppo = lr.clone().requires_grad_(True)
    ppo = clipped_surrogate(lr_ppo, adv, 0.2, 0.28)
    ppo.loss.sum().backward()
    cut = ppo.clip_low | ppo.clip_high
    assert cut.sum() > 20 and torch.equal(lr_ppo.grad[cut], torch.zeros(int(cut.sum()), dtype=torch.float64))
    logp = (old + lr).requires_grad_(True)
    out = cispo_surrogate(logp, logp - old, adv, 0.2, 0.28)
    out.loss.sum().backward()
    assert (logp.grad[cut].abs() > 1e-3).all()  # every token PPO cut still moves under CISPO
    # its weight there is the clip bound: 1 + eps_high above, 1 - eps_low below
    want = -adv * torch.exp(lr).clamp(0.8, 1.28)
    assert torch.allclose(logp.grad, want, atol=1e-12)


def test_cispo_equals_ppo_inside_the_band():
    # inside [1 - eps_low, 1 + eps_high] both give -A * rho * grad log pi
    for rho, adv in [(0.9, 1.0), (1.1, -2.0), (1.0, 0.5), (1.27, 1.0)]:
        assert _cispo_one(rho, adv, 0.2, 0.28)[1] == pytest.approx(_ppo_grad(rho, adv, 0.2, 0.28))


def test_cispo_trl_and_verl_conventions():
    # TRL: weight = min(rho, epsilon_high) with epsilon_high the cap (ScaleRL 5.0) = rlvr eps_high 4.0, no lower bound;
    # verl: clamp(rho, 1 - clip_ratio_low, 1 + clip_ratio_high) = rlvr eps_low / eps_high.
    rhos = [0.05, 0.5, 1.0, 3.0, 7.0]
    for rho in rhos:
        trl = min(rho, 5.0)
        assert _cispo_one(rho, 1.0, None, 4.0)[1] == pytest.approx(-trl)
        verl = min(max(rho, 1 - 0.2), 1 + 0.2)
        assert _cispo_one(rho, 1.0, 0.2, 0.2)[1] == pytest.approx(-verl)


def test_cispo_bad_bounds():
    with pytest.raises(ValueError):
        cispo_surrogate(torch.zeros(1, 1), torch.zeros(1, 1), torch.ones(1, 1), 1.5, 0.2)
    with pytest.raises(ValueError):
        cispo_surrogate(torch.zeros(1, 1), torch.zeros(1, 1), torch.ones(1, 1), None, -0.1)


# ---------------------------------------------------------------- SAPO


def _sapo_grad(rho: float, adv: float, tau_pos=1.0, tau_neg=1.05):
    lr = torch.tensor([[math.log(rho)]], dtype=torch.float64, requires_grad=True)
    out = sapo_surrogate(lr, torch.tensor([[adv]], dtype=torch.float64), tau_pos, tau_neg)
    out.loss.sum().backward()
    return out.loss.item(), lr.grad.item()


def test_sapo_worked_example():
    # rho = 1, A = 1, tau = 1: f = (4/1) * sigmoid(0) = 2, loss -2; d loss / d log rho = -A * rho * 4 * 0.5 * 0.5 = -1
    loss, grad = _sapo_grad(1.0, 1.0)
    assert loss == pytest.approx(-2.0) and grad == pytest.approx(-1.0)
    assert sapo_gate_weight(torch.tensor(2.0), 1.0).item() == pytest.approx(4 * 0.7310586 * 0.2689414, rel=1e-6)


def test_sapo_on_policy_gradient_is_the_policy_gradient_at_every_temperature():
    for tau in (1e-3, 0.5, 1.0, 1.05, 10.0, 1e4):
        assert _sapo_grad(1.0, 1.0, tau, tau)[1] == pytest.approx(-1.0)
        assert _sapo_grad(1.0, -2.0, tau, tau)[1] == pytest.approx(2.0)


def test_sapo_temperature_per_advantage_sign():
    # rho 2: A > 0 uses tau_pos, A < 0 tau_neg: gradient -A * 2 * w_tau(2)
    w = lambda tau: sapo_gate_weight(torch.tensor(2.0, dtype=torch.float64), tau).item()  # noqa: E731
    assert _sapo_grad(2.0, 1.0, 1.0, 3.0)[1] == pytest.approx(-2.0 * w(1.0))
    assert _sapo_grad(2.0, -1.0, 1.0, 3.0)[1] == pytest.approx(2.0 * w(3.0))
    assert _sapo_grad(2.0, 0.0, 1.0, 3.0) == (pytest.approx(0.0), pytest.approx(0.0))


def test_sapo_gradient_matches_its_formula():
    gen = torch.Generator().manual_seed(2)
    lr = (0.8 * torch.randn(3, 7, generator=gen, dtype=torch.float64)).requires_grad_(True)
    adv = torch.randn(3, 1, generator=gen, dtype=torch.float64)
    sapo_surrogate(lr, adv, 1.0, 1.05).loss.sum().backward()
    rho = lr.detach().exp()
    tau = torch.where(adv > 0, 1.0, 1.05).expand_as(rho)
    assert torch.allclose(lr.grad, -adv * rho * sapo_gate_weight(rho, tau), atol=1e-12)


RHOS = [0.5, 0.79, 0.9, 0.99, 1.01, 1.1, 1.21, 2.0]


def test_sapo_tends_to_the_unclipped_surrogate_as_tau_goes_to_zero():
    # w_tau -> 1: the gradient -> -A * rho, the unclipped surrogate's, for every rho (error O(tau^2))
    for rho in RHOS:
        for adv in (1.0, -1.0):
            assert _sapo_grad(rho, adv, 1e-3, 1e-3)[1] == pytest.approx(-adv * rho, rel=1e-6)


def test_sapo_tends_to_the_eps_to_zero_hard_clip_as_tau_grows():
    # w_tau(rho) -> 1[rho = 1], bounded by 4 exp(-tau |rho - 1|): off rho = 1 every gradient vanishes
    for rho in RHOS:
        grads = [abs(_sapo_grad(rho, 1.0, tau, tau)[1]) for tau in (10.0, 100.0, 1000.0)]
        for tau, g in zip((10.0, 100.0, 1000.0), grads):
            assert g <= rho * 4 * math.exp(-tau * abs(rho - 1)) * (1 + 1e-6)  # tight as tau |rho - 1| grows
        assert grads[2] < 1e-3 * max(grads[0], 1e-300) or grads[2] < 1e-12
    assert _sapo_grad(1.0, 1.0, 1000.0, 1000.0)[1] == pytest.approx(-1.0)


def test_sapo_limit_matches_ppo_only_where_ppo_clips():
    # eps = 0.2. Where PPO's clip cuts (A > 0, rho > 1.2; A < 0, rho < 0.8) PPO's gradient is 0 and SAPO's -> 0.
    # Inside the band, and on the side PPO leaves open, PPO keeps -A * rho while SAPO's still -> 0.
    cases = [(1.5, 1.0, True), (0.5, -1.0, True), (1.1, 1.0, False), (0.5, 1.0, False), (1.5, -1.0, False)]
    for rho, adv, ppo_cuts in cases:
        ppo = _ppo_grad(rho, adv)
        sapo = _sapo_grad(rho, adv, 200.0, 200.0)[1]
        assert abs(sapo) < 1e-6
        assert (ppo == 0.0) == ppo_cuts
        if not ppo_cuts:
            assert ppo == pytest.approx(-adv * rho)


def test_sapo_gate_is_one_shape_in_tau_times_deviation():
    # w_tau(1 + u / tau) does not depend on tau; half height at u = ln(3 + 2 sqrt 2) = 1.7627
    u = math.log(3 + 2 * math.sqrt(2))
    for tau in (0.5, 1.0, 10.0, 100.0):
        assert sapo_gate_weight(torch.tensor(1 + u / tau, dtype=torch.float64), tau).item() == pytest.approx(0.5)
        assert sapo_gate_weight(torch.tensor(1 - u / tau, dtype=torch.float64), tau).item() == pytest.approx(0.5)


def test_sapo_bad_temperature():
    with pytest.raises(ValueError):
        sapo_surrogate(torch.zeros(1, 1), torch.ones(1, 1), 0.0, 1.0)


# ---------------------------------------------------------------- GMPO


def test_gmpo_worked_example():
    # A = +1, eps 0.4: x = [min(0.6, 0.4), -0.2] = [0.4, -0.2]; s = exp(0.1) = 1.105171; loss -1.105171 per token
    # d loss / d logp: token 0 clipped -> 0; token 1: -A * s / |o| = -0.552585
    logp = torch.tensor([[0.6, -0.2]], dtype=torch.float64, requires_grad=True)
    out = gmpo_surrogate(logp - 0.0, torch.tensor([[1.0]], dtype=torch.float64), torch.ones(1, 2))
    assert torch.allclose(out.loss, torch.full((1, 2), -1.105171, dtype=torch.float64), atol=1e-6)
    aggregate(out.loss, torch.ones(1, 2), "seq_mean_token_mean").backward()
    assert torch.allclose(logp.grad, torch.tensor([[0.0, -0.552585]], dtype=torch.float64), atol=1e-6)
    assert out.clip_high.tolist() == [[True, False]] and not out.clip_low.any()


def test_gmpo_negative_advantage():
    # A = -1: x = [max(-0.6, -0.4), 0.3] = [-0.4, 0.3]; s = exp(-0.05) = 0.951229; loss +0.951229
    # gradient: token 0 clipped -> 0; token 1: -A * s / 2 = 0.475615
    logp = torch.tensor([[-0.6, 0.3]], dtype=torch.float64, requires_grad=True)
    out = gmpo_surrogate(logp, torch.tensor([[-1.0]], dtype=torch.float64), torch.ones(1, 2))
    aggregate(out.loss, torch.ones(1, 2), "seq_mean_token_mean").backward()
    assert out.loss[0, 0].item() == pytest.approx(0.951229, abs=1e-6)
    assert torch.allclose(logp.grad, torch.tensor([[0.0, 0.475615]], dtype=torch.float64), atol=1e-6)
    assert out.clip_low.tolist() == [[True, False]]


def test_gmpo_matches_sequence_loop_reference():
    gen = torch.Generator().manual_seed(9)
    b, t = 6, 7
    lengths = [7, 1, 3, 5, 2, 6]
    mask = (torch.arange(t).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).double()
    lr = 0.5 * torch.randn(b, t, generator=gen, dtype=torch.float64)
    adv = torch.randn(b, 1, generator=gen, dtype=torch.float64)
    got = aggregate(gmpo_surrogate(lr, adv, mask, 0.4, 0.3).loss, mask, "seq_mean_token_mean")
    want = 0.0
    for i in range(b):
        a = adv[i, 0].item()
        xs = [lr[i, j].item() for j in range(lengths[i])]
        xs = [min(x, 0.3) for x in xs] if a > 0 else [max(x, -0.4) for x in xs]
        want += -a * math.exp(sum(xs) / len(xs)) / b
    assert got.item() == pytest.approx(want, abs=1e-6)


def test_gmpo_equals_gspo_when_nothing_is_clipped_and_token_ratios_agree():
    # equal token log-ratios inside the band: geometric mean = GSPO's sequence ratio, no clip acts in either
    per_seq = torch.tensor([[0.1], [-0.15], [0.05]], dtype=torch.float64)
    mask = torch.ones(3, 4, dtype=torch.float64)
    lr = per_seq.expand(3, 4).clone()
    adv = torch.tensor([[1.0], [-0.5], [2.0]], dtype=torch.float64)
    gm = aggregate(gmpo_surrogate(lr, adv, mask, 0.4, 0.4).loss, mask, "seq_mean_token_mean")
    gs = aggregate(clipped_surrogate(sequence_log_ratio(lr, torch.zeros_like(lr), mask), adv, 0.2, 0.2).loss, mask,
                   "seq_mean_token_mean")
    assert gm.item() == pytest.approx(gs.item(), abs=1e-12)


def test_gmpo_ignores_padding_and_stays_finite():
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    a = gmpo_surrogate(torch.tensor([[0.1, 0.2, 99.0]]), torch.tensor([[1.0]]), mask).loss
    b = gmpo_surrogate(torch.tensor([[0.1, 0.2, -99.0]]), torch.tensor([[1.0]]), mask).loss
    assert torch.equal(a, b) and a[0, 2] == 0
    huge = gmpo_surrogate(torch.full((1, 3), -1e4), torch.tensor([[-1.0]]), torch.ones(1, 3), 1e9, 1e9).loss
    assert torch.isfinite(huge).all()


# ---------------------------------------------------------------- micro-batch invariance, every new objective


def _token_loss(name, logp, old, adv, mask):
    if name == "cispo":
        return cispo_surrogate(logp, token_log_ratio(logp, old, mask), adv, None, 0.28).loss
    if name == "sapo":
        return sapo_surrogate(token_log_ratio(logp, old, mask), adv).loss
    if name == "gmpo":
        return gmpo_surrogate(token_log_ratio(logp, old, mask), adv, mask).loss
    delta = 0.15 if name == "dppo_tv" else 0.05
    return dppo_surrogate(logp, old, adv, name.split("_")[1], delta, delta).loss


def _grad(name, mode, n_micro):
    w, x, targets, mask, old, adv = _problem()
    w.requires_grad_(True)
    z = aggregation_normalizer(mask, mode)
    for idx in torch.arange(B).chunk(n_micro):
        logp = token_logprobs(x[idx] @ w.T, targets[idx])
        loss = aggregate(_token_loss(name, logp, old[idx], adv[idx], mask[idx]), mask[idx], mode, L_CONST, z)
        loss.backward()
    return w.grad.clone()


@pytest.mark.parametrize("mode", AGGREGATIONS)
@pytest.mark.parametrize("name", ["cispo", "sapo", "gmpo", "dppo_tv", "dppo_kl"])
def test_micro_batching_does_not_change_the_gradient(name, mode):
    full = _grad(name, mode, 1)
    assert full.abs().max() > 1e-3
    for n_micro in (2, 4, 8):  # 8: one sequence per micro-batch, as one sequence per data-parallel rank
        assert torch.allclose(_grad(name, mode, n_micro), full, rtol=1e-6, atol=1e-6), (name, mode, n_micro)


def test_ratio_level_composes_for_cispo_and_sapo():
    # both take any log-ratio from RATIOS; the sequence level gives one weight per sequence
    logp = torch.tensor([[0.2, 0.6, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0, 0.0]], dtype=torch.float64)
    seq = RATIOS["sequence"](logp, torch.zeros_like(logp), mask)
    out = cispo_surrogate(logp, seq, torch.ones(1, 1, dtype=torch.float64), None, 0.2)
    assert out.ratio[0, 0].item() == pytest.approx(math.exp(0.4)) and out.ratio[0, 0] == out.ratio[0, 1]
    s = sapo_surrogate(seq, torch.ones(1, 1, dtype=torch.float64))
    assert s.loss[0, 0] == s.loss[0, 1]


# ---------------------------------------------------------------- shared invariants of the objective axis


def _objective_loss(name, logp, old, adv, mask):
    if name == "ppo_clip":
        return clipped_surrogate(token_log_ratio(logp, old, mask), adv, 0.2, 0.28, 3.0).loss
    if name == "dppo":
        return dppo_surrogate(logp, old, adv, "kl", 0.05, 0.05).loss
    return _token_loss(name, logp, old, adv, mask)


NAMES = ["ppo_clip", "cispo", "sapo", "gmpo", "dppo_tv", "dppo"]


ON_POLICY_CASES = [(n, m) for n in NAMES for m in AGGREGATIONS if n != "gmpo" or m == "seq_mean_token_mean"]


@pytest.mark.parametrize("name,mode", ON_POLICY_CASES)
def test_on_policy_every_objective_is_the_plain_policy_gradient(name, mode):
    # rho = 1: CISPO's weight is 1, SAPO's gate weight w(1) = 1, DPPO keeps every token (no divergence),
    # GMPO's s_i = 1 with gradient -A / |o_i| sum_t grad log pi_t. So all equal d/dtheta aggregate(-A * logp)
    # (GMPO under its own aggregation, a mean over sequences).
    w, x, targets, mask, _, adv = _problem()
    w.requires_grad_(True)
    logp = token_logprobs(x @ w.T, targets)
    (g,) = torch.autograd.grad(aggregate(_objective_loss(name, logp, logp.detach(), adv, mask), mask, mode, L_CONST), w)
    logp = token_logprobs(x @ w.T, targets)
    (g_pg,) = torch.autograd.grad(aggregate(-adv * logp, mask, mode, L_CONST), w)
    assert g_pg.abs().max() > 1e-3
    assert torch.allclose(g, g_pg, rtol=1e-5, atol=1e-6), name


@pytest.mark.parametrize("name", NAMES)
def test_zero_advantage_rows_have_zero_loss_and_gradient(name):
    # the trainer skips the backward of rows with A = 0 (train/rl.py zero_loss_rows): true for every objective
    w, x, targets, mask, old, _ = _problem()
    w.requires_grad_(True)
    logp = token_logprobs(x @ w.T, targets)
    loss = _objective_loss(name, logp, old, torch.zeros(B, 1), mask)
    assert torch.equal(loss, torch.zeros_like(loss))
    (g,) = torch.autograd.grad(aggregate(loss, mask, "token_mean"), w)
    assert torch.equal(g, torch.zeros_like(g))
