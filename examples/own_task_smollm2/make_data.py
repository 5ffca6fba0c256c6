"""Write problems.jsonl: 320 questions "Which number is larger, 47 or 83?" with the two numbers as their own
columns (`a`, `b`) and the answer in `larger`. No built-in task asks this. Run from anywhere:

    python examples/own_task_smollm2/make_data.py
"""

import json
import random
from pathlib import Path


def rows(n: int = 320, seed: int = 7) -> list[dict]:
    """n pairs of distinct two-digit numbers, each order equally likely."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = rng.sample(range(10, 100), 2)
        out.append({"question": f"Which number is larger, {a} or {b}?", "a": a, "b": b, "larger": max(a, b)})
    return out


if __name__ == "__main__":
    path = Path(__file__).with_name("problems.jsonl")
    path.write_text("".join(json.dumps(r) + "\n" for r in rows()))
    print(f"wrote {len(rows())} rows to {path}")
