"""The GRPO-family training loop (`algorithm: rl`), top to bottom.

One step:
  1. rollouts: P prompts x G responses, scored (true-verifier accuracy always computed), with DAPO
     dynamic sampling when on                                            -> :mod:`.rollout`
  2. behaviour log-probs (from the sampler when its numerics match, else recomputed) and reference
     log-probs (only when KL is used or tracked)
  3. reward shaping: DAPO soft overlong penalty; KL in the reward (r <- r - beta * sum_t k1_t)
  4. advantages per group: baseline and scale                            -> algo.advantages
  5. mu passes x minibatches optimiser updates of
        loss = aggregate( clipped surrogate (token or sequence ratio)
                          + beta * KL_t            (placement `loss`)
                          - entropy_coef * H_t )   over response tokens, after masks
     where each minibatch's normaliser is computed once over the minibatch, so micro-batching
     (gradient accumulation) does not change the gradient               -> algo.*
  6. one metrics line; eval / checkpoint on their cadence; ProRL reference reset on its cadence.

Departures from the papers are recipe switches, not code paths: see DESIGN.md §2.
"""

from __future__ import annotations

import math
import time
import warnings
from pathlib import Path

import torch

from rlvr_cli.algo.advantages import group_advantages, zero_spread_groups
from rlvr_cli.algo.aggregation import aggregate, aggregation_normalizer
from rlvr_cli.algo.kl import KL_ESTIMATORS, kl_penalized_rewards
from rlvr_cli.algo.overlong import soft_overlong_penalty
from rlvr_cli.algo.policy_loss import RATIOS, clipped_surrogate
from rlvr_cli.cli.common import console
from rlvr_cli.errors import RunFailed
from rlvr_cli.models import load_model
from rlvr_cli.recipe.schema import Recipe
from rlvr_cli.rewards import Scorer
from rlvr_cli.tasks import build_task
from rlvr_cli.train.batch import length_sorted_chunks, pack, response_logprobs
from rlvr_cli.train.evalhook import eval_and_record
from rlvr_cli.train.optim import grad_norm_and_clip
from rlvr_cli.train.progress import fmt, step_progress
from rlvr_cli.train.rollout import collect_rollouts
from rlvr_cli.train.session import Session, open_session, step_rng

SAMPLES_LOGGED = 4
"""Groups written to samples/step_N.jsonl at each evaluation step (for reading, not analysis)."""


def _mean(xs) -> float | None:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else None


def _uses_reference(recipe: Recipe) -> bool:
    return recipe.kl.track or (recipe.kl.placement != "none" and recipe.kl.beta > 0)


def old_logprob_source(recipe: Recipe, session: Session) -> str:
    """`sampler` when the sampling pass computes exactly what the trainer would (float32, no autocast)."""
    choice = recipe.rollout.old_logprobs
    if choice != "auto":
        return choice
    exact = session.autocast_dtype is None and next(session.model.parameters()).dtype == torch.float32
    return "sampler" if exact else "recompute"


@torch.no_grad()
def _logprobs_in_chunks(model, prompt_ids, response_ids, pad_id, device, temperature, chunks, amp) -> torch.Tensor:
    """log pi(y_t) for all responses, padded to the batch's response width (B, Lr)."""
    width = max(1, max(len(r) for r in response_ids))
    out = torch.zeros(len(response_ids), width, device=device)
    lengths = [len(p) + len(r) for p, r in zip(prompt_ids, response_ids)]
    for idx in length_sorted_chunks(range(len(response_ids)), lengths, chunks):
        mb = pack([prompt_ids[i] for i in idx], [response_ids[i] for i in idx], pad_id, device)
        with amp:
            lp, _ = response_logprobs(model, mb, temperature)
        out[idx.to(device), : lp.shape[1]] = lp
    return out


def _pad(rows: list[list[float]], width: int, device) -> torch.Tensor:
    out = torch.zeros(len(rows), width, device=device)
    for i, r in enumerate(rows):
        if r:
            out[i, : len(r)] = torch.tensor(r, device=device)
    return out


