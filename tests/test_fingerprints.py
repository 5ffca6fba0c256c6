"""rlvr_cli/fingerprints.py: every digest of what makes a run's numbers. The values are recorded in
committed results/ and golden records and name cache entries, so they are pinned here: by hand on small
inputs, and on the shipped builtin:tiny against the manifest and the golden records."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import torch

from rlvr_cli import fingerprints as fp

GOLDEN = Path(__file__).resolve().parent / "golden" / "records"


def _b2(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def test_the_weights_digest_by_hand():
    """One tensor [[1, 2]] in float32: its name, dtype and shape, a NUL, then its 8 little-endian bytes."""
    lin = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1.0, 2.0]]))
    want = _b2(b"weight|torch.float32|(1, 2)\0" + struct.pack("<2f", 1.0, 2.0))
    assert fp.weights_digest(lin) == want and fp.weights_fingerprint(lin) == f"blake2b:{want}"
    with torch.no_grad():
        lin.weight[0, 1] = torch.nextafter(torch.tensor(2.0), torch.tensor(3.0))  # one bit
    assert fp.weights_digest(lin) != want
    assert fp.weights_digest(lin.to(torch.float64)) != fp.weights_digest(lin.to(torch.float32))


def test_the_shipped_base_hashes_to_the_manifest_and_the_golden_records(tiny_base):
    """Byte-identical to what the manifest, run.json's base_weights and tests/golden recorded."""
    from rlvr_cli.models.builtin import shipped_manifest
    from rlvr_cli.warm_start import _load_weights

    got = fp.weights_fingerprint(_load_weights(Path(tiny_base)))
    assert got == shipped_manifest()["tiny"]["weights"] == "blake2b:88601d827d9ce0b80fe7eea9fbe12ec3"
    assert json.loads((GOLDEN / "grpo.json").read_text())["base_weights"] == got


def test_the_source_digest_by_hand(tmp_path):
    """Each .py file's path relative to the root, a NUL, its bytes, a NUL, in path order; other files not."""
    (tmp_path / "b.py").write_bytes(b"y = 2\n")
    (tmp_path / "a.py").write_bytes(b"x = 1\n")
    (tmp_path / "notes.txt").write_text("not source")
    want = _b2(b"a.py\0x = 1\n\0" + b"b.py\0y = 2\n\0")
    assert fp.source_digest(tmp_path) == want
    (tmp_path / "notes.txt").write_text("changed")
    assert fp.source_digest(tmp_path) == want
    (tmp_path / "a.py").rename(tmp_path / "c.py")  # same bytes, another name
    assert fp.source_digest(tmp_path) != want
    assert fp.package_source_digest() == fp.source_digest(Path(fp.__file__).resolve().parent)


def test_the_data_fingerprint_of_the_built_in_task_is_pinned():
    """run.json's task_data for `grpo`'s arithmetic task; a change here changes every recorded run's value
    (a deliberate change to the task's generator moves it too: then update this pin and say so)."""
    from rlvr_cli.recipe.load import load_recipe
    from rlvr_cli.tasks import build_task, data_fingerprint

    assert data_fingerprint is fp.data_fingerprint  # the old name is the same function
    assert fp.data_fingerprint(build_task(load_recipe("grpo").task)) == "blake2b:f793cbe8875cef77a2f42e8a7281d883"


def test_the_reward_code_digests_by_hand(tmp_path):
    module = tmp_path / "mine.py"
    module.write_bytes(b"def credit(completions, **kw):\n    return [1.0]\n")
    h = hashlib.blake2b(module.read_bytes(), digest_size=16)
    h.update(b"\0credit")
    assert fp.reward_source_digest(module, "credit") == "blake2b:" + h.hexdigest()
    assert fp.reward_source_digest(module, "other") != fp.reward_source_digest(module, "credit")
    both = {"mine.py:credit": "blake2b:ab", "pkg.mod:f": None}  # a module without a file: None
    assert fp.reward_code_digest(both) == "blake2b:" + _b2(b"mine.py:credit=blake2b:ab\npkg.mod:f=None")
    assert fp.blake2b_text("é") == "blake2b:" + _b2("é".encode("utf-8"))


def test_the_versions_name_each_library():
    assert tuple(fp.library_versions()) == fp.LIBRARIES
    assert fp.library_versions()["torch"] == torch.__version__
    assert set(fp.versions()) == {"rlvr", "torch", "transformers", "python"}
