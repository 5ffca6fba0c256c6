"""results/ holds evidence a stranger can rerun: no machine's paths, and each summary names what it started
from (one base fingerprint per base model) and the one code revision that made it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ABSOLUTE = re.compile(r"(^|[^A-Za-z0-9_.~])/(work|home|root|tmp|Users|mnt|data)/")


def _committed(pattern: str) -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", pattern], cwd=ROOT, capture_output=True, text=True, timeout=30)
    except OSError:
        out = None
    if out is None or out.returncode != 0 or not out.stdout.strip():  # not a git checkout: every file there
        return sorted(p for p in (ROOT / "results").rglob("*") if p.is_file())
    return [ROOT / line for line in out.stdout.splitlines()]


def test_no_committed_file_under_results_holds_an_absolute_path():
    bad = []
    for path in _committed("results"):
        if path.suffix in (".md", ".json", ".yaml", ".py", ".sh", ".txt") and path.is_file():
            for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if ABSOLUTE.search(line):
                    bad.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()[:120]}")
    assert not bad, "\n".join(bad[:20])


SUMMARIES = sorted((ROOT / "results").rglob("summary.md"))


@pytest.mark.parametrize("summary", SUMMARIES, ids=lambda p: str(p.relative_to(ROOT / "results").parent))
def test_every_summary_names_its_base_weights_and_one_code_revision(summary):
    text = summary.read_text(encoding="utf-8")
    provenance = [line for line in text.splitlines() if line.startswith("Provenance:")]
    assert len(provenance) == 1, f"{summary}: no single Provenance line"
    line = provenance[0]
    assert "DIFFER" not in line and "not recorded" not in line and "unknown" not in line, line
    assert re.search(r"(blake2b|sha256):[0-9a-f]{8}", line) or "base weights" in line, line
    assert re.search(r"code revision:? [0-9a-f]{12}", line), line
