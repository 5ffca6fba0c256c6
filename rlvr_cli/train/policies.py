"""Phase 2 of an RL step: the log-probs of the policies the loss compares, on the step's batch (no gradient).

- the behaviour policy, the one that sampled the batch: its log-probs are the sampler's (recorded
  while sampling) or, when the sampler's numerics differ from the trainer's, recomputed;
- the reference pi_ref, when KL is in the objective or tracked this step.

PPO's ratio rho = pi_theta / pi_old is taken against ``batch.old_logp``, chosen by
``rollout.old_logprobs`` (:func:`old_logprob_source`): `sampler`, the behaviour as the sampler
computed it, or `recompute`, the trainer's forward with the weights at the start of this step's
update. On-policy (``rollout.staleness.max`` 0) both are the behaviour policy, up to numerics. With a
stale batch (k > 0) the recomputed log-probs are those of the *proximal* policy (AReaL's name: the
current weights before the update), not the behaviour's: the ratio is then clipped against the
proximal policy, and ``rollout.is_correction`` weights each token by pi_prox / pi_behaviour
(truncated or masked): AReaL's decoupled PPO (Fu et al. 2025, arXiv 2505.24298), verl's "decoupled"
three-policy mode. docs/async.md.
"""

from __future__ import annotations

import torch

from rlvr_cli.algo.is_correction import is_correction_weights
from rlvr_cli.recipe.schema import Recipe
from rlvr_cli.train.batch import Batch
from rlvr_cli.train.rollouts.collect import sample_autocast
from rlvr_cli.train.step_stats import batch_mismatch_stats


def reference_needed(session, step: int) -> bool:
    """Whether this step needs the reference's log-probs: always when KL is in the objective; when KL is
    only tracked, on step 1, every ``kl.track_every`` steps and at eval steps (`kl_*` is null otherwise)."""
    kl = session.recipe.kl
    if kl.in_loss or kl.in_reward:
        return True
    return step == 1 or step % kl.track_every == 0 or session.should_eval(step)


def old_logprob_source(recipe: Recipe, session) -> str:
    """`sampler` when the sampling pass computes exactly what the trainer would (float32, no autocast);
    `recompute` otherwise, and whenever an importance-sampling correction needs both sets; always
    `recompute` under ``environment:`` (a multi-turn trajectory's environment tokens were never sampled).

    With a stale batch (``rollout.staleness.max`` > 0) `auto` keeps the sampler's (the behaviour
    policy, which no recompute with the current weights gives) unless ``rollout.is_correction`` asks
    for the proximal policy beside it (decoupled PPO)."""
    choice = recipe.rollout.old_logprobs
    if recipe.environment is not None:  # the sampler has no log-prob of an environment token
        return "recompute"
    if choice != "auto":
        return choice
    corrected = recipe.rollout.is_correction.mode != "none"
    if recipe.rollout.staleness.max > 0:
        return "recompute" if corrected else "sampler"
    exact = sample_autocast(recipe, session) is None and next(session.model.parameters()).dtype == torch.float32
    return "sampler" if exact and not corrected else "recompute"


def step_logprobs(session, batch: Batch, reference, source: str, step: int):
    """Sets ``batch.old_logp``, ``batch.ref_logp`` (when this step needs it) and ``batch.is_weights``;
    returns the sampler/trainer comparison (None when the sampler's log-probs are pi_old itself, so
    there is nothing to compare)."""
    r = session.recipe
    chunks = max(1, r.optim.micro_batches)
    if source == "sampler":
        batch.old_logp = batch.sampler_logp()
    else:
        with session.full_params():
            batch.old_logp = batch.logprobs(session.model, r.rollout.temperature, chunks, session.amp())
    if reference is not None and reference_needed(session, step):
        batch.ref_logp = batch.logprobs(reference, r.rollout.temperature, chunks, session.amp())
    if source != "recompute":
        return None
    # the weights act on each rank's own tokens; the statistics are the whole batch's
    ic = r.rollout.is_correction
    sampler_logp = batch.sampler_logp()
    sampled = batch.sampled_mask  # the tokens the sampler drew (environment tokens have no sampler log-prob)
    isc = is_correction_weights(batch.old_logp, sampler_logp, sampled, ic.mode, ic.cap, ic.cap_low)
    isc.stats = batch_mismatch_stats(isc, batch.old_logp, sampler_logp, sampled)
    if batch.model_tokens is not None:  # an environment token's weight is 1 (no sampler to correct for)
        isc.weights = torch.where(sampled > 0, isc.weights, torch.ones_like(isc.weights))
    batch.is_weights = isc.weights if ic.mode != "none" else None
    return isc
