"""Shared test fixtures: an isolated model cache and a way to run the CLI in-process."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

import rlvr_cli  # noqa: F401 - before torch: pins the CPU numerics (rlvr_cli/numerics.py), as every `rlvr` command does

# No model hub and no dataset hub in tests: fail fast instead of retrying the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Every evaluation computed, as in a fresh checkout (tests of the eval cache turn it on themselves).
os.environ["RLVR_EVAL_CACHE"] = "0"


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread():
    """The tiny model runs fastest on one thread; two threads on a shared 2-core machine crawl."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="session", autouse=True)
def rlvr_cache(tmp_path_factory):
    """Every test session builds the built-in models into its own cache (set RLVR_TEST_CACHE to reuse one)."""
    path = os.environ.get("RLVR_TEST_CACHE") or str(tmp_path_factory.mktemp("rlvr-cache"))
    old = os.environ.get("RLVR_CACHE")
    os.environ["RLVR_CACHE"] = path
    yield path
    if old is None:
        os.environ.pop("RLVR_CACHE", None)
    else:
        os.environ["RLVR_CACHE"] = old


TINY_RUN = (
    "rollout.prompts_per_step=2", "rollout.group_size=2", "rollout.max_new_tokens=8",
    "eval.at_start=false", "eval.every=0", "eval.n=2", "eval.num_prompts=2", "checkpoint.every=0", "steps=2",
)
"""The overrides of a run small enough for a test: 2 prompts x 2 responses of at most 8 tokens, 2 steps, no
evaluation during training, no checkpoint."""


def tiny_run(*changes: str, without: tuple[str, ...] = ()) -> list[str]:
    """``TINY_RUN`` with each ``field=value`` of ``changes`` in place of that field's entry (or added), and
    the fields in ``without`` left to the recipe. A test module calls it once, at import, for its own run
    size (``from conftest import tiny_run``: pytest puts tests/ on the import path for this file)."""
    out = {s.split("=", 1)[0]: s for s in TINY_RUN if s.split("=", 1)[0] not in without}
    for s in changes:
        out[s.split("=", 1)[0]] = s
    return list(out.values())


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str


@pytest.fixture
def cli(capsys):
    """Run `rlvr ARGS...` in-process; returns exit code, stdout and stderr."""
    from rlvr_cli.cli import main

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        out = capsys.readouterr()
        return CliResult(code, out.out, out.err)

    return run


@pytest.fixture(scope="session")
def tiny_base(rlvr_cache):
    """Directory of builtin:tiny (the shipped weights, written into the session's cache in about a second)."""
    from rlvr_cli.models import resolve_model_ref
    from rlvr_cli.warm_start import ensure_built

    ensure_built("builtin:tiny")
    return resolve_model_ref("builtin:tiny").path


def write_word_llama(root):
    """A 1-layer Llama from a config with a word-level vocabulary whose special ids differ from the
    built-in tokenizer's, saved under ``root/model``, and a JSONL addition task ``root/data.jsonl``
    ("What is a plus b?"); returns ``root``."""
    import json

    import torch
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {str(i): i for i in range(20)} | {"What": 20, "is": 21, "plus": 22, "?": 23, " ": 24, "\n": 25,
                                              "[UNK]": 26, "[EOS]": 27, "[PAD]": 28}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"\d+|\w+|\s|[^\w\s]"), behavior="isolated")
    backend.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="[EOS]", pad_token="[PAD]", unk_token="[UNK]")
    cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, eos_token_id=27, pad_token_id=28)
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(root / "model")
    tok.save_pretrained(root / "model")
    (root / "data.jsonl").write_text("".join(json.dumps({"q": f"What is {a} plus {b}?", "a": str(a + b)}) + "\n"
                                             for a in range(10) for b in range(10)))
    return root


def interrupted_at_step(monkeypatch, step: int):
    """Make the trainer's step ``step`` raise KeyboardInterrupt (Ctrl-C) until the returned function is
    called, which puts the real step back: the run stops as a user would stop it."""
    import rlvr_cli.train.rl as rl

    real = rl._train_step

    def killed(*args):  # the step number is _train_step's last argument
        if args[-1] == step:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(rl, "_train_step", killed)
    return lambda: monkeypatch.setattr(rl, "_train_step", real)
