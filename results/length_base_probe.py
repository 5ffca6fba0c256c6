"""Does a base ramble *because its own work went wrong*, or does its rambling cause the errors?

    rlvr sample MODEL --task RECIPE --n 16 --num-prompts 128 --max-new-tokens 128 --out s.jsonl
    python results/length_base_probe.py s.jsonl

`rlvr eval`'s P(filler | wrong) cannot tell the two apart; this reads the column work of each
`arithmetic` response (terse `12,13,6` or verbose `7+5=12,...`, with `?` marks and `wait,` filler)
and reports, per column, how often filler comes right after it when it is the first wrong column
against when the work is right so far (the decision the 1/|o| bias acts on), and, among the
responses that ramble and have wrong work, whether the first wrong column comes before the filler
(rambling after an error) or after it (an error after rambling). results/README.md's length
section quotes these numbers for each candidate base.
"""

from __future__ import annotations

import json
import sys
from collections import Counter

from rlvr_cli.tasks.arithmetic import column_totals


def total_of(item: str) -> int | None:
    try:
        return int(item.split("=")[-1].lstrip("?"))
    except ValueError:
        return None


def probe(rows: list[dict]) -> tuple[dict, Counter]:
    """({column: [first-wrong n, with filler next, right-so-far n, with filler next]}, response classes)."""
    cols: dict[int, list[int]] = {}
    classes: Counter = Counter()
    for r in rows:
        a, b = r["prompt"].rstrip("=").split("+")
        truth, _ = column_totals(int(a), int(b), len(a))
        items = [x for x in r["response"].split("#")[0].split(",") if x]
        col, first_err, first_fill = 0, None, None
        for pos, item in enumerate(items):
            if item.startswith("wait"):
                first_fill = pos if first_fill is None else first_fill
                continue
            t = total_of(item)
            wrong = col >= len(truth) or t != truth[col]
            if first_fill is None and first_err is None and col < len(truth):
                nxt = items[pos + 1] if pos + 1 < len(items) else ""
                c = cols.setdefault(col, [0, 0, 0, 0])
                k = 0 if wrong else 2
                c[k] += 1
                c[k + 1] += nxt.startswith("wait")
            if wrong and first_err is None:
                first_err = pos
            col += 1
        if first_fill is None:
            classes["no filler, " + ("wrong work" if first_err is not None else "right work")] += 1
        elif first_err is None:
            classes["filler, right work"] += 1
        else:
            where = "after" if first_err < first_fill else "before"
            classes[f"filler {where} the first wrong column"] += 1
    return cols, classes


def main(path: str) -> None:
    rows = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    cols, classes = probe(rows)
    for j, (ne, fe, nr, fr) in sorted(cols.items()):
        print(f"column {j}: first wrong n={ne:5d} P(filler next)={fe / max(ne, 1):.2f}   "
              f"right so far n={nr:5d} P(filler next)={fr / max(nr, 1):.2f}")  # fmt: skip
    n = sum(classes.values())
    for name, v in sorted(classes.items()):
        print(f"{name:38s} {v:5d} {v / n:.3f}")


if __name__ == "__main__":
    main(sys.argv[1])
