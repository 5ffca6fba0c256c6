"""Train several RL recipes one after the other in one process group (started by torchrun or alone).

    python -m torch.distributed.run --standalone --nproc_per_node 2 tests/dist/train_many.py RUNS.json

RUNS.json: [{"recipe": NAME, "sets": [...], "out": DIR, "resume": false}, ...]. One process group
serves every run, so a test pays torchrun's start-up once (tests/train/test_distributed.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's rlvr_cli


def main(path: str) -> None:
    import torch

    from rlvr_cli import dist
    from rlvr_cli.recipe.load import load_recipe
    from rlvr_cli.train.rl import train_rl

    torch.set_num_threads(1)
    for run in json.loads(Path(path).read_text()):
        train_rl(load_recipe(run["recipe"], run["sets"]), run["out"], resume=run.get("resume", False))
    dist.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
