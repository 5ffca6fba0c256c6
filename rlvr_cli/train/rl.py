"""The GRPO-family training loop (`algorithm: rl`), top to bottom.

One step (:func:`_train_step`):
  1. rollouts: P prompts x G responses, scored (true-verifier accuracy always computed), with DAPO
     dynamic sampling when on, gathered once into a :class:`Batch`     -> :mod:`.rollout`
  2. behaviour log-probs (from the sampler when its numerics match, else recomputed) and reference
     log-probs (when KL is in the objective; when it is only tracked, every `kl.track_every` steps)
  3. reward shaping: DAPO soft overlong penalty; KL in the reward (r <- r - beta * sum_t k1_t)
                                                                        -> :func:`shape_rewards`
  4. advantages per group: baseline and scale, or a pass@k objective (PKPO's reward transform,
     the analytic pass@k advantage)                                    -> :func:`step_advantages`
  5. mu passes x minibatches optimiser updates of
        loss = aggregate( w_t * remedy( clipped surrogate (token or sequence ratio) )
                          + beta * KL_t            (placement `loss`)
                          - entropy_coef * H_t )   over response tokens, after masks
                                                                        -> :func:`token_loss`
     where remedy() is the top-entropy mask, Clip-Cov's cut or KL-Cov's penalty (their tokens chosen
     once per minibatch: :func:`token_selection`) and w_t the sampler-mismatch importance weight.
     Each minibatch's normaliser and token choices are computed once over the minibatch, so
     micro-batching (gradient accumulation) does not change the gradient. Rows whose token loss is 0
     whatever the weights (A = 0 and no term without A: :func:`zero_loss_rows`) are forwarded without a
     backward, for the statistics. A minibatch with no loss token (all truncated and masked) takes no
     optimiser step; a non-finite one is skipped.
  6. one metrics line; eval / checkpoint on their cadence (:mod:`.loop`); ProRL reference reset.

Under torchrun each rank samples, verifies and forwards a contiguous share of whole groups; the
rewards are gathered so that advantages, minibatch order, normalisers and metrics are those of one
process (the collectives live in :mod:`rlvr_cli.dist` and do nothing in one process; README
"Scaling out").

Every forward pass runs with dropout off (the model stays in eval mode; gradients still flow), so
the sampler's, the recompute's and the update's log-probs of the same tokens agree and the on-policy
ratio is 1. Departures from the papers are recipe switches, not code paths: see docs/design.md §2.
"""

from __future__ import annotations

import math
import time
from functools import partial
from dataclasses import dataclass, field
from pathlib import Path

import torch

from rlvr_cli import dist
from rlvr_cli.algo.advantages import group_advantages, zero_spread_groups
from rlvr_cli.algo.aggregation import aggregate, aggregation_normalizer
from rlvr_cli.algo.entropy_remedies import (
    clip_cov_selection,
    detach_selected,
    high_entropy_threshold,
    kl_cov_penalty,
    kl_cov_selection,
    token_covariance,
    top_entropy_mask,
)
from rlvr_cli.algo.is_correction import ISCorrection, is_correction_weights, log_ratio_stats
from rlvr_cli.algo.kl import KL_ESTIMATORS, kl_penalized_rewards
from rlvr_cli.algo.length_bias import LengthBias, length_bias
from rlvr_cli.algo.overlong import soft_overlong_penalty
from rlvr_cli.algo.passk import pass_at_k
from rlvr_cli.algo.passk_objectives import passk_analytic_advantages, pkpo_rewards
from rlvr_cli.algo.policy_loss import RATIOS, SurrogateOut, clipped_surrogate
from rlvr_cli.console import console
from rlvr_cli.metrics import step_row
from rlvr_cli.models import load_model
from rlvr_cli.recipe.schema import Recipe
from rlvr_cli.rewards import Scorer
from rlvr_cli.tasks import build_task
from rlvr_cli.train.batch import Packed, length_sorted_chunks, pack, response_logits, response_logprobs
from rlvr_cli.train.loop import apply_update, run_steps, schedule_step
from rlvr_cli.train.progress import fmt
from rlvr_cli.train.rollout import Group, RolloutStats, collect_rollouts, sample_autocast
from rlvr_cli.train.session import Session, open_session, step_generator, step_rng

SAMPLES_LOGGED = 4
"""Groups written to samples/step_N.jsonl at each evaluation step (for reading, not analysis)."""


def _mean(xs) -> float | None:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else None


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def _reference_needed(session: Session, step: int) -> bool:
    """Whether this step needs the reference's log-probs: always when KL is in the objective; when KL is
    only tracked, on step 1, every ``kl.track_every`` steps and at eval steps (`kl_*` is null otherwise)."""
    kl = session.recipe.kl
    if kl.placement != "none" and kl.beta > 0:
        return True
    return step == 1 or step % kl.track_every == 0 or session.should_eval(step)


def _uses_reference(recipe: Recipe) -> bool:
    return recipe.kl.track or (recipe.kl.placement != "none" and recipe.kl.beta > 0)


