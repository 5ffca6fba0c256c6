"""Each rank holds its own rows of one batch; rank 0 writes the batch's mismatch statistics as JSON.

    python -m torch.distributed.run --standalone --nproc_per_node 2 tests/dist/mismatch_stats.py OUT.json

The rows are a fixed function of the global row index (tests/train/test_distributed.py builds the same
batch in one process), so the statistics must be those of the whole batch, not of rank 0's half.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's rlvr_cli


def batch(rows: range):
    """(trainer log-probs, sampler log-probs, mask) of global rows ``rows``: row i has 3 + i % 4 tokens,
    and the later rows differ more (so rank 0's half has other quantiles than the whole)."""
    import torch

    g = torch.Generator().manual_seed(0)
    n, width = 8, 6
    trainer = -torch.rand(n, width, generator=g, dtype=torch.float64)
    sampler = trainer + torch.randn(n, width, generator=g, dtype=torch.float64) * torch.linspace(0.01, 1.5, n)[:, None]
    mask = torch.zeros(n, width)
    for i in range(n):
        mask[i, : 3 + i % 4] = 1
    return trainer[rows.start:rows.stop].float(), sampler[rows.start:rows.stop].float(), mask[rows.start:rows.stop]


def stats(rows: range) -> dict:
    from rlvr_cli.algo.is_correction import is_correction_weights
    from rlvr_cli.train.step_stats import batch_mismatch_stats

    trainer, sampler, mask = batch(rows)
    isc = is_correction_weights(trainer, sampler, mask, "token_truncate", cap=1.5, cap_low=0.5)
    return batch_mismatch_stats(isc, trainer, sampler, mask)


def main(out: str) -> None:
    import torch.distributed as tdist

    from rlvr_cli import dist

    tdist.init_process_group("gloo")
    rank, size = dist.world()
    result = stats(dist.share(8, rank, size))
    if rank == 0:
        Path(out).write_text(json.dumps(result))
    dist.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
