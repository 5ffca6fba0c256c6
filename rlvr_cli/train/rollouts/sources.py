"""Where a step's rollouts come from: the seam between sampling and learning (issue 41, docs/async.md).

The trainer asks its :class:`RolloutSource` for step t's rollouts, trains on them, then tells it the
policy moved (``policy_updated(t)``: version t now exists). Which weights sampled the batch is the
source's business; it says so in :attr:`Rollouts.policy_version`, and the trainer logs the lag
t-1-version (metric ``policy_lag``):

- :class:`SyncSource` (``rollout.staleness.max`` 0): the current weights, version t-1: the synchronous
  trainer, exactly as before the seam existed.
- :class:`LaggedSource` (k = ``rollout.staleness.max`` > 0, ``overlap`` false): the weights of version
  max(0, t-1-k), kept in this process (:mod:`.policy_versions`). Slower than synchronous (nothing
  overlaps), but the batch of step t is what any sampler holding version t-1-k draws.
- :class:`~.overlap.OverlappedSource` (``overlap`` true): a sampler process beside the trainer. At a
  fixed k with strategy ``wait`` it samples step t with exactly version t-1-k, so it equals
  :class:`LaggedSource` to the bit (tests/train/test_overlap.py): rollouts are keyed by (seed, step, round, prompt,
  sample) (:mod:`rlvr_cli.keyed_random`), so a batch is a function of its step and its weights alone,
  whenever and wherever it is drawn.

The seam as agreed with the overlap branch; one refinement: :func:`rollout_source` also takes
``saved``, what :meth:`RolloutSource.state` returned into the checkpoint being resumed from
(``trainer_state["rollout_source"]``), so a resumed run samples its next batches with the versions the
uninterrupted run would have used.
"""

from __future__ import annotations

from typing import Protocol

from rlvr_cli.errors import UserError
from rlvr_cli.train.rollouts.overlap import OverlappedSource
from rlvr_cli.train.rollouts.policy_versions import trainable_tensors, weights_swapped
from rlvr_cli.train.rollouts.collect import Rollouts, collect_rollouts
from rlvr_cli.train.rollouts.lag import sampling_version


class RolloutSource(Protocol):
    def rollouts(self, step: int) -> Rollouts:
        """The rollouts step ``step`` trains on."""

    def policy_updated(self, step: int) -> None:
        """Called after step ``step``'s updates: the policy is now version ``step``."""

    def state(self) -> dict:
        """What a checkpoint taken now must hold for a resumed run to sample exactly as this one would."""

    def close(self) -> None:
        """Release what the source holds (processes, copies of weights); called once, however the run ends."""


class SyncSource:
    """Sample each step with the current weights: the synchronous trainer."""

    def __init__(self, session, task, scorer):
        self.session, self.task, self.scorer = session, task, scorer

    def rollouts(self, step: int) -> Rollouts:
        groups, stats = collect_rollouts(self.session, self.task, self.scorer, step)
        return Rollouts(groups, stats, step - 1)

    def policy_updated(self, step: int) -> None:
        pass

    def state(self) -> dict:
        return {}

    def close(self) -> None:
        pass


class LaggedSource:
    """Sample step t with the weights of version max(0, t-1-k), kept in this process (fixed staleness k).

    Holds versions max(0, t-1-k) .. t-1 between steps (at most k+1 copies of the trainable tensors);
    :meth:`state` is the k of them a checkpoint does not already hold (its own weights are the newest).
    """

    def __init__(self, session, task, scorer, k: int, saved: dict | None = None):
        if k < 1:
            raise ValueError(f"LaggedSource needs a lag k >= 1, got {k}")
        self.session, self.task, self.scorer, self.k = session, task, scorer, k
        self.versions = resumed_versions(session, k, saved)
        self.newest = session.start_step

    def rollouts(self, step: int) -> Rollouts:
        version = sampling_version(step, self.k)
        if version == self.newest:  # the current weights (the first steps of a run, before k updates)
            groups, stats = collect_rollouts(self.session, self.task, self.scorer, step)
        else:
            with weights_swapped(self.session.model, self.versions[version]):
                groups, stats = collect_rollouts(self.session, self.task, self.scorer, step)
        for v in [v for v in self.versions if v < version]:  # no later step samples with an older version
            del self.versions[v]
        return Rollouts(groups, stats, version)

    def policy_updated(self, step: int) -> None:
        self.versions[step] = trainable_tensors(self.session.model)
        self.newest = step

    def state(self) -> dict:
        return {"versions": {v: t for v, t in self.versions.items() if v != self.newest}}

    def close(self) -> None:
        self.versions.clear()


def resumed_versions(session, k: int, saved: dict | None) -> dict[int, dict]:
    """The policy versions the steps after ``session.start_step`` may sample with at a lag of at most k: those
    the checkpoint resumed from saved (``saved``: a source's :meth:`~RolloutSource.state`) and the current
    weights. UserError when the checkpoint lacks one of them."""
    start = session.start_step
    versions: dict[int, dict] = {int(v): t for v, t in (saved or {}).get("versions", {}).items()}
    missing = [v for v in range(sampling_version(start + 1, k), start) if v not in versions]
    if missing:
        raise UserError(
            f"{session.run.root}: the checkpoint of step {start} does not hold the weights of policy versions "
            f"{missing}, which rollout.staleness.max {k} samples the next steps with (a checkpoint written "
            "without staleness?); resume from a run trained with this recipe"
        )
    versions[start] = trainable_tensors(session.model)
    return versions


def rollout_source(recipe, session, task, scorer, saved: dict | None = None) -> RolloutSource:
    """The source ``rollout.staleness`` asks for; ``saved`` is the ``state()`` checkpointed by the run resumed."""
    st = recipe.rollout.staleness
    if st.overlap:  # the sampler process builds its own task and scorer; this process's score evaluations
        return OverlappedSource(session, resumed_versions(session, st.max, saved))
    if st.max == 0:
        return SyncSource(session, task, scorer)
    return LaggedSource(session, task, scorer, st.max, saved)