def old_logprob_source(recipe: Recipe, session: Session) -> str:
    """`sampler` when the sampling pass computes exactly what the trainer would (float32, no autocast);
    `recompute` otherwise, and whenever an importance-sampling correction needs both sets."""
    choice = recipe.rollout.old_logprobs
    if choice != "auto":
        return choice
    exact = sample_autocast(recipe, session) is None and next(session.model.parameters()).dtype == torch.float32
    return "sampler" if exact and recipe.rollout.is_correction.mode == "none" else "recompute"


# --- the batch --------------------------------------------------------------------------------------
@dataclass
class Batch:
    """One step's training batch, built once from the rollout groups: B = groups x G rows, group-major."""

    prompt_ids: list[list[int]]
    response_ids: list[list[int]]
    sampler_logprobs: list[list[float]]
    rewards: torch.Tensor
    """(B,) raw reward, before shaping."""
    truncated: torch.Tensor
    """(B,) bool: the response hit max_new_tokens (finish reason `length`)."""
    mask: torch.Tensor
    """(B, Lr) float: 1 on real response tokens."""
    group_size: int
    pad_id: int
    device: torch.device

    @classmethod
    def from_groups(cls, groups: list[Group], group_size: int, pad_id: int, device) -> Batch:
        prompt_ids = [grp.prompt_ids for grp in groups for _ in range(group_size)]
        response_ids = [resp for grp in groups for resp in grp.response_ids]
        return cls(
            prompt_ids=prompt_ids,
            response_ids=response_ids,
            sampler_logprobs=[lp for grp in groups for lp in grp.logprobs],
            rewards=torch.tensor([x for grp in groups for x in grp.rewards], dtype=torch.float32, device=device),
            truncated=torch.tensor([f == "length" for grp in groups for f in grp.finish_reasons], device=device),
            mask=pack(prompt_ids, response_ids, pad_id, device).response_mask if groups
            else torch.zeros(0, 1, device=device),  # a rank with no group of this step's batch
            group_size=group_size,
            pad_id=pad_id,
            device=device,
        )

    def __len__(self) -> int:
        return len(self.response_ids)

    @property
    def width(self) -> int:
        return self.mask.shape[1]

    @property
    def lengths(self) -> list[int]:
        """Prompt + response tokens per row (to sort micro-batches by)."""
        return [len(p) + len(r) for p, r in zip(self.prompt_ids, self.response_ids)]

    def pack(self, idx: torch.Tensor) -> Packed:
        return pack([self.prompt_ids[i] for i in idx], [self.response_ids[i] for i in idx], self.pad_id, self.device)


@torch.no_grad()
def batch_logprobs(model, batch: Batch, temperature: float, chunks: int, amp, rows=None, with_entropy: bool = False):
    """log pi(y_t) for every response of the batch (or of ``rows``), (B, Lr), in length-sorted chunks;
    with ``with_entropy`` also the per-token entropy, as a pair. Rows not computed are 0."""
    out = torch.zeros(len(batch), batch.width, device=batch.device)
    ent = torch.zeros_like(out) if with_entropy else None
    for idx in length_sorted_chunks(range(len(batch)) if rows is None else rows, batch.lengths, chunks):
        with amp:
            lp, h = response_logprobs(model, batch.pack(idx), temperature, with_entropy=with_entropy)
        out[idx.to(batch.device), : lp.shape[1]] = lp
        if with_entropy:
            ent[idx.to(batch.device), : lp.shape[1]] = h
    return (out, ent) if with_entropy else out


def _sampler_logprobs(batch: Batch) -> torch.Tensor:
    out = torch.zeros(len(batch), batch.width, device=batch.device)
    for i, lp in enumerate(batch.sampler_logprobs):
        if lp:
            out[i, : len(lp)] = torch.tensor(lp, device=batch.device)
    return out


# --- shaping and the loss -------------------------------------------------------------------------------
def shape_rewards(recipe: Recipe, batch: Batch, old_logp, ref_logp) -> torch.Tensor:
    """The reward the advantages see: raw reward + DAPO soft overlong penalty, then KL in the reward."""
    shaped = batch.rewards.clone()
    sp = recipe.overlong.soft_punish
    if sp is not None:
        lengths = torch.tensor([len(x) for x in batch.response_ids], dtype=torch.float32, device=batch.device)
        shaped = shaped + soft_overlong_penalty(lengths, recipe.rollout.max_new_tokens, sp.buffer, sp.factor)
    if ref_logp is not None and recipe.kl.placement == "reward":
        shaped = kl_penalized_rewards(shaped, old_logp, ref_logp, batch.mask, recipe.kl.beta)
    return shaped


