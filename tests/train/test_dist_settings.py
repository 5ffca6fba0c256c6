"""Distributed settings refused before anything is written, and how a backend error is named."""

from __future__ import annotations

import pytest

from rlvr_cli import dist
from rlvr_cli.train import parallel
from rlvr_cli.errors import UserError
from rlvr_cli.recipe.load import load_recipe


@pytest.mark.parametrize("field,sets", [
    ("loss.top_entropy_quantile", ["loss.top_entropy_quantile=0.2"]),
    ("loss.cov_penalty", ["loss.cov_penalty.type=kl_cov"]),
])
def test_remedies_that_need_whole_minibatch_statistics_are_refused_on_two_processes(field, sets):
    r = load_recipe("grpo", sets)
    parallel.check_settings(r, 1)  # one process: fine
    with pytest.raises(UserError, match=field.replace(".", r"\.")):
        parallel.check_settings(r, 2)


def test_a_backend_error_is_only_a_collective_failure_under_several_processes():
    e = RuntimeError("[gloo/transport/tcp/pair.cc:537] Read error: Connection closed by peer")
    assert dist.collective_failure(e) is None  # one process: an ordinary error, reported as it is
    assert dist.collective_failure(ValueError("gloo")) is None


@pytest.mark.parametrize("message", [
    "[gloo/transport/tcp/pair.cc:537] Read error: Connection closed by peer",
    "Application timeout caused pair closure",  # gloo's words when the other rank hangs (seen on a clean CI run)
])
def test_the_backends_words_for_a_dead_or_hung_peer_are_a_collective_failure_on_two_processes(monkeypatch, message):
    monkeypatch.setattr(dist, "world", lambda: (0, 2))
    failed = dist.collective_failure(RuntimeError(message))
    assert failed is not None and "rank 0 of 2" in str(failed)
    assert dist.collective_failure(RuntimeError("shape mismatch in matmul")) is None
