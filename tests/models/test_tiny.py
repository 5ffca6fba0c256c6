"""rlvr_cli/models/tiny.py: the built-in architecture's size by hand, no dropout, deterministic per seed."""

from __future__ import annotations

import torch

from rlvr_cli.models.tiny import build_tiny_model
from rlvr_cli.models.tokenizer import build_char_tokenizer


def test_the_parameter_count_by_hand_and_no_dropout():
    tok = build_char_tokenizer()
    model = build_tiny_model(tok)
    v, d, inner, layers, positions = len(tok), 96, 384, 3, 512
    per_layer = (2 * 2 * d                      # two layer norms (weight, bias)
                 + d * 3 * d + 3 * d            # attention qkv
                 + d * d + d                    # attention out
                 + d * inner + inner + inner * d + d)  # MLP
    want = v * d + positions * d + layers * per_layer + 2 * d  # tied embeddings: the head adds nothing
    assert v == 62 and sum(p.numel() for p in model.parameters()) == want == 390_816  # "about 0.39M"
    assert all(m.p == 0.0 for m in model.modules() if isinstance(m, torch.nn.Dropout))
    assert model.lm_head.weight.data_ptr() == model.transformer.wte.weight.data_ptr()


def test_the_same_seed_builds_the_same_weights_and_leaves_the_global_generator_alone():
    tok = build_char_tokenizer()
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    a, b, c = build_tiny_model(tok, 0), build_tiny_model(tok, 0), build_tiny_model(tok, 1)
    assert torch.equal(torch.random.get_rng_state(), before)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["transformer.h.0.mlp.c_fc.weight"], sc["transformer.h.0.mlp.c_fc.weight"])