def step_advantages(recipe: Recipe, shaped: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float | None]:
    """Advantages (P, G) from the shaped rewards (P, G); also the rewards whose spread is logged (the
    transformed ones under pass@k) and the batch's mean pass@k estimate (None without pass@k).

    pass@k (binary rewards, guaranteed by the schema): PKPO transforms the rewards, then the recipe's
    baseline and scale apply; the analytic pass@k advantage replaces both.
    """
    a, pk = recipe.advantage, recipe.advantage.passk
    if pk is None:
        return group_advantages(shaped, a.baseline, a.scale, a.eps), shaped, None
    g = shaped.shape[1]
    passk = _mean(pass_at_k(g, int(c), pk.k) for c in shaped.sum(dim=1).round().tolist())
    if pk.method == "pkpo":
        rewards = pkpo_rewards(shaped, pk.k).float()
        return group_advantages(rewards, a.baseline, a.scale, a.eps), rewards, passk
    adv = passk_analytic_advantages(shaped, pk.k)
    return adv, adv, passk  # the advantage is 0 exactly where the k-subset rewards have no spread


@dataclass
class TokenSelection:
    """One minibatch's tokens chosen by the entropy remedies, (B, T) bool over the whole batch (False
    outside the minibatch), chosen once from the current policy so micro-batching cannot change them."""

    keep: torch.Tensor | None = None
    """Top-entropy mask: the tokens whose policy loss counts."""
    cut: torch.Tensor | None = None
    """Clip-Cov: tokens whose policy-loss gradient is detached."""
    penalised: torch.Tensor | None = None
    """KL-Cov: tokens that get the |log-ratio| penalty."""
    threshold: float | None = None
    cov: torch.Tensor | None = None
    """(B, T) centred covariance of the minibatch's valid tokens (0 elsewhere)."""

    def rows(self, idx: torch.Tensor, width: int) -> TokenSelection:
        cut = lambda t: None if t is None else t[idx, :width]  # noqa: E731
        return TokenSelection(cut(self.keep), cut(self.cut), cut(self.penalised), self.threshold, cut(self.cov))


def uses_token_selection(recipe: Recipe) -> bool:
    return recipe.loss.top_entropy_quantile is not None or recipe.loss.cov_penalty is not None


def token_selection(recipe: Recipe, logp, entropy, old_logp, adv, mask, generator: torch.Generator) -> TokenSelection:
    """The top-entropy / Clip-Cov / KL-Cov tokens of the minibatch ``mask`` (B, T) selects, from the
    current policy's (no-gradient) ``logp`` and ``entropy``; ``adv`` (B, 1)."""
    lo, sel = recipe.loss, TokenSelection()
    if lo.top_entropy_quantile is not None:
        sel.keep = top_entropy_mask(entropy, mask, lo.top_entropy_quantile)
        sel.threshold = float(high_entropy_threshold(entropy, mask, lo.top_entropy_quantile))
    cp = lo.cov_penalty
    if cp is not None:
        sel.cov = token_covariance(logp, adv, mask)
        if cp.type == "clip_cov":  # as verl: tokens PPO's clip already cuts are not candidates
            log_ratio = RATIOS[lo.ratio](logp, old_logp, mask)
            sur = clipped_surrogate(log_ratio, adv, lo.clip.eps_low, lo.clip.eps_high, lo.clip.dual_clip)
            sel.cut = clip_cov_selection(sel.cov, mask, cp.clip_ratio, cp.lb, cp.ub, generator,
                                         exclude=sur.clipped_low | sur.clipped_high)
        else:
            sel.penalised = kl_cov_selection(sel.cov, mask, cp.kl_ratio)
    return sel


def token_loss(recipe: Recipe, logp, entropy, old_logp, ref_logp, adv, loss_mask,
               sel: TokenSelection | None = None, is_weights=None) -> tuple[torch.Tensor, SurrogateOut]:
    """Per-token loss (B, T): w_t * remedy(clipped surrogate) + beta * KL_t (placement `loss`) - entropy_coef * H_t.

    ``adv`` is (B, 1); ``ref_logp`` is None when no reference is loaded; ``sel`` the remedies' tokens
    of these rows (None: no remedy); ``is_weights`` (B, T) the sampler-mismatch weights (None: off).
    """
    lo, kl = recipe.loss, recipe.kl
    log_ratio = RATIOS[lo.ratio](logp, old_logp, loss_mask)
    sur = clipped_surrogate(log_ratio, adv, lo.clip.eps_low, lo.clip.eps_high, lo.clip.dual_clip)
    loss = sur.loss
    if sel is not None and sel.keep is not None:  # top-entropy: numerator only, the normaliser keeps every token
        loss = loss * sel.keep
    if sel is not None and sel.cut is not None:
        loss = detach_selected(loss, sel.cut)
    if sel is not None and sel.penalised is not None:
        loss = loss + kl_cov_penalty((logp - old_logp) * loss_mask, sel.penalised, lo.cov_penalty.coef)
    if is_weights is not None:
        loss = loss * is_weights
    if ref_logp is not None and kl.placement == "loss" and kl.beta > 0:
        loss = loss + kl.beta * KL_ESTIMATORS[kl.estimator](logp, ref_logp)
    if lo.entropy_coef:
        loss = loss - lo.entropy_coef * entropy
    return loss, sur


