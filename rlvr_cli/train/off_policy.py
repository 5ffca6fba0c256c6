"""The ``off_policy`` corrections on one step's batch (formulas: rlvr_cli/algo/off_policy.py; docs/async.md).

Called once the batch has its loss mask (after phase 4), before the updates:

- ``off_policy.m2po``: M2PO's mask over the step's loss tokens, from log pi_prox - log pi_behaviour
  (pi_prox: the weights at the start of this step's update, recomputed unless ``batch.old_logp`` is
  already them; pi_behaviour: the sampler's log-probs), over every rank's tokens in the one-process
  order. It multiplies the per-token weights of the policy loss (``batch.is_weights``): a masked token
  keeps its place in the normaliser, as the importance weights' masked tokens do.
- ``off_policy.behaviour_kl``: the behaviour log-probs the loss's KL term compares against
  (``batch.behaviour_logp``, the sampler's).

AReaL's decoupled PPO needs nothing here: it is ``rollout.old_logprobs`` recompute (the ratio against
pi_prox) with ``rollout.is_correction`` (the weight pi_prox / pi_behaviour), set up in :mod:`.policies`.
"""

from __future__ import annotations

import torch

from rlvr_cli import dist
from rlvr_cli.algo.off_policy import m2po_mask
from rlvr_cli.train.batch import Batch

METRICS = ("m2po_masked_frac", "m2po_second_moment")


def off_policy_metrics(values: dict | None = None) -> dict:
    """The step row's off-policy figures (null where the correction is off or the step trained nothing)."""
    return {k: (values or {}).get(k) for k in METRICS}


def apply_off_policy(session, batch: Batch, source: str) -> dict:
    """Set up the recipe's ``off_policy`` corrections on ``batch`` (module docstring); returns their metrics."""
    op = session.recipe.off_policy
    if op.behaviour_kl is not None:
        batch.behaviour_logp = batch.sampler_logp()
    if op.m2po is None:
        return off_policy_metrics()
    r = session.recipe
    if source == "recompute":  # pi_old is already the proximal policy
        prox = batch.old_logp
    else:
        with session.full_params():
            prox = batch.logprobs(session.model, r.rollout.temperature, max(1, r.optim.micro_batches), session.amp())
    valid = batch.loss_mask > 0
    mine = (prox - batch.sampler_logp())[valid]
    counts = dist.gather_concat([mine.numel()])
    start = sum(counts[: dist.world()[0]])
    everyone = torch.tensor(dist.gather_concat(mine.tolist()), dtype=torch.float64)
    mask = m2po_mask(everyone, op.m2po.m2_threshold)  # the same mask on every rank
    keep = torch.zeros_like(batch.loss_mask)
    keep[valid] = mask.keep[start : start + mine.numel()].to(keep.dtype).to(keep.device)
    batch.is_weights = keep if batch.is_weights is None else batch.is_weights * keep
    n = mask.keep.numel()
    return off_policy_metrics({"m2po_masked_frac": float((~mask.keep).sum()) / n if n else None,
                               "m2po_second_moment": mask.second_moment if n else None})
