"""Write problems.jsonl: 200 three-digit additions in the built-in model's raw form (`347+285=`), with the
operands as their own columns for the reward function. Run from the repository root:

    python examples/own_task/make_data.py
"""

import json
import random
from pathlib import Path


def rows(n: int = 200, seed: int = 42) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = rng.randrange(1000), rng.randrange(1000)
        out.append({"question": f"{a:03d}+{b:03d}=", "sum": a + b, "a": a, "b": b})
    return out


def jsonl(records: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


if __name__ == "__main__":
    path = Path(__file__).with_name("problems.jsonl")
    path.write_text(jsonl(rows()))
    print(f"wrote {len(rows())} rows to {path}")