def train_rl(recipe: Recipe, out: str | Path, resume: bool = False) -> Path:
    """Run an RL recipe into ``out`` and return the run directory."""
    o = recipe.optim
    session, trainer_state = open_session(recipe, out, resume, updates_per_step=o.mu * o.minibatches)
    run, model = session.run, session.model
    model.eval()  # dropout off in every RL forward (sampling, old and reference log-probs, the update); grads still flow
    task = build_task(recipe.task)
    scorer = Scorer(recipe.reward, task, seed=recipe.seed)
    reference = None
    if _uses_reference(recipe):
        reference, _, _ = load_model(recipe.model.reference or recipe.model.name, session.device, recipe.model.dtype)
        if trainer_state and "reference_state" in trainer_state:
            reference.load_state_dict(trainer_state["reference_state"])
        reference.requires_grad_(False)
    source = old_logprob_source(recipe, session)
    run.write_status("running", old_logprobs=source, reference_loaded=reference is not None)
    for note in recipe.notes():
        console.print(f"note: {note}", style="dim", highlight=False)
    try:
        if session.start_step == 0 and recipe.eval.at_start:
            eval_and_record(session, task, scorer, 0)
        progress = step_progress(recipe.name or "rl")
        with progress:
            bar = progress.add_task(recipe.name or "rl", total=recipe.steps, completed=session.start_step, status="")
            for step in range(session.start_step + 1, recipe.steps + 1):
                row, groups, advantages = _train_step(session, task, scorer, reference, source, step)
                run.append_metrics(row)
                if session.should_eval(step):
                    eval_and_record(session, task, scorer, step)
                    run.write_samples(step, _sample_rows(groups, advantages))
                every = recipe.kl.ref_reset_every
                if reference is not None and every and step % every == 0 and step < recipe.steps:
                    reference.load_state_dict(model.state_dict())
                    session.reset_optimizer()
                    session.state["ref_reset_step"] = step
                if session.should_checkpoint(step):
                    extra = {}
                    if "ref_reset_step" in session.state and reference is not None:
                        extra["reference_state"] = reference.state_dict()
                    session.save(step, extra)
                progress.update(
                    bar,
                    completed=step,
                    status=(
                        f"reward {fmt(row['reward_mean'])} acc {fmt(row['accuracy'])} "
                        f"kl {fmt(row['kl_mean'], '.2e')} H {fmt(row['entropy'])} len {fmt(row['len_mean'], '.1f')}"
                    ),
                )
        run.write_status("finished", error=None)
    except RunFailed as e:
        run.write_status("failed", error=str(e))
        raise
    except KeyboardInterrupt:
        run.write_status("interrupted", error="interrupted by the user; continue with --resume")
        raise
    except BaseException as e:
        run.write_status("failed", error=f"{type(e).__name__}: {e}")
        raise
    finally:
        scorer.close()
    return run.root


