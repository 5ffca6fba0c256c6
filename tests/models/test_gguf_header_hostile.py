"""Hostile GGUF files (issue 44): every count and length in the header is checked against the file
before gguf/transformers read it, so a few hundred bytes can no longer declare gigabytes; a symbolic
link loop, a FIFO, an empty file and a file whose metadata describes more weights than it holds exit
2 naming the file, through the CLI as a user meets them."""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path

import pytest

gguf = pytest.importorskip("gguf")

from rlvr_cli.errors import UserError  # noqa: E402
from rlvr_cli.models import resolve_model_ref  # noqa: E402
from rlvr_cli.models.gguf_header import MAX_ARRAY_ITEMS, GGUFHeaderError, read_header  # noqa: E402

from test_models_gguf import SPECIALS, _byte_alphabet, write_tiny_llama_gguf  # noqa: E402


def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def _header(n_tensors: int, n_kv: int) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv)


ARCH = _s("general.architecture") + struct.pack("<I", 8) + _s("llama")


def _write(path: Path, data: bytes, pad_to: int | None = None) -> Path:
    path.write_bytes(data + b"\0" * max(0, (pad_to or 0) - len(data)))
    return path


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def no_reader(monkeypatch):
    """gguf's own reader must never see a header that failed the check (it would allocate per item)."""
    import gguf as gguf_pkg

    def refuse(*_a, **_k):
        raise AssertionError("GGUFReader was given a file that failed the header check")

    monkeypatch.setattr(gguf_pkg, "GGUFReader", refuse)
    monkeypatch.setattr(gguf_pkg.gguf_reader, "GGUFReader", refuse)


HOSTILE = {
    # the issue's case: 178 bytes declaring an array of 10^8 uint8 tokens (GGUFReader: 24 GB, minutes)
    "array_count": (_header(0, 2) + ARCH + _s("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 0, 10**8), "item count"),
    "array_of_strings": (_header(0, 2) + ARCH + _s("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 10**6), "item count"),
    "array_over_the_cap": (_header(0, 2) + ARCH + _s("x") + struct.pack("<IIQ", 9, 0, MAX_ARRAY_ITEMS + 1)
                           + b"\0" * (MAX_ARRAY_ITEMS + 1), "more than"),
    "string_length": (_header(0, 2) + ARCH + _s("general.name") + struct.pack("<IQ", 8, 2**62), "declares"),
    "key_length": (_header(0, 1) + struct.pack("<Q", 2**40) + b"\0" * 16, "declares"),
    "kv_count": (_header(0, 2**40), "key-value count"),
    "tensor_count": (_header(2**40, 1) + ARCH, "tensor count"),
    "nested_arrays": (_header(0, 2) + ARCH + _s("deep") + struct.pack("<I", 9)
                      + struct.pack("<IQ", 9, 1) * 8 + struct.pack("<IQ", 0, 0), "nested deeper"),
    "value_type": (_header(0, 2) + ARCH + _s("odd") + struct.pack("<I", 77), "unknown value type"),
    "tensor_dims": (_header(1, 1) + ARCH + _s("w") + struct.pack("<I", 9) + struct.pack("<Q", 1) * 9
                    + struct.pack("<IQ", 0, 0), "dimensions"),
    "tensor_outside": (_header(1, 1) + ARCH + _s("w") + struct.pack("<IQQ", 2, 2**20, 2**20) + struct.pack("<IQ", 0, 0),
                       "inside the file"),
    "tensor_type": (_header(1, 1) + ARCH + _s("w") + struct.pack("<IQ", 1, 4) + struct.pack("<IQ", 9999, 0), "unknown ggml type"),
    "version": (b"GGUF" + struct.pack("<IQQ", 1, 0, 0), "version 1"),
    "magic": (b"GGML" + b"\0" * 40, "no GGUF magic"),
    "cut_short": (_header(0, 1) + _s("general.architecture") + struct.pack("<IQ", 8, 5) + b"ll", "needs 5 bytes"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_header_is_refused_before_any_reader_allocates(case, tmp_path, no_reader):
    data, needle = HOSTILE[case]
    path = _write(tmp_path / f"{case}.gguf", data, pad_to=178 if case == "array_count" else None)
    t0 = time.perf_counter()
    with pytest.raises(GGUFHeaderError, match=needle):
        read_header(path)
    assert time.perf_counter() - t0 < 5


def test_the_issue_178_byte_file_exits_2_at_once_through_the_cli(tmp_path, cache, cli, no_reader):
    path = _write(tmp_path / "small.gguf", HOSTILE["array_count"][0], pad_to=178)
    assert path.stat().st_size == 178
    t0 = time.perf_counter()
    r = cli("sample", str(path), "--task", "arithmetic", "--n", "1", "--num-prompts", "1", "--out", str(tmp_path / "s.jsonl"))
    assert r.code == 2 and "small.gguf: not a readable GGUF file" in r.stderr and "item count" in r.stderr, r.stderr
    assert time.perf_counter() - t0 < 30
    assert not (tmp_path / "s.jsonl").exists()


def test_a_well_formed_file_passes_and_counts_its_weights(tmp_path):
    header = read_header(write_tiny_llama_gguf(tmp_path / "tiny.gguf"))
    # 261 x 16 embedding, 2 blocks of 2,336, the output norm: the converted model's 8,864 parameters
    assert (header.version, header.architecture, header.tensors, header.elements) == (3, "llama", 20, 8864)


def test_metadata_describing_more_weights_than_the_tensors_hold_exits_2(tmp_path, cache, cli):
    """The header is well formed but declares hidden 2048 x 16 blocks with no tensor: transformers would
    build that model from random weights (5 GB) and sample from it without a word."""
    w = gguf.GGUFWriter(str(tmp_path / "hollow.gguf"), "llama")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(SPECIALS + _byte_alphabet() + ["Ġt", "Ġth"])
    w.add_token_merges(["Ġ t", "Ġt h"])
    w.add_eos_token_id(2)
    w.add_context_length(256)
    w.add_embedding_length(2048)
    w.add_block_count(16)
    w.add_feed_forward_length(4096)
    w.add_head_count(2)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(UserError, match=r"hollow\.gguf: its metadata describes a model of [\d,]+ parameters, but its 0 tensor"):
        resolve_model_ref(str(tmp_path / "hollow.gguf"))
    assert not (cache / "gguf").exists()  # refused before the conversion's lock and folder


def test_a_symlink_loop_exits_2_naming_it(tmp_path, cache, cli):
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    a.symlink_to(b)
    b.symlink_to(a)
    r = cli("eval", str(a), "--task", "arithmetic", "--n", "1", "--num-prompts", "1")
    assert r.code == 2 and "a.gguf: cannot resolve the GGUF file's path" in r.stderr, r.stderr


@pytest.mark.parametrize("kind", ["fifo", "directory", "empty"])
def test_a_gguf_path_that_is_not_a_file_or_is_empty_exits_2(kind, tmp_path, cache):
    path = tmp_path / "m.gguf"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path.write_bytes(b"")
    needle = "the file is empty" if kind == "empty" else "not a regular file"
    with pytest.raises(UserError, match=rf"m\.gguf: .*{needle}"):
        resolve_model_ref(str(path))