def zero_loss_rows(recipe: Recipe, adv: torch.Tensor, ref_logp, loss_mask: torch.Tensor) -> torch.Tensor:
    """(B,) bool: the rows whose aggregated :func:`token_loss` is 0 for every value of the weights, so
    that their backward adds exactly nothing to the gradient.

    - No loss token (``loss_mask``, (B, T), all 0: e.g. truncated and masked): every term is masked.
    - Advantage exactly 0 (a group with no reward spread under a group baseline, a pass@k advantage
      with no k-subset spread), where every term of the loss carries A: the clipped surrogate
      -min(rho*0, clip(rho)*0) = 0, and its top-entropy mask, Clip-Cov's detach and the importance
      weights keep it 0; not with KL in the loss, an entropy bonus or KL-Cov's penalty (it can pick
      any token), which reach such a row whatever A is.
    """
    kl_in_loss = ref_logp is not None and recipe.kl.placement == "loss" and recipe.kl.beta > 0
    cov = recipe.loss.cov_penalty
    other_terms = kl_in_loss or recipe.loss.entropy_coef or (cov is not None and cov.type == "kl_cov")
    no_tokens = loss_mask.sum(dim=1) == 0
    return no_tokens if other_terms else no_tokens | (adv == 0)


@dataclass
class UpdateStats:
    """Clip, ratio and entropy statistics of one step's updates, kept apart from the loss."""

    tokens: float = 0.0
    clip_low: float = 0.0
    clip_high: float = 0.0
    dual: float = 0.0
    ratio_max: float = -math.inf
    ratio_min: float = math.inf
    ent_sum: float = 0.0
    ent_tokens: float = 0.0
    losses: list[float] = field(default_factory=list)
    norms: list[float] = field(default_factory=list)
    updates: int = 0
    skipped: int = 0
    empty: int = 0
    sel_tokens: float = 0.0
    kept: float | None = None
    thresholds: list[float] = field(default_factory=list)
    cov_selected: float | None = None
    cov_sum: float = 0.0
    cov_selected_sum: float = 0.0

    def add_tokens(self, sur: SurrogateOut, loss_mask: torch.Tensor) -> None:
        """Clip and ratio statistics over the tokens that count in the loss."""
        self.tokens += float(loss_mask.sum())
        self.clip_low += float((sur.clipped_low * loss_mask).sum())
        self.clip_high += float((sur.clipped_high * loss_mask).sum())
        self.dual += float((sur.dual_clipped * loss_mask).sum())
        if bool((loss_mask > 0).any()):
            sel = sur.ratio[loss_mask > 0]
            self.ratio_max = max(self.ratio_max, float(sel.max()))
            self.ratio_min = min(self.ratio_min, float(sel.min()))

    def add_entropy(self, entropy: torch.Tensor, mask: torch.Tensor) -> None:
        self.ent_sum += float((entropy.detach() * mask).sum())
        self.ent_tokens += float(mask.sum())

    def add_selection(self, sel: TokenSelection, tokens: float) -> None:
        """The remedies' token counts of one minibatch with ``tokens`` loss tokens (``sel`` is 0 elsewhere)."""
        self.sel_tokens += tokens
        if sel.keep is not None:
            self.kept = (self.kept or 0.0) + float(sel.keep.sum())
            self.thresholds.append(sel.threshold)
        if sel.cov is not None:
            picked = sel.cut if sel.cut is not None else sel.penalised
            self.cov_selected = (self.cov_selected or 0.0) + float(picked.sum())
            self.cov_sum += float(sel.cov.sum())
            self.cov_selected_sum += float(sel.cov[picked].sum())

    def reduce(self) -> None:
        """Sum the token counts and max/min the ratios over ranks (the losses and norms are global already)."""
        (self.tokens, self.clip_low, self.clip_high, self.dual, self.ent_sum, self.ent_tokens) = dist.all_reduce(
            [self.tokens, self.clip_low, self.clip_high, self.dual, self.ent_sum, self.ent_tokens], "sum")
        self.ratio_max, neg_min = dist.all_reduce([self.ratio_max, -self.ratio_min], "max")
        self.ratio_min = -neg_min

    def metrics(self) -> dict:
        return {
            "entropy": self.ent_sum / self.ent_tokens if self.ent_tokens else None,
            "clip_low_frac": self.clip_low / self.tokens if self.tokens else 0.0,
            "clip_high_frac": self.clip_high / self.tokens if self.tokens else 0.0,
            "dual_clip_frac": self.dual / self.tokens if self.tokens else 0.0,
            "ratio_max": self.ratio_max if self.ratio_max > -math.inf else None,
            "ratio_min": self.ratio_min if self.ratio_min < math.inf else None,
            "loss": _mean(self.losses),
            "grad_norm": max(self.norms) if self.norms else None,
            "updates": self.updates,
            "updates_skipped": self.skipped,
            "updates_empty": self.empty,
            "top_entropy_kept_frac": _ratio(self.kept, self.sel_tokens),
            "top_entropy_threshold": _mean(t for t in self.thresholds if math.isfinite(t)),
            "cov_selected_frac": _ratio(self.cov_selected, self.sel_tokens),
            "cov_mean": _ratio(self.cov_sum if self.cov_selected is not None else None, self.sel_tokens),
            "cov_selected_mean": _ratio(self.cov_selected_sum if self.cov_selected else None, self.cov_selected),
        }


