"""A cached shipped base is never trusted (issue 50): a copy with flipped bytes, a truncated or deleted
file, a forged or missing built.json is written again from the package, with a note naming what was
wrong, and the run then loads the shipped bits; a copy is hashed once per process."""

from __future__ import annotations

import hashlib
import json

import pytest

from rlvr_cli.evaluation.cache import weights_digest
from rlvr_cli.models import builtin, load_model
from rlvr_cli.models.builtin import shipped_manifest


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cache holding a good copy of builtin:tiny, and a process that has verified nothing yet."""
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(builtin, "_VERIFIED", {})
    target = builtin.shipped_model_dir("tiny")
    builtin._VERIFIED.clear()  # as a later process meets the cache
    return target


def _flip(path, at=-1):
    data = bytearray(path.read_bytes())
    data[at] ^= 1
    path.write_bytes(bytes(data))


def _is_shipped_copy(target) -> bool:
    return hashlib.sha256((target / "model.safetensors").read_bytes()).hexdigest() == shipped_manifest()["tiny"]["sha256"]


def _damage_built_json(target, **changes):
    built = json.loads((target / "built.json").read_text())
    built.update(changes)
    (target / "built.json").write_text(json.dumps(built))


def _forge(target):
    """Flipped weights with built.json recording their digest: the package's manifest, not the cache, decides."""
    _flip(target / "model.safetensors")
    files = json.loads((target / "built.json").read_text())["files"]
    digest = hashlib.sha256((target / "model.safetensors").read_bytes()).hexdigest()
    _damage_built_json(target, files={**files, "model.safetensors": digest})


DAMAGE = {
    "weights with one flipped bit": (lambda t: _flip(t / "model.safetensors"), "model.safetensors has sha256"),
    "weights flipped in the header": (lambda t: _flip(t / "model.safetensors", at=20), "model.safetensors has sha256"),
    "weights truncated": (lambda t: (t / "model.safetensors").write_bytes((t / "model.safetensors").read_bytes()[:1000]),
                          "model.safetensors has sha256"),
    "weights emptied": (lambda t: (t / "model.safetensors").write_bytes(b""), "model.safetensors has sha256"),
    "weights deleted": (lambda t: (t / "model.safetensors").unlink(), "model.safetensors is missing"),
    "config flipped": (lambda t: _flip(t / "config.json", at=5), "config.json has sha256"),
    "config deleted": (lambda t: (t / "config.json").unlink(), "config.json is missing"),
    "tokenizer flipped": (lambda t: _flip(t / "tokenizer.json", at=40), "tokenizer.json has sha256"),
    "built.json deleted": (lambda t: (t / "built.json").unlink(), "built.json is missing"),
    "built.json garbage": (lambda t: (t / "built.json").write_bytes(b"\xff{not json"), "built.json is unreadable"),
    "built.json a list": (lambda t: (t / "built.json").write_text("[]"), "other weights than the shipped manifest"),
    "built.json claims other weights": (lambda t: _damage_built_json(t, sha256="0" * 64),
                                        "other weights than the shipped manifest"),
    "built.json of an older rlvr": (lambda t: _damage_built_json(t, files=None), "records no file digests"),
    "built.json forged to the flipped weights": (lambda t: _forge(t), "model.safetensors has sha256"),
    "built.json names a file outside": (lambda t: _damage_built_json(t, files={"../../x": "0" * 64}), "outside the copy"),
}


@pytest.mark.parametrize("case", DAMAGE)
def test_a_damaged_cached_copy_is_written_again_and_said(cache, case, capsys):
    damage, said = DAMAGE[case]
    damage(cache)
    capsys.readouterr()
    assert builtin.shipped_model_dir("tiny") == cache
    err = capsys.readouterr().err
    assert said in err and "writing it again from the package" in err and "builtin:tiny" in err
    assert len(err.strip().splitlines()) == 1
    assert _is_shipped_copy(cache)
    assert builtin._cached_copy_problem(shipped_manifest()["tiny"], cache) is None


def test_a_copy_with_flipped_bytes_is_never_used_by_sample(cache, cli, tmp_path):
    _flip(cache / "model.safetensors")
    res = cli("sample", "builtin:tiny", "--n", "1", "--num-prompts", "1", "--out", str(tmp_path / "s.jsonl"))
    assert res.code == 0, res.stderr
    assert "is not the shipped one (model.safetensors has sha256" in res.stderr
    model, _, _ = load_model("builtin:tiny")
    assert f"blake2b:{weights_digest(model)}" == shipped_manifest()["tiny"]["weights"]


def test_a_good_copy_is_hashed_once_per_process_and_says_nothing(cache, monkeypatch, capsys):
    hashed = []
    real = builtin._file_sha256
    monkeypatch.setattr(builtin, "_file_sha256", lambda p: hashed.append(p.name) or real(p))
    capsys.readouterr()
    for _ in range(3):
        assert builtin.shipped_model_dir("tiny") == cache
    assert hashed.count("model.safetensors") == 1
    assert capsys.readouterr().err == ""


def test_damage_after_the_check_in_the_same_process_is_caught(cache, capsys):
    builtin.shipped_model_dir("tiny")
    (cache / "model.safetensors").write_bytes((cache / "model.safetensors").read_bytes()[:-7])
    builtin.shipped_model_dir("tiny")
    assert "model.safetensors has sha256" in capsys.readouterr().err
    assert _is_shipped_copy(cache)


def test_a_damaged_copy_and_damaged_package_are_refused_not_used(cache, monkeypatch, tmp_path):
    import shutil

    copy = tmp_path / "weights"
    shutil.copytree(builtin.WEIGHTS_DIR, copy)
    _flip(copy / "tiny.safetensors")
    monkeypatch.setattr(builtin, "WEIGHTS_DIR", copy)
    _flip(cache / "model.safetensors")
    with pytest.raises(RuntimeError, match="the shipped weights are damaged; reinstall rlvr"):
        builtin.shipped_model_dir("tiny")


def test_a_run_on_a_copy_with_flipped_bytes_starts_from_the_shipped_bits(cache, cli, tmp_path):
    from conftest import tiny_run

    _flip(cache / "model.safetensors")
    out = tmp_path / "run"
    res = cli("train", "grpo", "--out", str(out), *[f"--set={s}" for s in tiny_run("steps=1")])
    assert res.code == 0, res.stderr
    assert "is not the shipped one (model.safetensors has sha256" in res.stderr
    assert json.loads((out / "run.json").read_text())["base_weights"] == shipped_manifest()["tiny"]["weights"]
