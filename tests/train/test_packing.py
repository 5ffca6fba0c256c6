"""rlvr_cli/train/packing.py: the layout by hand, the response logits at their positions, chunks of similar length."""

from __future__ import annotations

import torch

from rlvr_cli.models.tiny import build_tiny_model
from rlvr_cli.models.tokenizer import build_char_tokenizer
from rlvr_cli.train.packing import length_sorted_chunks, pack, response_logits, response_logprobs


def test_the_layout_by_hand():
    p = pack([[5, 6], [7]], [[8], [9, 10, 11]], pad_id=0)
    # Lp = 2, Lr = 3: prompts left-padded, responses right-padded
    assert p.input_ids.tolist() == [[5, 6, 8, 0, 0], [0, 7, 9, 10, 11]]
    assert p.attention_mask.tolist() == [[1, 1, 1, 0, 0], [0, 1, 1, 1, 1]]
    assert p.position_ids.tolist() == [[0, 1, 2, 2, 2], [0, 0, 1, 2, 3]]  # each row counts from its first token
    assert p.response_ids.tolist() == [[8, 0, 0], [9, 10, 11]]
    assert p.response_mask.tolist() == [[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]] and p.support is None
    assert pack([[1]], [[]], pad_id=0).response_width == 1  # an empty response still has one (masked) slot


def test_the_kept_logits_are_the_ones_a_full_forward_gives_each_response_token():
    tok = build_char_tokenizer()
    model = build_tiny_model(tok).eval()
    prompts, responses = [[3, 4, 5], [6]], [[7, 8], [9, 10, 11]]
    packed = pack(prompts, responses, tok.pad_token_id)
    kept = response_logits(model, packed)
    for i, (p, r) in enumerate(zip(prompts, responses)):
        full = model(torch.tensor([p + r])).logits[0]
        want = full[len(p) - 1 : len(p) - 1 + len(r)]  # position Lp - 1 + j predicts response token j
        assert torch.allclose(kept[i, : len(r)], want, atol=1e-5)
    logp, ent = response_logprobs(model, packed, with_entropy=True)
    row = torch.log_softmax(model(torch.tensor([prompts[0] + responses[0]])).logits[0, 2], -1)[7]
    assert logp.shape == (2, 3) and ent.shape == (2, 3) and abs(logp[0, 0].item() - row.item()) < 1e-5


def test_chunks_sort_by_length_and_lose_no_row():
    lengths = {0: 9, 1: 1, 2: 5, 3: 2, 4: 8}
    chunks = length_sorted_chunks([0, 1, 2, 3, 4], lengths, 2)
    assert [c.tolist() for c in chunks] == [[1, 3, 2], [4, 0]]
    assert len(length_sorted_chunks([0, 1], lengths, 5)) == 2  # no empty chunk