# --- the run --------------------------------------------------------------------------------------------
def train_rl(recipe: Recipe, out: str | Path, resume: bool = False) -> Path:
    """Run an RL recipe into ``out`` and return the run directory."""
    o = recipe.optim
    session, trainer_state = open_session(recipe, out, resume, updates_per_step=o.mu * o.minibatches)
    session.train_model.eval()  # dropout off in every forward (sampling, log-probs, the update); gradients still flow
    session.model.eval()
    task = build_task(recipe.task)
    scorer = Scorer(recipe.reward, task, seed=recipe.seed)
    reference = None
    if _uses_reference(recipe):
        reference, _, _ = load_model(recipe.model.reference or recipe.model.name, session.device, recipe.model.dtype)
        if trainer_state and "reference_state" in trainer_state:
            reference.load_state_dict(trainer_state["reference_state"])
        reference.requires_grad_(False)
    source = old_logprob_source(recipe, session)
    session.run.write_status("running", old_logprobs=source, reference_loaded=reference is not None)
    for note in recipe.notes() if dist.is_main() else []:
        console.print(f"note: {note}", style="dim", highlight=False)
    last: dict = {}

    def step(s: int) -> dict:
        row, last["groups"], last["advantages"] = _train_step(session, task, scorer, reference, source, s)
        return row

    def reset_reference(s: int) -> None:  # ProRL: pi_ref <- pi and fresh optimiser moments every N steps
        every = recipe.kl.ref_reset_every
        if reference is not None and every and s % every == 0 and s < recipe.steps:
            reference.load_state_dict(dist.full_state_dict(session.model, rank0_only=False))
            session.reset_optimizer()
            session.state["ref_reset_step"] = s

    if session.start_step and session.state.get("ref_reset_step") != session.start_step:
        # resumed on a reset step whose reset the checkpoint does not hold: the run's old last step (a run
        # does not reset on its final step) or a run without resets continued with them (session._continuation)
        reset_reference(session.start_step)

    def checkpoint_extra() -> dict:
        if reference is not None and "ref_reset_step" in session.state:
            return {"reference_state": reference.state_dict()}
        return {}

    return run_steps(
        session, task, scorer, recipe.name or "rl", step,
        status=lambda row: (
            f"reward {fmt(row['reward_mean'])} acc {fmt(row['accuracy'])} kl {fmt(row['kl_mean'], '.2e')} "
            f"H {fmt(row['entropy'])} len {fmt(row['len_mean'], '.1f')}"
        ),
        after_eval=lambda s: session.run.write_samples(s, _sample_rows(last["groups"], last["advantages"])),
        after_step=reset_reference,
        checkpoint_extra=checkpoint_extra,
    )


def _train_step(session: Session, task, scorer, reference, source: str, step: int) -> tuple[dict, list, list[float]]:
    """One step: rollouts -> log-probs -> shaping -> advantages -> updates; returns (row, groups, advantages)."""
    r = session.recipe
    t_step = time.perf_counter()
    groups, rs = collect_rollouts(session, task, scorer, step)
    row = {"step": step, **_rollout_metrics(rs, r.rollout.group_size), "lr": session.scheduler.get_last_lr()[0]}
    if not groups:  # dynamic sampling found no informative group: the step's update slots pass unused
        row.update(_empty_step(session))
        return step_row("rl", {**row, **_timing(rs, 0.0, 0.0, t_step)}), groups, []
    # this rank's contiguous share of the kept groups (all of them in one process); rows are group-major
    g = r.rollout.group_size
    mine = dist.share(len(groups))
    batch = Batch.from_groups(groups[mine.start : mine.stop], g, session.tokenizer.pad_token_id, session.device)
    rows = range(mine.start * g, mine.stop * g)  # the global indices of this rank's rows

    # 2. behaviour and reference log-probs (no gradient)
    t0 = time.perf_counter()
    chunks = max(1, r.optim.micro_batches)
    if source == "sampler":
        old_logp = _sampler_logprobs(batch)
    else:
        with session.full_params():
            old_logp = batch_logprobs(session.model, batch, r.rollout.temperature, chunks, session.amp())
    ref_logp = None
    if reference is not None and _reference_needed(session, step):
        ref_logp = batch_logprobs(reference, batch, r.rollout.temperature, chunks, session.amp())
    isc = None  # the sampler's and the trainer's log-probs of the same tokens: their mismatch and IS weights
    if source == "recompute":  # the weights act on each rank's own tokens; the statistics are the whole batch's
        ic = r.rollout.is_correction
        sampler_logp = _sampler_logprobs(batch)
        isc = is_correction_weights(old_logp, sampler_logp, batch.mask, ic.mode, ic.cap, ic.cap_low)
        isc.stats = batch_mismatch_stats(isc, old_logp, sampler_logp, batch.mask)
    time_ref = time.perf_counter() - t0

    # 3. reward shaping and 4. advantages, over the whole step's batch (every rank computes them all)
    shaped = torch.tensor(dist.gather_concat(shape_rewards(r, batch, old_logp, ref_logp).tolist()), device=batch.device)
    adv_all, spread, train_passk = step_advantages(r, shaped.view(-1, g))
    adv_all = adv_all.flatten().to(batch.device)
    adv = adv_all[rows.start : rows.stop]
    loss_mask = batch.mask.clone()
    if r.overlong.mask_truncated:
        loss_mask[batch.truncated] = 0.0

    # 5. updates
    t0 = time.perf_counter()
    is_weights = isc.weights if isc is not None and r.rollout.is_correction.mode != "none" else None
    stats = _update(session, batch, old_logp, ref_logp, adv, loss_mask, is_weights, step, rows, len(shaped))
    time_update = time.perf_counter() - t0

    # 6. metrics
    stats.reduce()
    row.update(stats.metrics())
    row.update({
        **_kl_metrics(r, batch, old_logp, ref_logp, len(shaped)),
        "reward_shaped_mean": float(shaped.mean()),
        "adv_abs_mean": float(adv_all.abs().mean()),
        "zero_std_frac": float(zero_spread_groups(spread).float().mean()),
        "batch_groups": len(groups),
        "train_passk": train_passk,
        **_mismatch_metrics(isc),
        # the per-token gradient weight each trained response gets, by the true verifier's correctness
        # (over the whole step's batch: the loss tokens of every rank's rows, gathered in order)
        **length_bias(adv_all.cpu(), torch.tensor(dist.gather_concat(loss_mask.sum(dim=1).long().tolist())),
                      [c for grp in groups for c in grp.correct], r.loss.aggregation,
                      r.loss.length_constant).as_metrics(),
    })
    return step_row("rl", {**row, **_timing(rs, time_ref, time_update, t_step)}), groups, adv_all.tolist()