def _train_step(session: Session, task, scorer, reference, source: str, step: int) -> tuple[dict, list, list[float]]:
    r = session.recipe
    model, tok, dev = session.model, session.tokenizer, session.device
    t_step = time.perf_counter()
    groups, rs = collect_rollouts(session, task, scorer, step)
    g = r.rollout.group_size
    prompt_ids = [grp.prompt_ids for grp in groups for _ in range(g)]
    response_ids = [resp for grp in groups for resp in grp.response_ids]
    finish = [f for grp in groups for f in grp.finish_reasons]
    n = len(response_ids)
    row: dict = {"step": step}

    # --- 2. behaviour and reference log-probs (no gradient) -----------------------------------------
    t0 = time.perf_counter()
    full = pack(prompt_ids, response_ids, tok.pad_token_id, dev) if n else None
    mask = full.response_mask if n else None
    width = full.response_width if n else 1
    chunks = max(1, r.optim.micro_batches)
    if n and source == "sampler":
        old_logp = _pad([lp for grp in groups for lp in grp.logprobs], width, dev)
    elif n:
        old_logp = _logprobs_in_chunks(model, prompt_ids, response_ids, tok.pad_token_id, dev, r.rollout.temperature, chunks, session.amp())
    ref_logp = None
    if n and reference is not None:
        ref_logp = _logprobs_in_chunks(reference, prompt_ids, response_ids, tok.pad_token_id, dev, r.rollout.temperature, chunks, session.amp())
    time_ref = time.perf_counter() - t0

    # --- 3. reward shaping and 4. advantages -------------------------------------------------------
    lengths = torch.tensor([len(x) for x in response_ids], dtype=torch.float32, device=dev)
    rewards = torch.tensor([x for grp in groups for x in grp.rewards], dtype=torch.float32, device=dev)
    shaped = rewards.clone()
    if n and r.overlong.soft_punish is not None:
        sp = r.overlong.soft_punish
        shaped = shaped + soft_overlong_penalty(lengths, r.rollout.max_new_tokens, sp.buffer, sp.factor)
    kl_tok = None
    if n and ref_logp is not None:
        kl_tok = KL_ESTIMATORS[r.kl.estimator](old_logp, ref_logp) * mask
        if r.kl.placement == "reward":
            shaped = kl_penalized_rewards(shaped, old_logp, ref_logp, mask, r.kl.beta)
    adv = (
        group_advantages(shaped.view(-1, g), r.advantage.baseline, r.advantage.scale, r.advantage.eps).flatten().to(dev)
        if n
        else torch.zeros(0, device=dev)
    )
    loss_mask = mask.clone() if n else None
    if n and r.overlong.mask_truncated:
        truncated = torch.tensor([f == "length" for f in finish], device=dev)
        loss_mask[truncated] = 0.0

    # --- 5. updates -----------------------------------------------------------------------------------
    t0 = time.perf_counter()
    upd = _update(session, reference, prompt_ids, response_ids, old_logp if n else None, ref_logp, adv, loss_mask, mask, step)
    time_update = time.perf_counter() - t0

    # --- 6. metrics -------------------------------------------------------------------------------------
    sampled = rs.sampled
    all_correct = [c for grp in sampled for c in grp.correct]
    all_len = [len(x) for grp in sampled for x in grp.response_ids]
    all_reasons = [f for grp in sampled for f in grp.finish_reasons]
    all_rewards = [x for grp in sampled for x in grp.rewards]
    outcome_counts: dict[str, int] = {}
    for grp in sampled:
        for oc in grp.outcomes:
            outcome_counts[oc] = outcome_counts.get(oc, 0) + 1
    n_groups = len(groups)
    zero = zero_spread_groups(shaped.view(-1, g)) if n else torch.zeros(0, dtype=torch.bool)
    acc_groups = [sum(grp.correct) for grp in sampled]
    step_time = time.perf_counter() - t_step
    row.update(
        {
            "reward_mean": _mean(all_rewards),
            "reward_shaped_mean": float(shaped.mean()) if n else None,
            "accuracy": _mean(all_correct),
            "kl_mean": float((kl_tok.sum() / mask.sum())) if kl_tok is not None else None,
            "kl_max": float(kl_tok.max()) if kl_tok is not None else None,
            "kl_seq_mean": float(kl_tok.sum(dim=1).mean()) if kl_tok is not None else None,
            "entropy": upd["entropy"],
            "len_mean": _mean(all_len),
            "len_correct": _mean(length for length, c in zip(all_len, all_correct) if c),
            "len_incorrect": _mean(length for length, c in zip(all_len, all_correct) if not c),
            "truncated_frac": _mean(why == "length" for why in all_reasons),
            "clip_low_frac": upd["clip_low_frac"],
            "clip_high_frac": upd["clip_high_frac"],
            "dual_clip_frac": upd["dual_clip_frac"],
            "ratio_max": upd["ratio_max"],
            "ratio_min": upd["ratio_min"],
            "adv_abs_mean": float(adv.abs().mean()) if n else None,
            "zero_std_frac": float(zero.float().mean()) if n else None,
            "zero_std_all_correct_frac": _mean(c == g for c in acc_groups),
            "zero_std_all_wrong_frac": _mean(c == 0 for c in acc_groups),
            "filtered_frac": rs.groups_dropped / max(1, len(sampled)),
            "batch_groups": n_groups,
            "ds_rounds": rs.rounds,
            "ds_prompts": rs.prompts_sampled,
            "loss": upd["loss"],
            "grad_norm": upd["grad_norm"],
            "lr": upd["lr"],
            "updates": upd["updates"],
            "updates_skipped": upd["skipped"],
            "updates_empty": upd["empty"],
            "outcomes": outcome_counts,
            "gen_tokens": rs.gen_tokens,
            "time_sample_s": round(rs.time_sample_s, 4),
            "time_verify_s": round(rs.time_verify_s, 4),
            "time_ref_s": round(time_ref, 4),
            "time_update_s": round(time_update, 4),
            "step_time_s": round(step_time, 4),
            "tokens_per_s": round(rs.gen_tokens / rs.time_sample_s, 1) if rs.time_sample_s > 0 else None,
        }
    )
    return row, groups, adv.tolist()


