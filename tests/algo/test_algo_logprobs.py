"""Token log-probs and entropy at a temperature (rlvr_cli/algo/logprobs.py)."""

from __future__ import annotations

import math

import pytest
import torch

from rlvr_cli.algo.logprobs import token_logprobs, token_logprobs_and_entropy


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
