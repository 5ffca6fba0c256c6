"""The package's layers only point down: models/ never trains, train/ and models/ never import the CLI,
compare/ and bridges/ do not import each other, and the run-directory contract imports nothing above it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rlvr_cli.errors import UserError

PKG = Path(__file__).resolve().parents[1] / "rlvr_cli"
FORBIDDEN = {
    "models": ("rlvr_cli.train", "rlvr_cli.warm_start", "rlvr_cli.cli"),
    "train": ("rlvr_cli.warm_start", "rlvr_cli.cli"),
    "algo": ("rlvr_cli.train", "rlvr_cli.models", "rlvr_cli.cli"),
    "compare": ("rlvr_cli.bridges", "rlvr_cli.train", "rlvr_cli.evaluation", "rlvr_cli.cli"),
    "bridges": ("rlvr_cli.compare", "rlvr_cli.train", "rlvr_cli.cli"),
    "sampling": ("rlvr_cli.train", "rlvr_cli.evaluation", "rlvr_cli.models", "rlvr_cli.cli"),
    "rewards": ("rlvr_cli.train", "rlvr_cli.evaluation", "rlvr_cli.cli"),
}


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_nothing_above_it(layer):
    bad = [f"{f.relative_to(PKG)}: {m}" for f in sorted((PKG / layer).rglob("*.py")) for m in sorted(_imports(f))
           if m.startswith(FORBIDDEN[layer])]
    assert not bad, bad


def test_the_run_directory_contract_sits_below_every_reader():
    """compare, evaluation, models, trackers and the trainer all import rlvr_cli/rundir.py: it imports
    nothing of rlvr but the error type."""
    ours = {m for m in _imports(PKG / "rundir.py") if m.startswith("rlvr_cli")}
    assert ours <= {"rlvr_cli.errors"}, ours


def test_resolving_an_unbuilt_warm_start_trains_nothing(tmp_path, monkeypatch):
    from rlvr_cli.models import resolve_model_ref

    monkeypatch.setenv("RLVR_CACHE", str(tmp_path))
    with pytest.raises(UserError, match="not built yet"):
        resolve_model_ref("builtin:tiny-countdown")
    assert not list(tmp_path.rglob("*.safetensors"))
