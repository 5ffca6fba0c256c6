"""Token log-probs and entropy at a temperature (rlvr_cli/algo/logprobs.py)."""

from __future__ import annotations

import math

import pytest
import torch

from rlvr_cli.algo.logprobs import token_logprobs, token_logprobs_and_entropy, token_logprobs_on_support


def test_uniform_two_way_worked_example():
    # logits [0, 0], T = 1: p = [0.5, 0.5] -> logp = log 0.5 = -0.693147 for either token; H = log 2 = 0.693147
    logits = torch.zeros(1, 2, 2)
    logp, ent = token_logprobs_and_entropy(logits, torch.tensor([[0, 1]]))
    assert torch.allclose(logp, torch.full((1, 2), math.log(0.5)))
    assert torch.allclose(ent, torch.full((1, 2), math.log(2)))


def test_skewed_distribution_by_hand():
    # logits [log 3, 0]: p = [0.75, 0.25]; logp(0) = log 0.75 = -0.287682, logp(1) = log 0.25 = -1.386294
    # H = 0.75 * 0.287682 + 0.25 * 1.386294 = 0.215762 + 0.346574 = 0.562335
    logits = torch.tensor([[[math.log(3), 0.0], [math.log(3), 0.0]]])
    logp, ent = token_logprobs_and_entropy(logits, torch.tensor([[0, 1]]))
    assert torch.allclose(logp, torch.tensor([[-0.287682, -1.386294]]), atol=1e-6)
    assert torch.allclose(ent, torch.tensor([[0.562335, 0.562335]]), atol=1e-6)


def test_temperature_divides_the_logits():
    # logits [2 log 3, 0] at T = 2 equal [log 3, 0] at T = 1: logp(0) = log 0.75 = -0.287682
    logits = torch.tensor([[[2 * math.log(3), 0.0]]])
    logp, ent = token_logprobs_and_entropy(logits, torch.tensor([[0]]), temperature=2.0)
    assert logp.item() == pytest.approx(-0.287682, abs=1e-6)
    assert ent.item() == pytest.approx(0.562335, abs=1e-6)
    # at T = 1 the same logits give p = [0.9, 0.1]: logp(0) = log 0.9 = -0.105361
    assert token_logprobs(logits, torch.tensor([[0]])).item() == pytest.approx(-0.105361, abs=1e-6)


def test_logprobs_agree_between_the_two_functions_and_with_a_loop():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 3, 7, generator=gen)
    targets = torch.randint(0, 7, (2, 3), generator=gen)
    for temp in (1.0, 0.7):
        a = token_logprobs(logits, targets, temp)
        b, ent = token_logprobs_and_entropy(logits, targets, temp)
        assert torch.equal(a, b)
        for i in range(2):
            for t in range(3):
                z = [v / temp for v in logits[i, t].tolist()]
                lse = math.log(sum(math.exp(v) for v in z))
                assert a[i, t].item() == pytest.approx(z[targets[i, t]] - lse, abs=1e-5)
                h = -sum(math.exp(v - lse) * (v - lse) for v in z)
                assert ent[i, t].item() == pytest.approx(h, abs=1e-5)


def test_low_precision_logits_computed_in_float32():
    logits = torch.randn(1, 2, 5).to(torch.bfloat16)
    logp, ent = token_logprobs_and_entropy(logits, torch.tensor([[1, 3]]))
    assert logp.dtype == torch.float32 and ent.dtype == torch.float32
    assert torch.allclose(logp, token_logprobs(logits.float(), torch.tensor([[1, 3]])))


# --- truncated sampling: log-probs renormalised over the sampling support (top-k / top-p) -------------------
def test_support_renormalises_by_hand():
    # p = [0.5, 0.3, 0.2], S = {0, 1}: q = [0.625, 0.375]; log q(0) = log 0.625 = -0.470004,
    # H(q) = 0.625 * 0.470004 + 0.375 * 0.980829 = 0.661563. Token 2 of the row is not truncated (all -1):
    # log p(2) = log 0.2 = -1.609438, H(p) = 0.5 * 0.693147 + 0.3 * 1.203973 + 0.2 * 1.609438 = 1.029653
    logits = torch.log(torch.tensor([[[0.5, 0.3, 0.2], [0.5, 0.3, 0.2]]]))
    support = torch.tensor([[[0, 1], [-1, -1]]])
    logp, ent = token_logprobs_on_support(logits, torch.tensor([[0, 2]]), support, with_entropy=True)
    assert torch.allclose(logp, torch.tensor([[-0.470004, -1.609438]]), atol=1e-6)
    assert torch.allclose(ent, torch.tensor([[0.661563, 1.029653]]), atol=1e-6)
    # the untruncated functions give the full-vocabulary numbers: the ratio of the two is the kept mass 0.8
    assert token_logprobs(logits, torch.tensor([[0, 2]]))[0, 0].item() == pytest.approx(math.log(0.5), abs=1e-6)


def test_support_of_one_token_has_probability_one_and_no_gradient():
    logits = torch.tensor([[[2.0, 1.0, 0.0]]], requires_grad=True)
    logp, ent = token_logprobs_on_support(logits, torch.tensor([[0]]), torch.tensor([[[0, -1]]]), with_entropy=True)
    assert logp.item() == 0.0 and ent.item() == 0.0
    logp.sum().backward()
    assert torch.all(logits.grad == 0)


def test_untruncated_support_equals_the_plain_log_softmax_and_gradients_stay_finite():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 3, 7, generator=gen, requires_grad=True)
    targets = torch.randint(0, 7, (2, 3), generator=gen)
    none = torch.full((2, 3, 4), -1)
    a, ha = token_logprobs_on_support(logits, targets, none, 0.7, with_entropy=True)
    b, hb = token_logprobs_and_entropy(logits, targets, 0.7)
    assert torch.allclose(a, b, atol=1e-6) and torch.allclose(ha, hb, atol=1e-6)
    # a mixed batch: a support padded with -1 (three ids out of 4 slots) beside untruncated tokens
    support = none.clone()
    support[0, 1, :3] = torch.tensor([targets[0, 1].item(), (targets[0, 1].item() + 1) % 7, (targets[0, 1].item() + 2) % 7])
    c, hc = token_logprobs_on_support(logits, targets, support, 0.7, with_entropy=True)
    (c.sum() + hc.sum()).backward()
    assert torch.isfinite(logits.grad).all()
    z = logits.detach()[0, 1] / 0.7
    kept = z[support[0, 1, :3]]
    assert c[0, 1].item() == pytest.approx((z[targets[0, 1]] - torch.logsumexp(kept, 0)).item(), abs=1e-6)
    assert torch.equal(c[1], a[1].detach())
