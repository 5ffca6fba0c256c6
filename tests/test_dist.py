"""rlvr_cli/dist.py in one process (the N-process behaviour is tests/train/test_distributed.py's): contiguous
shares by hand, collectives that are the identity, and a backend's error cut to the line a user needs."""

from __future__ import annotations

import pytest

from rlvr_cli import dist
from rlvr_cli.errors import RunFailed


def test_shares_are_contiguous_low_ranks_first_and_differ_by_at_most_one():
    # 10 groups on 4 ranks: 3, 3, 2, 2
    assert [dist.share(10, r, 4) for r in range(4)] == [range(0, 3), range(3, 6), range(6, 8), range(8, 10)]
    assert [len(dist.share(2, r, 4)) for r in range(4)] == [1, 1, 0, 0]
    assert dist.share(7) == range(0, 7)  # one process: everything


def test_one_process_collectives_are_the_identity(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert dist.world() == (0, 1) and dist.is_main() and not dist.launched_by_torchrun()
    assert dist.all_reduce([1, 2.5]) == [1.0, 2.5] and dist.all_reduce_max(3) == 3.0 and dist.all_reduce_sum(2) == 2.0
    assert dist.gather_objects({"a": 1}) == [{"a": 1}] and dist.gather_concat([1, 2]) == [1, 2]
    dist.barrier()
    assert dist.collective_failure(RuntimeError("gloo: connection reset")) is None  # no other rank to blame
    monkeypatch.setenv("WORLD_SIZE", "3")
    assert dist.launched_by_torchrun() and dist.world_size_from_env() == 3


def test_a_backend_error_is_its_first_line_without_source_location_or_advice():
    e = RuntimeError("[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Read error [127.0.0.1]:7851: "
                     "Connection reset by peer. This is typically caused by a crash.\nmore lines")
    assert dist.backend_message(e) == "Read error [127.0.0.1]:7851: Connection reset by peer"
    assert dist.backend_message(RuntimeError("")) == ""
    assert len(dist.backend_message(RuntimeError("x" * 1000))) == 300


def test_a_failed_collective_names_the_rank_and_the_way_on():
    def boom():
        raise RuntimeError("[pair.cc:1] Connection closed by peer")

    with pytest.raises(RunFailed, match=r"^rank 0 of 1: the collective barrier failed \(RuntimeError: Connection "
                                        r"closed by peer\); .*continue with --resume"):
        dist.collective("barrier", boom)
    assert dist.collective("noop", lambda: 5) == 5
