"""The shipped built-in bases: the same bits on every machine, loaded by name, never trained on use."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from rlvr_cli.evaluation.cache import weights_digest
from rlvr_cli.models import builtin, load_model
from rlvr_cli.models.builtin import WEIGHTS_DIR, needs_training, recipe_key, shipped_manifest
from rlvr_cli.recipe.load import load_recipe

SHIPPED = ("tiny-init", "tiny", "tiny-countdown", "tiny-length", "tiny-check-marked")
"""Every base that results/ and the tests start from."""


def test_every_base_results_and_tests_use_is_shipped_with_its_fingerprint():
    manifest = shipped_manifest()
    assert set(SHIPPED) <= set(manifest)
    for name, entry in manifest.items():
        data = (WEIGHTS_DIR / entry["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], name
        assert entry["weights"].startswith("blake2b:") and len(entry["weights"]) == 8 + 32


@pytest.mark.parametrize("name", SHIPPED)
def test_loading_a_shipped_base_gives_its_fingerprint(name):
    model, tok, resolved = load_model(f"builtin:{name}")
    assert f"blake2b:{weights_digest(model)}" == shipped_manifest()[name]["weights"]
    assert resolved.kind == "builtin" and len(tok) == model.config.vocab_size


@pytest.mark.parametrize("name", [n for n in SHIPPED if n != "tiny-init"])
def test_a_shipped_base_matches_its_recipe_as_it_stands(name):
    """Editing a shipped base's recipe without `rlvr models rebuild NAME --write` fails here: the weights
    would no longer be what the recipe says."""
    entry = shipped_manifest()[name]
    assert entry["recipe_key"] == recipe_key(load_recipe(entry["recipe"])), (
        f"recipes/{entry['recipe']}.yaml changed since builtin:{name} was shipped: rebuild it with "
        f"`rlvr models rebuild {name} --write` (then re-record what starts from it)")


def test_using_a_shipped_base_never_trains(monkeypatch, tmp_path):
    import rlvr_cli.train.sft as sft
    from rlvr_cli.warm_start import ensure_built

    monkeypatch.setenv("RLVR_CACHE", str(tmp_path))
    monkeypatch.setattr(sft, "train_sft", lambda *a, **k: pytest.fail("a shipped base was trained"))
    assert not needs_training("builtin:tiny") and needs_training("builtin:tiny-check")
    ensure_built("builtin:tiny", "builtin:tiny-init")
    made = json.loads((builtin.builtin_model_dir("builtin:tiny") / "built.json").read_text())
    assert made["shipped"] is True and made["weights"] == shipped_manifest()["tiny"]["weights"]


def test_damaged_shipped_weights_are_refused(monkeypatch, tmp_path):
    copy = tmp_path / "weights"
    shutil.copytree(WEIGHTS_DIR, copy)
    data = bytearray((copy / "tiny.safetensors").read_bytes())
    data[-1] ^= 1
    (copy / "tiny.safetensors").write_bytes(bytes(data))
    monkeypatch.setattr(builtin, "WEIGHTS_DIR", copy)
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    with pytest.raises(RuntimeError, match="damaged"):
        builtin.builtin_model_dir("builtin:tiny")
    assert not any((tmp_path / "cache" / "builtin").glob("tiny-*/built.json"))


def test_models_list_and_rebuild(cli):
    res = cli("models", "list")
    assert res.code == 0
    for name in SHIPPED:
        assert f"builtin:{name} " in res.stdout and shipped_manifest()[name]["weights"] in res.stdout
    # the seeded init rebuilds in a second: this machine makes the shipped bits
    res = cli("models", "rebuild", "tiny-init")
    assert res.code == 0, res.stderr
    assert "equal to the shipped weights" in res.stderr
    res = cli("models", "rebuild", "tiny-nosuch")
    assert res.code == 2 and "tiny-nosuch: not a shipped built-in model" in res.stderr


def test_a_rebuild_that_differs_exits_3(cli, monkeypatch):
    entry = dict(shipped_manifest()["tiny-init"], weights="blake2b:" + "0" * 32)
    real = shipped_manifest()
    monkeypatch.setattr("rlvr_cli.warm_start.shipped_manifest", lambda: {**real, "tiny-init": entry})
    res = cli("models", "rebuild", "tiny-init")
    assert res.code == 3 and "DIFFERS" in res.stderr
