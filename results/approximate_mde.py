"""The smallest detectable effect beside every "not distinguishable" of a summary written before issue 47.

    python results/approximate_mde.py [SUMMARY.md ...]     # default: every results/**/summary.md

Summaries whose runs have no committed per-prompt records cannot be re-tested with the crossed test of
rlvr_cli/compare/crossed.py. What each still holds is the pass@1 interval of the old rule, D in [lo, hi]
at confidence c. Reading it as a normal interval gives SE = (hi - lo) / (2 z) with z = z_{(1+c)/2}, and
the MDE at 80% power and the same per-arm level is (z + z_0.8) SE (Cohen 1988 §2.3, the formula of
crossed.minimum_detectable at df = inf). It is approximate (a percentile bootstrap interval is not
symmetric, and the old bootstrap under-covered when seeds vary): it says how blind the comparison was,
not a new verdict. Each "not distinguishable" line without an MDE gets "(old rule; approximate MDE
X.XXX from its interval)"; a line already annotated is left alone, so the script can run twice.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from scipy.stats import norm

ROOT = Path(__file__).resolve().parents[1]
INTERVAL = re.compile(r"pass@1 ([+-]?\d+\.\d+) \[([+-]?\d+\.\d+), ([+-]?\d+\.\d+)\]")
TAG = "approximate MDE"


def approximate_mde(low: float, high: float, confidence: float, power: float = 0.8) -> float:
    """(z_{(1+c)/2} + z_power) (hi - lo) / (2 z_{(1+c)/2}). Example: [-0.05, +0.05] at 95%:
    SE 0.0255, MDE (1.960 + 0.842) * 0.0255 = 0.0715."""
    z = norm.ppf((1 + confidence) / 2)
    return (z + norm.ppf(power)) * (high - low) / (2 * z)


def annotate(path: Path) -> int:
    """Annotate one summary.md in place; returns the lines changed."""
    confidence = _confidence(path)
    out, changed = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        m = INTERVAL.search(line)
        if "not distinguishable" in line and "MDE" not in line and m:
            mde = approximate_mde(float(m.group(2)), float(m.group(3)), confidence)
            line = line.replace("not distinguishable at this budget**",
                                f"not distinguishable at this budget** (old rule; {TAG} {mde:.3f} from its "
                                f"{100 * confidence:.4g}% interval)", 1)
            changed += 1
        out.append(line)
    if changed:
        path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return changed


def _confidence(path: Path) -> float:
    """The intervals' confidence: summary.json's against_control.confidence beside it, else 1 - 0.05/m
    where the text says "Bonferroni-widened over the m ...", else 0.95."""
    m = re.search(r"Bonferroni-widened over the (\d+)", path.read_text(encoding="utf-8"))
    if m and not path.with_name("summary.json").is_file():
        return 1 - 0.05 / int(m.group(1))
    f = path.with_name("summary.json")
    try:
        c = json.loads(f.read_text(encoding="utf-8"))["against_control"]["confidence"]
        return float(c) if 0 < float(c) < 1 else 0.95
    except (OSError, ValueError, KeyError, TypeError):
        return 0.95


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted((ROOT / "results").rglob("summary.md"))
    total = sum(annotate(p) for p in paths if p.is_file())
    print(f"{total} line(s) annotated")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
