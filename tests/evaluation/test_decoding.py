"""rlvr_cli/evaluation/decoding.py: the inference-time label, the answer marker's ids, and keyed forced answers."""

from __future__ import annotations

import pytest
import torch

from rlvr_cli.evaluation.decoding import ANSWER_TOKENS, Decoding, answer_keys, draw, itc_label, marker_ids
from rlvr_cli.models.tokenizer import build_char_tokenizer


def test_the_label_of_each_inference_time_setting():
    assert itc_label(None, None, False) is None  # plain sampling has no label
    assert itc_label(32, 8, True) == "budget_32-min_think_8-greedy"
    assert itc_label(32, None, False, answer_tokens=8) == "budget_32-answer_tokens_8"
    assert itc_label(None, None, False, answer_tokens=8) is None  # answer tokens count only with a budget
    assert itc_label(32, None, False, answer_tokens=ANSWER_TOKENS) == "budget_32"


def test_marker_ids_and_a_control_without_a_marker_is_refused():
    tok = build_char_tokenizer()
    assert marker_ids(tok, "#") == [tok.convert_tokens_to_ids("#")] and marker_ids(tok, "") == []
    with pytest.raises(ValueError, match="need a task with an answer marker"):
        draw(None, tok, "", [[1]], Decoding(budget=4))


def test_forced_answer_keys_are_their_rows_and_differ_from_them():
    keys = torch.tensor([1, 2, 3], dtype=torch.int64)
    a = answer_keys(keys)
    assert torch.equal(a, answer_keys(keys)) and not torch.equal(a, keys) and len(set(a.tolist())) == 3
    assert torch.equal(answer_keys(keys[1:]), a[1:])  # a row's key alone decides its forced answer's key
