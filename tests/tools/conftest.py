"""The scripts under results/ are plain files, not a package: their directory goes on sys.path so that the
tests here import them by name (`import r1_summary`)."""

from __future__ import annotations

import sys
from pathlib import Path

RESULTS = str(Path(__file__).resolve().parents[2] / "results")
if RESULTS not in sys.path:
    sys.path.insert(0, RESULTS)
