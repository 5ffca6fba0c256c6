"""The package's layers only point down, as docs/design.md §6 writes them: every import of every module
(module-level and inside functions) goes to the module's own package or to a lower layer, and no two
modules import each other through any chain. models/ resolves and loads but never trains."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rlvr_cli.errors import UserError

PKG = Path(__file__).resolve().parents[1] / "rlvr_cli"

LAYERS = (
    ("__main__",),
    ("cli",),
    ("bridges", "sweep"),
    ("warm_start",),
    ("train",),
    ("evaluation",),
    ("compare",),
    ("sampling", "rewards", "trackers", "models"),
    ("tasks", "metrics"),
    ("envs",),
    ("recipe",),
    ("algo",),
    ("run_files", "dist"),
    ("keyed_random", "console", "fingerprints", "user_code", "checked_import"),
    ("io", "errors", "processes", "__init__"),
    ("numerics",),
)
"""docs/design.md §6, top first: a unit (a subpackage or a top-level module of rlvr_cli) imports only
from itself and from units of a later row. ``__init__`` is rlvr_cli/__init__.py (the version, and the CPU numerics pinned before torch loads)."""
LAYER = {unit: i for i, row in enumerate(LAYERS) for unit in row}


def module_name(path: Path) -> str:
    parts = ["rlvr_cli", *path.relative_to(PKG).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def unit(module: str) -> str:
    """The layer unit of a module: its subpackage, or itself for a top-level module."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports(module: str, source: str) -> set[str]:
    """The rlvr_cli modules ``source`` imports anywhere in its body, relative imports resolved and
    ``from package import submodule`` counted as the submodule."""
    package = module.split(".") if MODULES.get(module, Path()).name == "__init__.py" else module.split(".")[:-1]
    named = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            named.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[:len(package) - node.level + 1], *([node.module] if node.module else [])])
            named.update(f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names)
    found = set()
    for name in named:
        if name == "rlvr_cli" or name.startswith("rlvr_cli."):
            while name not in MODULES:
                name = name.rsplit(".", 1)[0]
            found.add(name)
    return found - {module}


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Imports into another unit of the same layer or of a higher one."""
    return [f"{m} -> {d}" for m in sorted(graph) for d in sorted(graph[m])
            if unit(d) != unit(m) and LAYER[unit(d)] <= LAYER[unit(m)]]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while not comp or comp[-1] != v:
                comp.append(stack.pop())
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


GRAPH = {m: imports(m, p.read_text(encoding="utf-8")) for m, p in MODULES.items()}


def test_every_unit_of_the_package_has_a_layer():
    assert {unit(m) for m in MODULES} <= set(LAYER), sorted({unit(m) for m in MODULES} - set(LAYER))


def test_the_layers_are_the_ones_design_md_writes():
    """§6's numbered list names each unit first in the item of its row here (so the test and the doc
    cannot drift)."""
    import re

    text = (PKG.parent / "docs" / "design.md").read_text(encoding="utf-8")
    section = text[text.index("## §6"):text.index("## §7")]
    items = re.split(r"\n(?=\d+\. )", section)[1:]
    assert len(items) == len(LAYERS), f"§6 has {len(items)} layers, LAYERS {len(LAYERS)}"
    written = {}
    for row, item in enumerate(items):
        for name in re.findall(r"`(\w+)(?:/`|\.py`)", item):
            written.setdefault(name, row)
    assert {u: written.get(u) for u in LAYER} == LAYER


def test_no_import_goes_to_a_higher_layer_or_across_a_layer():
    assert not upward(GRAPH), upward(GRAPH)


def test_no_import_cycle_between_modules():
    assert not cycles(GRAPH), cycles(GRAPH)


def test_an_added_upward_import_or_circle_is_caught():
    """The checks above can fail: a function-level import of the trainer from algo/, and a circle."""
    added = dict(GRAPH)
    added["rlvr_cli.algo.kl"] = GRAPH["rlvr_cli.algo.kl"] | imports(
        "rlvr_cli.algo.kl", "def f():\n    from ..train import rl\n")
    assert set(upward(added)) - set(upward(GRAPH)) == {"rlvr_cli.algo.kl -> rlvr_cli.train.rl"}
    added["rlvr_cli.io"] = GRAPH["rlvr_cli.io"] | {"rlvr_cli.errors"}
    added["rlvr_cli.errors"] = GRAPH["rlvr_cli.errors"] | {"rlvr_cli.io"}
    assert ["rlvr_cli.errors", "rlvr_cli.io"] in cycles(added)


def test_the_package_never_imports_tools_or_bench():
    bad = [f"{m}: {a.name if isinstance(node, ast.Import) else node.module}"
           for m, p in MODULES.items() for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
           if isinstance(node, (ast.Import, ast.ImportFrom))
           for a in (node.names if isinstance(node, ast.Import) else node.names[:1])
           if ((a.name if isinstance(node, ast.Import) else node.module) or "").split(".")[0] in ("tools", "bench")]
    assert not bad, bad


def test_the_run_directory_contract_sits_below_every_reader():
    """compare, evaluation, models, trackers and the trainer all import rlvr_cli/run_files.py: it imports
    nothing of rlvr but the error type."""
    assert GRAPH["rlvr_cli.run_files"] <= {"rlvr_cli.errors"}, GRAPH["rlvr_cli.run_files"]


def test_resolving_an_unbuilt_warm_start_trains_nothing(tmp_path, monkeypatch):
    from rlvr_cli.models import resolve_model_ref

    monkeypatch.setenv("RLVR_CACHE", str(tmp_path))
    with pytest.raises(UserError, match="not built yet"):
        resolve_model_ref("builtin:tiny-check")  # built on first use (not shipped)
    assert not list(tmp_path.rglob("*.safetensors"))
