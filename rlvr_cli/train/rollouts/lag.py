"""Policy versions and lags: which weights sample step t (docs/async.md; issue 41).

Version v is the policy after the updates of step v (0: the weights the run starts from); steps count
from 1, so the batch of step t sampled on-policy has version t-1. The lag of a batch trained at step t
and sampled by version v is t-1-v (metric ``policy_lag``). At a fixed lag k (``rollout.staleness.max``,
the bound TRL calls ``max_staleness`` and AReaL ``max_head_offpolicyness``) step t is sampled by
version max(0, t-1-k): the first k steps, before k updates exist, take the initial weights.

Every place that needs either number calls these two functions: the in-process lag
(:class:`~.sources.LaggedSource`), the sampler process's plan (:class:`~.sampler_process.Plan`), the
overlapped source's bound (:mod:`.overlap`) and the logged lag (:meth:`~.collect.Rollouts.lag`).
"""

from __future__ import annotations


def sampling_version(step: int, k: int) -> int:
    """The policy version that samples step ``step`` at a fixed lag ``k``: v = max(0, t-1-k).

    k = 0 is the synchronous trainer (v = t-1). Example, k = 2: steps 1..5 are sampled by versions
    0, 0, 0, 1, 2 (lags 0, 1, 2, 2, 2).
    """
    return max(0, step - 1 - k)


def policy_lag(step: int, version: int) -> int:
    """Optimiser steps between the policy that sampled a batch (``version``) and the one that trains on it
    at ``step``: t-1-v (0 on-policy)."""
    return step - 1 - version
