"""Do two regenerations of results/ reach the same conclusions? Compare their `rlvr compare` summaries.

    python results/reproduce.py --runs /tmp/rr/runs --results /tmp/rr/results
    python tools/agree.py results /tmp/rr/results          # the committed results against the new ones

For every experiment directory both hold (a `summary.json` from `rlvr compare`), and every variant
both have (matched by label), it prints the diagnosis counts of each failure mode (KL explosion,
entropy collapse, length inflation: runs detected / possible / none) and the final held-out pass@1
and pass@k (mean ± std over seeds) side by side. A verdict is the diagnosis counted over the
variant's runs; it *agrees* when the majority status (detected, possible or none) is the same in both.
The exit status is 0 when every verdict agrees, 1 otherwise, 2 when a directory holds no summary at
all; an experiment or variant only one side has is listed and skipped. The means are printed for reading, not judged: runs drawn with different random
streams differ in their numbers, and whether a difference of means matters is a question for their
standard deviations, which are printed beside them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

MODES = ("kl_explosion", "entropy_collapse", "length_inflation")
STATUSES = ("detected", "possible", "none")


def load(directory: Path) -> dict[str, dict]:
    """{experiment: summary} for every <experiment>/summary.json under ``directory``."""
    out = {}
    for path in sorted(directory.glob("*/summary.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            print(f"skipping {path}: {e}", file=sys.stderr)
            continue
        if not isinstance(data, dict) or not isinstance(data.get("variants"), list) or not all(
                isinstance(v, dict) and "label" in v for v in data["variants"]):
            print(f"skipping {path}: not an `rlvr compare` summary (no list of labelled variants)", file=sys.stderr)
            continue
        out[path.parent.name] = data
    return out


def majority(counts: dict) -> str:
    """The status most of a variant's runs got (ties go to the first of detected, possible, none)."""
    best = max(STATUSES, key=lambda s: (counts.get(s, 0), -STATUSES.index(s)))
    return best if counts.get(best, 0) else "n/a"


def counts_text(counts: dict) -> str:
    return "/".join(str(counts.get(s, 0)) for s in STATUSES)


def stat(final: dict, key: str) -> str:
    v = final.get(key) or {}
    return "-" if v.get("mean") is None else f"{v['mean']:.3f}±{(v.get('std') or 0):.3f}"


def compare(a: dict[str, dict], b: dict[str, dict], names: tuple[str, str]) -> int:
    """Print the side-by-side table; return the number of verdicts that disagree."""
    disagree = 0
    for exp in sorted(set(a) | set(b)):
        if exp not in a or exp not in b:
            print(f"\n== {exp}: only in {names[0] if exp in a else names[1]}")
            continue
        va = {v["label"]: v for v in a[exp]["variants"]}
        vb = {v["label"]: v for v in b[exp]["variants"]}
        print(f"\n== {exp}  (diagnosis: runs detected/possible/none, {names[0]} | {names[1]})")
        for label in [x for x in va if x in vb] + [x for x in vb if x not in va]:
            if label not in va or label not in vb:
                print(f"  {label}: only in {names[0] if label in va else names[1]}")
                continue
            cells, ok = [], True
            for mode in MODES:
                ca = (va[label].get("diagnosis") or {}).get(mode) or {}
                cb = (vb[label].get("diagnosis") or {}).get(mode) or {}
                same = majority(ca) == majority(cb)
                ok &= same
                disagree += not same
                cells.append(f"{mode} {counts_text(ca)} | {counts_text(cb)}{'' if same else ' DIFFERS'}")
            fa, fb = va[label].get("final") or {}, vb[label].get("final") or {}
            print(f"  {label}{'' if ok else '  <-- a verdict differs'}")
            print(f"    {'; '.join(cells)}")
            print(f"    pass@1 {stat(fa, 'pass@1')} | {stat(fb, 'pass@1')};  pass@k {stat(fa, 'pass@k')} | "
                  f"{stat(fb, 'pass@k')}")
    return disagree


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", help="a results directory (e.g. results)")
    ap.add_argument("b", help="another (e.g. the --results of a new regeneration)")
    args = ap.parse_args()
    a, b = load(Path(args.a)), load(Path(args.b))
    if not a or not b:
        print(f"error: no */summary.json under {args.a if not a else args.b}", file=sys.stderr)
        sys.exit(2)
    n = compare(a, b, (args.a, args.b))
    print(f"\n{'every verdict agrees' if n == 0 else f'{n} verdict(s) differ'}")
    sys.exit(0 if n == 0 else 1)


if __name__ == "__main__":
    main()