def _update(session: Session, reference, prompt_ids, response_ids, old_logp, ref_logp, adv, loss_mask, mask, step) -> dict:
    """mu passes over the batch in ``minibatches`` optimiser updates, each accumulated over micro-batches."""
    r = session.recipe
    o, lo, kl = r.optim, r.loss, r.kl
    model, tok, dev = session.model, session.tokenizer, session.device
    n = len(response_ids)
    stats = {
        "entropy": None, "clip_low_frac": 0.0, "clip_high_frac": 0.0, "dual_clip_frac": 0.0,
        "ratio_max": None, "ratio_min": None, "loss": None, "grad_norm": None,
        "lr": session.scheduler.get_last_lr()[0], "updates": 0, "skipped": 0, "empty": 0,
    }
    if n == 0:
        return stats
    kl_in_loss = kl.placement == "loss" and kl.beta > 0 and ref_logp is not None
    counted = clip_low = clip_high = dual = 0.0
    ent_sum = ent_count = 0.0
    ratio_max, ratio_min = -math.inf, math.inf
    losses, norms = [], []
    skips = int(session.state.get("skipped_in_row", 0))
    for pass_ in range(o.mu):
        order = torch.arange(n)
        if o.minibatches > 1:
            perm = step_rng(r.seed, step, "minibatch", pass_).sample(range(n), n)
            order = torch.tensor(perm)
        for mb_idx in order.tensor_split(o.minibatches):
            if len(mb_idx) == 0:
                continue
            z = aggregation_normalizer(loss_mask[mb_idx.to(dev)], lo.aggregation)
            empty = not bool(loss_mask[mb_idx.to(dev)].any())
            session.optimizer.zero_grad(set_to_none=True)
            total = 0.0
            lengths = [len(prompt_ids[i]) + len(response_ids[i]) for i in range(n)]
            for idx in length_sorted_chunks(mb_idx, lengths, o.micro_batches):
                mb = pack([prompt_ids[i] for i in idx], [response_ids[i] for i in idx], tok.pad_token_id, dev)
                w = mb.response_width
                didx = idx.to(dev)
                m_loss, m_all = loss_mask[didx, :w], mask[didx, :w]
                with session.amp(), torch.set_grad_enabled(not empty):
                    logp, ent = response_logprobs(model, mb, r.rollout.temperature, with_entropy=True)
                log_ratio = RATIOS[lo.ratio](logp, old_logp[didx, :w], m_loss)
                sur = clipped_surrogate(log_ratio, adv[didx].unsqueeze(1), lo.clip.eps_low, lo.clip.eps_high, lo.clip.dual_clip)
                tok_loss = sur.loss
                if kl_in_loss:
                    tok_loss = tok_loss + kl.beta * KL_ESTIMATORS[kl.estimator](logp, ref_logp[didx, :w])
                if lo.entropy_coef:
                    tok_loss = tok_loss - lo.entropy_coef * ent
                loss = aggregate(tok_loss, m_loss, lo.aggregation, lo.length_constant, normalizer=z)
                if not empty:
                    loss.backward()
                total += float(loss.detach())
                # statistics over the tokens that count in the loss
                counted += float(m_loss.sum())
                clip_low += float((sur.clipped_low * m_loss).sum())
                clip_high += float((sur.clipped_high * m_loss).sum())
                dual += float((sur.dual_clipped * m_loss).sum())
                if bool((m_loss > 0).any()):
                    sel = sur.ratio[m_loss > 0]
                    ratio_max = max(ratio_max, float(sel.max()))
                    ratio_min = min(ratio_min, float(sel.min()))
                if pass_ == 0:  # entropy of the policy that sampled, over every response token
                    ent_sum += float((ent.detach() * m_all).sum())
                    ent_count += float(m_all.sum())
            stats["updates"] += 1
            if empty:  # no loss token (e.g. all truncated and masked): a step would move the weights by momentum alone
                stats["empty"] += 1
                with warnings.catch_warnings():
                    warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step")
                    session.scheduler.step()
                continue
            gnorm = grad_norm_and_clip(model.parameters(), o.grad_clip)
            if math.isfinite(total) and math.isfinite(gnorm):
                session.optimizer.step()
                skips = 0
            else:
                session.optimizer.zero_grad(set_to_none=True)
                stats["skipped"] += 1
                skips += 1
                session.state["skipped_in_row"] = skips
                if skips >= o.max_skipped_in_row:
                    raise RunFailed(
                        f"{skips} non-finite updates in a row (step {step}: loss {total}, grad norm {gnorm}); "
                        "lower optim.lr, tighten the clip or add KL"
                    )
            with warnings.catch_warnings():  # a skipped update still uses up its slot in the schedule
                warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step")
                session.scheduler.step()
            losses.append(total)
            norms.append(gnorm)
    session.state["skipped_in_row"] = skips
    stats.update(
        {
            "entropy": ent_sum / ent_count if ent_count else None,
            "clip_low_frac": clip_low / counted if counted else 0.0,
            "clip_high_frac": clip_high / counted if counted else 0.0,
            "dual_clip_frac": dual / counted if counted else 0.0,
            "ratio_max": ratio_max if ratio_max > -math.inf else None,
            "ratio_min": ratio_min if ratio_min < math.inf else None,
            "loss": _mean(losses),
            "grad_norm": max(norms) if norms else None,
        }
    )
    return stats


def _sample_rows(groups, advantages: list[float]) -> list[dict]:
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