def batch_mismatch_stats(isc: ISCorrection, old_logp, sampler_logp, mask) -> dict:
    """The mismatch and IS-weight statistics of the whole step's batch: under N processes every rank's
    valid tokens are gathered (in rank order, the one-process order), so the quantiles and fractions
    are those one process computes; in one process, ``isc.stats`` as it is."""
    if dist.world()[1] == 1:
        return isc.stats
    valid = mask > 0
    d = dist.gather_concat((old_logp.detach() - sampler_logp.detach()).to(torch.float64)[valid].tolist())
    stats = log_ratio_stats(torch.tensor(d, dtype=torch.float64))
    # the float64 sums each rank computed (the weights themselves are float32 by now)
    corrected, weight, n = dist.all_reduce([float(isc.corrected.sum()), isc.weight_sum, float(valid.sum())], "sum")
    if n > 0:
        stats["is_corrected_frac"] = corrected / n
        stats["is_weight_mean"] = weight / n
    return stats


def _mismatch_metrics(isc: ISCorrection | None) -> dict:
    """Sampler/trainer mismatch and IS-weight statistics (None where the sampler's log-probs are the
    behaviour policy, so there is nothing to compare)."""
    keys = ("mismatch_abs_mean", "mismatch_abs_max", "is_ratio_p01", "is_ratio_p50", "is_ratio_p99",
            "is_corrected_frac", "is_weight_mean")
    return {k: isc.stats.get(k) if isc is not None else None for k in keys}




def _kl_metrics(recipe: Recipe, batch: Batch, old_logp, ref_logp, n_rows: int) -> dict:
    """Mean / max / per-sequence KL(pi_old || pi_ref) over the step's response tokens (summed over ranks)."""
    if ref_logp is None:
        return {"kl_mean": None, "kl_max": None, "kl_seq_mean": None}
    kl_tok = KL_ESTIMATORS[recipe.kl.estimator](old_logp, ref_logp) * batch.mask
    total, tokens, seq = dist.all_reduce([kl_tok.sum(), batch.mask.sum(), kl_tok.sum(dim=1).sum()], "sum")
    top = dist.all_reduce_max(kl_tok.max() if kl_tok.numel() else -math.inf)
    f32 = partial(torch.tensor, dtype=torch.float32)  # the divisions in float32, as one process always did them
    return {"kl_mean": float(f32(total) / f32(tokens)), "kl_max": top, "kl_seq_mean": float(f32(seq) / f32(n_rows))}


