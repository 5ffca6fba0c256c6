"""Every sweep spec the docs and `rlvr sweep --help` name (`rlvr sweep PATH.yaml ...`) exists and passes
`rlvr sweep --dry-run` from the repository root, where the docs say to run it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "results" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NAMED = re.compile(r"rlvr sweep((?:\s+[\w.+/-]+\.yaml)+)")
"""`rlvr sweep` and the spec files after it (a placeholder such as SPEC.yaml or A.yaml has no directory)."""


def named(text: str) -> set[str]:
    return {s for m in NAMED.finditer(text) for s in m.group(1).split() if "/" in s}


@pytest.fixture(scope="module")
def specs() -> dict[str, str]:
    """Spec path -> where it is named (the docs, then the help)."""
    from rlvr_cli.cli.sweep import sweep

    found: dict[str, str] = {}
    for doc in DOCS:
        for s in named(doc.read_text(encoding="utf-8")):
            found.setdefault(s, str(doc.relative_to(ROOT)))
    for s in named(sweep.__doc__):
        found.setdefault(s, "rlvr sweep --help")
    return found


def test_the_examples_the_readme_and_the_help_give_are_among_them(specs, cli):
    assert specs["sweeps/clip.yaml"] == "README.md" and named(cli("sweep", "--help").stdout) == {"sweeps/clip.yaml"}
    assert {"results/real/sweep.yaml", "results/length/sweep.yaml"} <= set(specs)


def test_every_named_spec_exists_and_passes_the_dry_run(specs, cli, monkeypatch):
    monkeypatch.chdir(ROOT)
    for spec, where in sorted(specs.items()):
        assert (ROOT / spec).is_file(), f"{where} names {spec}, which does not exist"
        res = cli("sweep", spec, "--dry-run")
        assert res.code == 0, (spec, where, res.stderr)
