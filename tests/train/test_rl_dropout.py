"""RL runs every forward pass with dropout off, whatever the model's config says; SFT keeps it.

A GPT-2 built from a config with dropout 0.1 (GPT-2's and many hub models' default): with dropout on
in the trainer, the sampler's and the trainer's log-probs of the same tokens differ by about 0.1 and
the on-policy ratio is not 1.
"""

from __future__ import annotations

import math

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from rlvr_cli.models.tiny import TINY_ARCH
from rlvr_cli.models.tokenizer import build_char_tokenizer
from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.train.rl import train_rl
from rlvr_cli.train.run_writer import RunDir

ON_POLICY = [
    "rollout.prompts_per_step=3", "rollout.group_size=4", "rollout.max_new_tokens=16", "steps=1",
    "optim.mu=1", "optim.minibatches=1", "optim.micro_batches=1", "kl.placement=loss", "kl.track=true",
    "eval.at_start=false", "eval.n=1", "eval.num_prompts=1", "eval.max_new_tokens=4", "checkpoint.every=0",
]


@pytest.fixture(scope="module")
def dropout_model(tmp_path_factory):
    tok = build_char_tokenizer()
    arch = TINY_ARCH | {"resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1}
    cfg = GPT2Config(vocab_size=len(tok), pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                     eos_token_id=tok.eos_token_id, **arch)
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("dropout") / "model"
    GPT2LMHeadModel(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.mark.parametrize("source, tol", [
    ("recompute", 1e-6),  # the same forward twice: exactly equal
    ("sampler", 1e-5),  # the sampler's cached incremental forward vs one full forward: float32 rounding
])
def test_on_policy_ratio_is_one_with_a_dropout_model(dropout_model, tmp_path, source, tol):
    r = load_recipe("grpo", [f"model.name={dropout_model}", f"rollout.old_logprobs={source}", *ON_POLICY])
    train_rl(r, tmp_path / "run")
    row = RunDir(tmp_path / "run").read_metrics()[0]
    assert abs(row["ratio_max"] - 1) <= tol and abs(row["ratio_min"] - 1) <= tol, row
    # the reference is the same weights at step 1, so every KL estimate is 0 up to rounding
    assert row["kl_max"] <= 1e-5, row


def test_sft_keeps_the_models_dropout(dropout_model, tmp_path, monkeypatch):
    from rlvr_cli.train import sft

    modes = []
    real = sft.response_logprobs

    def spy(model, *a, **k):
        modes.append(model.training)
        return real(model, *a, **k)

    monkeypatch.setattr(sft, "response_logprobs", spy)
    r = load_recipe("base_sft", [f"model.name={dropout_model}", "steps=1", "sft.batch_size=2", "eval.at_start=false",
                                 "eval.n=1", "eval.num_prompts=1", "eval.max_new_tokens=4"])
    sft.train_sft(r, tmp_path / "sft")
    assert modes and all(modes)
    assert math.isfinite(RunDir(tmp_path / "sft").read_metrics()[0]["loss"])