def _update(session: Session, batch: Batch, old_logp, ref_logp, adv, loss_mask, is_weights, step: int,
            rows: range, n_rows: int) -> UpdateStats:
    """mu passes over the batch in ``minibatches`` optimiser updates, each accumulated over micro-batches.

    The minibatches are drawn over the step's ``n_rows`` global row indices, as one process draws
    them; this rank forwards its ``rows`` of each, and the normaliser and the loss are summed over ranks.
    """
    o, agg = session.recipe.optim, session.recipe.loss.aggregation
    stats = UpdateStats()
    still = zero_loss_rows(session.recipe, adv, ref_logp, loss_mask)  # forwarded without a backward
    for pass_ in range(o.mu):
        order = torch.arange(n_rows)
        if o.minibatches > 1:
            order = torch.tensor(step_rng(session.recipe.seed, step, "minibatch", pass_).sample(range(n_rows), n_rows))
        for mb_i, mb_all in enumerate(order.tensor_split(o.minibatches)):
            stats.updates += 1
            mb_idx = torch.tensor([i - rows.start for i in mb_all.tolist() if i in rows], dtype=torch.long)
            mb_mask = loss_mask[mb_idx.to(batch.device)]
            z, loss_tokens = dist.all_reduce([aggregation_normalizer(mb_mask, agg), mb_mask.sum()], "sum")
            # no loss token: the gradient is exactly zero, and a step would still move the weights (momentum)
            empty = loss_tokens == 0
            sel = None
            if uses_token_selection(session.recipe) and not empty:  # one process only (preflight refuses N > 1)
                sel = _minibatch_selection(session, batch, mb_idx, old_logp, adv, loss_mask,
                                           step_generator(session.recipe.seed, step, "clip_cov", pass_ * o.minibatches + mb_i))
                stats.add_selection(sel, float(mb_mask.sum()))
            session.optimizer.zero_grad(set_to_none=True)
            total = 0.0
            micro, quiet = _micro_batches(mb_idx, still[mb_idx.to(still.device)].cpu(), batch.lengths, o.micro_batches)
            # the quiet rows' loss (0, or not finite where a backward would have seen that) and statistics
            for k in range(_micro_slots(session, len(quiet), forward_only=True)):
                if k < len(quiet):
                    total += _micro_batch(session, batch, quiet[k], old_logp, ref_logp, adv, loss_mask, z, stats,
                                          first_pass=pass_ == 0, backward=False, sel=sel, is_weights=is_weights)
                else:
                    _zero_pass(session, backward=False)
            # a rank short of micro-batches runs zero-weight passes so the collectives pair up: DDP reduces
            # on one backward per minibatch, FSDP2 gathers on every forward; and one whose rows all have a zero
            # loss still takes its step with zero gradients (AdamW's moments move the weights, as they did
            # when those rows were backpropagated)
            slots = max(_micro_slots(session, len(micro)), int(not empty))
            for k in range(slots):
                with session.sync_grads(last=k == slots - 1):
                    if k < len(micro):
                        total += _micro_batch(session, batch, micro[k], old_logp, ref_logp, adv, loss_mask, z, stats,
                                              first_pass=pass_ == 0, backward=not empty, sel=sel, is_weights=is_weights)
                    else:
                        _zero_pass(session, backward=not empty)
            total = dist.all_reduce_sum(total)
            if empty:
                stats.empty += 1
                schedule_step(session)
                continue
            gnorm, applied = apply_update(session, total, step)
            stats.skipped += not applied
            stats.losses.append(total)
            stats.norms.append(gnorm)
    return stats


