"""The GRPO-family training loop (`algorithm: rl`), top to bottom: the step and the update.

One step (:func:`_train_step`):
  1. rollouts: P prompts x G responses, scored (true-verifier accuracy always computed), with DAPO
     dynamic sampling when on, gathered once into a :class:`~.batch.Batch`, sampled by the current
     policy or, under ``rollout.staleness``, an older one (its lag logged)
                                                              -> :mod:`.rollouts.sources`, :mod:`.rollouts.collect`
  2. pi_old's log-probs (the sampler's when its numerics match, else recomputed: under staleness the
     proximal policy) and the reference's (when KL is in the objective; when it is only tracked, every
     `kl.track_every` steps)                                   -> :mod:`.policies`
  3. reward shaping: DAPO soft overlong penalty; KL in the reward (r <- r - beta * sum_t k1_t)
                                                              -> :func:`.objective.shape_rewards`
  4. advantages per group: baseline and scale, or a pass@k objective (PKPO's reward transform,
     the analytic pass@k advantage)                          -> :func:`.objective.step_advantages`
  5. mu passes x minibatches optimiser updates of
        loss = aggregate( w_t * remedy( objective: PPO clip (token or sequence ratio), CISPO, SAPO, GMPO, DPPO )
                          + beta * KL_t            (KL in the loss)
                          + tau * KL_t(pi || pi_b) (off_policy.behaviour_kl)
                          - alpha * H_t )          over response tokens, after masks
     (alpha: loss.entropy_coef, or the adaptive coefficient, moved after each update: .objective.EntropyControl)
                                                              -> :func:`.objective.token_loss`
     where remedy() is the top-entropy mask, Clip-Cov's cut or KL-Cov's penalty (their tokens chosen
     once per minibatch: :func:`.objective.token_selection`) and w_t the importance weight pi_old /
     pi_sampler (rollout.is_correction) times M2PO's mask (off_policy.m2po, :mod:`.off_policy`). Each
     minibatch's normaliser and token choices are computed once over the minibatch, so micro-batching
     (gradient accumulation) does not change the gradient. Zero-loss rows (token loss 0 whatever the
     weights: :func:`.objective.zero_loss_rows`) are forwarded without a backward, for the statistics.
     A minibatch with no loss token (all truncated and masked) takes no optimiser step; a non-finite
     one is skipped.
  6. one metrics line (:mod:`.step_stats`); eval / checkpoint on their cadence (:mod:`.loop`); ProRL
     reference reset.

Under torchrun each rank samples, verifies and forwards a contiguous share of whole groups; the
rewards are gathered so that advantages, minibatch order, normalisers and metrics are those of one
process (the collectives live in :mod:`rlvr_cli.dist`, the pass pairing in :mod:`.parallel`; both do
nothing in one process; docs/runs.md "Scaling out").

Every forward pass runs with dropout off (the model stays in eval mode; gradients still flow), so
the sampler's, the recompute's and the update's log-probs of the same tokens agree and the on-policy
ratio is 1. Departures from the papers are recipe switches, not code paths: see docs/design.md §2.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from rlvr_cli import dist
from rlvr_cli.console import console
from rlvr_cli.keyed_random import stream_key
from rlvr_cli.metrics import step_row
from rlvr_cli.rewards.scorer import term_metric_names
from rlvr_cli.models import load_model
from rlvr_cli.models.notes import model_notes
from rlvr_cli.recipe.schema import Recipe
from rlvr_cli.rewards import Scorer
from rlvr_cli.tasks import build_task
from rlvr_cli.train.batch import Batch
from rlvr_cli.train.loop import RunHooks, apply_update, run_steps, schedule_step
from rlvr_cli.train.objective import (
    EntropyControl, TokenSelection, aggregate_loss, decoupled_terms, environment_masks, shape_rewards,
    step_advantages, token_loss, token_selection, uses_token_selection, zero_loss_rows,
)
from rlvr_cli.train.packing import length_sorted_chunks, response_logprobs
from rlvr_cli.train.parallel import full_state_dict, micro_batch_passes
from rlvr_cli.train.progress import fmt
from rlvr_cli.train.reference import AdapterDisabled, is_lora
from rlvr_cli.train.off_policy import apply_off_policy, off_policy_metrics
from rlvr_cli.train.policies import old_logprob_source, step_logprobs
from rlvr_cli.train.session import Session, open_session
from rlvr_cli.train.rollouts.sources import RolloutSource, rollout_source
from rlvr_cli.train.step_stats import (
    UpdateStats, batch_metrics, no_groups_metrics, rollout_metrics, sample_rows, timing,
)


# --- the run --------------------------------------------------------------------------------------------
def train_rl(recipe: Recipe, out: str | Path, resume: bool = False) -> Path:
    """Run an RL recipe into ``out`` and return the run directory."""
    o = recipe.optim
    session, trainer_state = open_session(recipe, out, resume, updates_per_step=o.mu * o.minibatches)
    session.train_model.eval()  # dropout off in every forward (sampling, log-probs, the update); gradients still flow
    session.model.eval()
    task = build_task(recipe.task)
    scorer = Scorer(recipe.reward, task, seed=recipe.seed)
    reference = _load_reference(session, trainer_state)
    logp_source = old_logprob_source(recipe, session)
    try:
        rollouts = rollout_source(recipe, session, task, scorer, (trainer_state or {}).get("rollout_source"))
    except BaseException:
        scorer.close()  # run_steps closes it once the run is under way
        raise
    session.run.write_status("running", old_logprobs=logp_source, reference_loaded=reference is not None)
    for note in recipe.notes() + model_notes(recipe) if dist.is_main() else []:
        console.print(f"note: {note}", style="dim", highlight=False)
    last: dict = {}

    def step(s: int) -> dict:
        row, last["groups"], last["advantages"] = _train_step(session, rollouts, reference, logp_source, s)
        rollouts.policy_updated(s)
        return row

    def reset_reference(s: int) -> None:  # ProRL: pi_ref <- pi and fresh optimiser moments every N steps
        every = recipe.kl.ref_reset_every
        if reference is not None and every and s % every == 0 and s < recipe.steps:
            reference.load_state_dict(full_state_dict(session.model, rank0_only=False))
            session.reset_optimizer()
            session.state["ref_reset_step"] = s

    if session.start_step and session.state.get("ref_reset_step") != session.start_step:
        # resumed on a reset step whose reset the checkpoint does not hold: the run's old last step (a run
        # does not reset on its final step) or a run without resets continued with them (session._continuation)
        reset_reference(session.start_step)

    def checkpoint_extra() -> dict:
        state = rollouts.state()
        extra = {"rollout_source": state} if state else {}
        if reference is not None and "ref_reset_step" in session.state:
            extra["reference_state"] = reference.state_dict()
        return extra

    try:
        return run_steps(
            session, task, scorer, recipe.name or "rl", step,
            status=lambda row: (
                f"reward {fmt(row['reward_mean'])} acc {fmt(row['accuracy'])} kl {fmt(row['kl_mean'], '.2e')} "
                f"H {fmt(row['entropy'])} len {fmt(row['len_mean'], '.1f')}"
            ),
            hooks=RunHooks(
                after_eval=lambda s: session.run.write_samples(s, sample_rows(last["groups"], last["advantages"])),
                after_step=reset_reference,
                checkpoint_extra=checkpoint_extra,
            ),
        )
    finally:
        rollouts.close()


def _load_reference(session: Session, trainer_state: dict | None):
    """The frozen reference policy when KL is tracked or in the objective (else None), with the weights
    of the last ProRL reset when the checkpoint resumed from holds them."""
    r = session.recipe
    if not (r.kl.track or r.kl.in_loss or r.kl.in_reward):
        return None
    if is_lora(session.model):  # the base weights: the policy with its adapter off (no second copy)
        return AdapterDisabled(session.model)
    reference, _, _ = load_model(r.model.reference or r.model.name, session.device, r.model.dtype)
    if trainer_state and "reference_state" in trainer_state:
        reference.load_state_dict(trainer_state["reference_state"])
    reference.requires_grad_(False)
    return reference


def _train_step(session: Session, rollouts: RolloutSource, reference, source: str, step: int
                ) -> tuple[dict, list, list[float]]:
    """One step: rollouts -> log-probs -> shaping -> advantages -> updates; returns (row, groups, advantages)."""
    r = session.recipe
    t_step = time.perf_counter()
    # 1. rollouts, sampled by the policy of version step-1 (on-policy) or older (rollout.staleness)
    batch_in = rollouts.rollouts(step)
    groups, rs = batch_in.groups, batch_in.stats
    row = {"step": step, **rollout_metrics(rs, r.rollout.group_size, term_metric_names(r.reward.terms)), "lr": session.scheduler.get_last_lr()[0],
           "policy_lag": batch_in.lag(step)}
    if not groups:  # dynamic sampling kept no group: the step's update slots pass unused
        row.update({**_no_groups_step(session), **off_policy_metrics()})
        return step_row("rl", {**row, **timing(rs, 0.0, 0.0, t_step)}), groups, []
    # this rank's contiguous share of the kept groups (all of them in one process); rows are group-major
    batch = Batch.from_groups(groups, dist.share(len(groups)), r.rollout.group_size, session.tokenizer.pad_token_id,
                              session.device)

    # 2. behaviour and reference log-probs (no gradient)
    t0 = time.perf_counter()
    isc = step_logprobs(session, batch, reference, source, step)
    time_ref = time.perf_counter() - t0

    # 3. reward shaping and 4. advantages, over the whole step's batch (every rank computes them all)
    shaped = shape_rewards(r, batch.rewards, batch.response_lengths, batch.old_logp, batch.ref_logp, batch.mask,
                           batch.model_tokens, batch.calls)
    batch.shaped = torch.tensor(dist.gather_concat(shaped.tolist()), device=batch.device)
    terms = decoupled_terms(r, batch.term_values, batch.response_lengths)  # GDPO's terms, None for a sum
    if terms is not None:
        terms = torch.tensor(dist.gather_concat(terms[0].tolist()), device=batch.device), terms[1]
    advantages, spread, train_passk = step_advantages(r, batch.shaped.view(-1, batch.group_size), terms)
    batch.advantages = advantages.flatten().to(batch.device)
    batch.adv = batch.advantages[batch.rows.start : batch.rows.stop]
    batch.loss_mask = batch.mask.clone()
    if r.overlong.mask_truncated:
        batch.loss_mask[batch.truncated] = 0.0
    batch.env_masks = environment_masks(r, batch.loss_mask, batch.model_tokens, batch.void_turns)
    if batch.env_masks is not None:  # multi-turn: the policy loss's tokens (KL, divisor, echo: their own masks)
        batch.loss_mask = batch.env_masks.policy
    carry = batch.loss_mask if batch.env_masks is None else batch.env_masks.carry
    batch.zero_loss = zero_loss_rows(r, batch.adv, batch.ref_logp, carry)
    row.update(apply_off_policy(session, batch, source))  # M2PO's mask, the behaviour KL's log-probs (off_policy)

    # 5. updates
    t0 = time.perf_counter()
    stats = _update(session, batch, step)
    time_update = time.perf_counter() - t0

    # 6. metrics
    stats.reduce()
    row.update({**stats.metrics(), **batch_metrics(r, batch, groups, spread, train_passk, isc)})
    return step_row("rl", {**row, **timing(rs, time_ref, time_update, t_step)}), groups, batch.advantages.tolist()


def _no_groups_step(session: Session) -> dict:
    """The update metrics of a step with no group to train on; its update slots in the schedule pass."""
    o = session.recipe.optim
    for _ in range(o.mu * o.minibatches):
        schedule_step(session)
    return no_groups_metrics(o.mu * o.minibatches)


# --- the update -----------------------------------------------------------------------------------------
def _update(session: Session, batch: Batch, step: int) -> UpdateStats:
    """mu passes over the batch in ``minibatches`` optimiser updates, each accumulated over micro-batches.

    The minibatches are drawn over the step's global row indices, as one process draws them; this
    rank forwards its own rows of each, and the normaliser and the loss are summed over ranks.
    """
    r, o = session.recipe, session.recipe.optim
    stats = UpdateStats()
    for pass_ in range(o.mu):
        order = torch.arange(batch.n_rows)
        if o.minibatches > 1:
            draw = stream_key(r.seed, step, "minibatch", pass_).rng()
            order = torch.tensor(draw.sample(range(batch.n_rows), batch.n_rows))
        for mb_i, step_rows in enumerate(order.tensor_split(o.minibatches)):
            stats.updates += 1
            choice = stream_key(r.seed, step, "clip_cov", pass_ * o.minibatches + mb_i)
            _minibatch_update(session, batch, batch.local_rows(step_rows), stats, step, pass_ == 0, choice)
    return stats


def _minibatch_update(session: Session, batch: Batch, mb_idx, stats: UpdateStats, step: int, first_pass: bool,
                      choice) -> None:
    """One optimiser update on a minibatch (this rank's rows ``mb_idx``), accumulated over micro-batches;
    ``choice`` keys the Clip-Cov tie-break draws."""
    r = session.recipe
    z, loss_tokens, echo_tokens = dist.all_reduce(batch.loss_counts(mb_idx, r.loss.aggregation), "sum")
    mb_mask = batch.loss_mask[mb_idx.to(batch.device)]
    # no loss token: the gradient is exactly zero, and a step would still move the weights (momentum)
    no_loss_tokens = loss_tokens == 0
    sel = None
    if uses_token_selection(r) and not no_loss_tokens:  # one process only (preflight refuses N > 1)
        sel = _minibatch_selection(session, batch, mb_idx, choice.generator())
        stats.add_selection(sel, float(mb_mask.sum()))
    ctl = EntropyControl.from_state(r, session.state) if r.loss.entropy_control is not None else None
    stats.begin_update(None if ctl is None else ctl.alpha(r))  # adaptive entropy: one alpha per update
    session.optimizer.zero_grad(set_to_none=True)
    backprop, zero_loss = _micro_batches(mb_idx, batch.zero_loss[mb_idx.to(batch.zero_loss.device)].cpu(),
                                         batch.lengths, r.optim.micro_batches)
    total = 0.0  # the zero-loss rows' loss (0, or not finite where a backward would have seen that) first
    for rows, backward in micro_batch_passes(session, backprop, zero_loss, backward=not no_loss_tokens):
        total += _micro_batch(session, batch, rows, (z, echo_tokens), sel, stats, first_pass=first_pass,
                              backward=backward)
    total = dist.all_reduce_sum(total)
    if ctl is not None:
        _advance_entropy_control(session, ctl, stats)
    if no_loss_tokens:
        stats.no_loss_tokens += 1
        schedule_step(session)
        return
    gnorm, applied = apply_update(session, total, step)
    stats.skipped += not applied
    stats.losses.append(total)
    stats.norms.append(gnorm)


def _advance_entropy_control(session: Session, ctl: EntropyControl, stats: UpdateStats) -> None:
    """c_{k+1} from the update's mean entropy over every rank's loss tokens; saved in the checkpointed state."""
    ent_sum, tokens = dist.all_reduce(stats.update_entropy, "sum")
    if tokens:
        ctl.advance(session.recipe, ent_sum / tokens)
    ctl.save(session.state)
    stats.coef_state = ctl.coef


def _micro_batches(mb_idx: torch.Tensor, zero_loss: torch.Tensor, lengths: list[int],
                   micro_batches: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """A minibatch's rows in length-sorted micro-batches: those to backpropagate, and the ``zero_loss``
    ones (:func:`.objective.zero_loss_rows`) to forward only. Without zero-loss rows, ``micro_batches``
    chunks; with them, each part in chunks of at most the rows one of those would hold, so no pass is
    larger (memory) and there are fewer passes."""
    if not bool(zero_loss.any()):
        return length_sorted_chunks(mb_idx, lengths, micro_batches), []
    per = -(-len(mb_idx) // micro_batches)
    parts = (mb_idx[~zero_loss], mb_idx[zero_loss])
    return tuple(length_sorted_chunks(rows, lengths, -(-len(rows) // per)) if len(rows) else [] for rows in parts)


def _minibatch_selection(session: Session, batch: Batch, mb_idx, generator) -> TokenSelection:
    """The remedies' tokens of one minibatch, from a no-gradient pass of the current policy over all of
    it (in the micro-batch chunks), so that they do not depend on how the minibatch is split."""
    r = session.recipe
    logp, ent = batch.logprobs(session.model, r.rollout.temperature, r.optim.micro_batches, session.amp(),
                               rows=mb_idx, with_entropy=True)
    mask = torch.zeros_like(batch.loss_mask)
    rows = mb_idx.to(batch.device)
    mask[rows] = batch.loss_mask[rows]
    return token_selection(r, logp, ent, batch.old_logp, batch.adv.unsqueeze(1), mask, generator)


def _micro_batch(session: Session, batch: Batch, idx, z: tuple[float, float], sel: TokenSelection | None,
                 stats: UpdateStats, first_pass: bool, backward: bool) -> float:
    """Forward (and backward) one micro-batch of rows ``idx``; returns its share of the minibatch loss
    (normalised by the minibatch's ``z``: its aggregation normaliser and its echo tokens)."""
    r = session.recipe
    mb = batch.pack(idx)
    w, didx = mb.response_width, idx.to(batch.device)
    rows = batch.loss_inputs(didx, w)
    with session.amp(), torch.set_grad_enabled(backward):  # without a backward, not through the DDP wrapper
        logp, ent = response_logprobs(session.train_model if backward else session.model, mb, r.rollout.temperature,
                                      with_entropy=True)
    sel_rows = sel.rows(didx, w) if sel is not None else None
    tok_loss, sur = token_loss(r, logp, ent, rows, sel=sel_rows, entropy_coef=stats.alpha)
    keep = sel_rows.keep if sel_rows is not None and sel_rows.keep is not None else 1.0
    stats.add_update_entropy(ent, rows.loss_mask * keep)  # the policy loss's tokens (after the top-entropy mask)
    loss = aggregate_loss(r, tok_loss, logp, rows, *z)
    if backward:
        (loss * session.grad_scale).backward()
    stats.add_tokens(sur, rows.loss_mask)
    if first_pass:  # entropy of the policy that sampled, over every response token
        stats.add_entropy(ent, batch.sampled_mask[didx, :w])
    return float(loss.detach())