def _micro_batches(mb_idx: torch.Tensor, quiet: torch.Tensor, lengths: list[int],
                   micro_batches: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """A minibatch's rows in length-sorted micro-batches: those to backpropagate, and the ``quiet`` ones
    (:func:`zero_loss_rows`) to forward only. Without quiet rows, ``micro_batches`` chunks; with them,
    each part in chunks of at most the rows one of those would hold, so no pass is larger (memory) and
    there are fewer passes."""
    if not bool(quiet.any()):
        return length_sorted_chunks(mb_idx, lengths, micro_batches), []
    per = -(-len(mb_idx) // micro_batches)
    parts = (mb_idx[~quiet], mb_idx[quiet])
    return tuple(length_sorted_chunks(rows, lengths, -(-len(rows) // per)) if len(rows) else [] for rows in parts)


def _minibatch_selection(session: Session, batch: Batch, mb_idx, old_logp, adv, loss_mask, generator) -> TokenSelection:
    """The remedies' tokens of one minibatch, from a no-gradient pass of the current policy over all of
    it (in the micro-batch chunks), so that they do not depend on how the minibatch is split."""
    r = session.recipe
    logp, ent = batch_logprobs(session.model, batch, r.rollout.temperature, r.optim.micro_batches, session.amp(),
                               rows=mb_idx, with_entropy=True)
    mask = torch.zeros_like(loss_mask)
    rows = mb_idx.to(batch.device)
    mask[rows] = loss_mask[rows]
    return token_selection(r, logp, ent, old_logp, adv.unsqueeze(1), mask, generator)


def _micro_slots(session: Session, mine: int, forward_only: bool = False) -> int:
    """Micro-batch passes this rank runs in a minibatch: its own, or as many as the busiest rank (FSDP2),
    or at least one with a backward (DDP: its backward is where gradients are averaged)."""
    if session.sharded:
        return int(dist.all_reduce_max(mine))
    return max(mine, 1) if dist.world()[1] > 1 and not forward_only else mine


def _zero_pass(session: Session, backward: bool) -> None:
    """A forward (and backward) of weight zero through the update's model, for a rank short of rows."""
    pad = session.tokenizer.pad_token_id
    with session.amp(), torch.set_grad_enabled(backward):
        logits = response_logits(session.train_model, pack([[pad]], [[pad]], pad, session.device))
    if backward:
        (logits.sum() * 0.0).backward()


def _micro_batch(session: Session, batch: Batch, idx, old_logp, ref_logp, adv, loss_mask, z, stats: UpdateStats,
                 first_pass: bool, backward: bool, sel: TokenSelection | None = None, is_weights=None) -> float:
    """Forward (and backward) one micro-batch of rows ``idx``; returns its share of the minibatch loss."""
    r = session.recipe
    mb = batch.pack(idx)
    w, didx = mb.response_width, idx.to(batch.device)
    m_loss = loss_mask[didx, :w]
    with session.amp(), torch.set_grad_enabled(backward):  # without a backward, not through the DDP wrapper
        logp, ent = response_logprobs(session.train_model if backward else session.model, mb, r.rollout.temperature,
                                      with_entropy=True)
    ref = ref_logp[didx, :w] if ref_logp is not None else None
    tok_loss, sur = token_loss(r, logp, ent, old_logp[didx, :w], ref, adv[didx].unsqueeze(1), m_loss,
                               sel=sel.rows(didx, w) if sel is not None else None,
                               is_weights=is_weights[didx, :w] if is_weights is not None else None)
    loss = aggregate(tok_loss, m_loss, r.loss.aggregation, r.loss.length_constant, normalizer=z)
    if backward:
        (loss * session.grad_scale).backward()
    stats.add_tokens(sur, m_loss)
    if first_pass:  # entropy of the policy that sampled, over every response token
        stats.add_entropy(ent, batch.mask[didx, :w])
    return float(loss.detach())


def _empty_step(session: Session) -> dict:
    """The update metrics of a step with nothing to train on; its update slots in the schedule pass."""
    stats = UpdateStats()
    o = session.recipe.optim
    for _ in range(o.mu * o.minibatches):
        stats.updates += 1
        stats.empty += 1
        schedule_step(session)
    return {**stats.metrics(), "reward_shaped_mean": None, "kl_mean": None, "kl_max": None, "kl_seq_mean": None,
            "adv_abs_mean": None, "zero_std_frac": None, "batch_groups": 0, "train_passk": None,
            **_mismatch_metrics(None), **LengthBias(None, None, None).as_metrics()}


def _rollout_metrics(rs: RolloutStats, group_size: int) -> dict:
    """Policy statistics over everything sampled this step (all dynamic-sampling rounds)."""
    sampled = rs.sampled
    correct = [c for grp in sampled for c in grp.correct]
    lengths = [len(x) for grp in sampled for x in grp.response_ids]
    outcomes: dict[str, int] = {}
    for grp in sampled:
        for oc in grp.outcomes:
            outcomes[oc] = outcomes.get(oc, 0) + 1
    n_correct = [sum(grp.correct) for grp in sampled]
    return {
        "reward_mean": _mean(x for grp in sampled for x in grp.rewards),
        "accuracy": _mean(correct),
        "len_mean": _mean(lengths),
        "len_correct": _mean(n for n, c in zip(lengths, correct) if c),
        "len_incorrect": _mean(n for n, c in zip(lengths, correct) if not c),
        "truncated_frac": _mean(f == "length" for grp in sampled for f in grp.finish_reasons),
        "groups_all_correct_frac": _mean(c == group_size for c in n_correct),
        "groups_all_wrong_frac": _mean(c == 0 for c in n_correct),
        "groups_dropped_frac": rs.groups_dropped / max(1, len(sampled)),
        "ds_rounds": rs.rounds,
        "ds_prompts": rs.prompts_sampled,
        "outcomes": outcomes,
        "gen_tokens": rs.gen_tokens,
    }


def _timing(rs: RolloutStats, time_ref: float, time_update: float, t_step: float) -> dict:
    return {
        "time_sample_s": round(rs.time_sample_s, 4),
        "time_verify_s": round(rs.time_verify_s, 4),
        "time_ref_s": round(time_ref, 4),
        "time_update_s": round(time_update, 4),
        "step_time_s": round(time.perf_counter() - t_step, 4),
        "tokens_per_s": round(rs.gen_tokens / rs.time_sample_s, 1) if rs.time_sample_s > 0 else None,
    }


def _sample_rows(groups: list[Group], advantages: list[float]) -> list[dict]:
    rows, k = [], 0
    for gi, grp in enumerate(groups):
        for j, text in enumerate(grp.texts):
            if gi < SAMPLES_LOGGED:
                rows.append(
                    {
                        "prompt_id": grp.problem.id,
                        "prompt": grp.problem.prompt,
                        "reference": grp.problem.reference,
                        "response": text,
                        "num_tokens": len(grp.response_ids[j]),
                        "finish_reason": grp.finish_reasons[j],
                        "reward": grp.rewards[j],
                        "correct": grp.correct[j],
                        "advantage": advantages[k] if k < len(advantages) else None,
                    }
                )
            k += 1
    return rows
