"""The statistics of one RL step that go into its metrics line (names and meanings: :mod:`rlvr_cli.metrics`).

Kept apart from the loss: the update only feeds :class:`UpdateStats`, and every other figure is read
from the rollouts and the batch. Under N processes each figure is that of the whole step's batch:
token counts are summed over ranks, extremes max/min-reduced, and quantiles taken over every rank's
tokens gathered in rank order (the one-process order).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from functools import partial

import torch

from rlvr_cli import dist
from rlvr_cli.algo.is_correction import ISCorrection, log_ratio_stats
from rlvr_cli.algo.kl import KL_ESTIMATORS
from rlvr_cli.algo.advantages import zero_spread_groups
from rlvr_cli.algo.length_bias import LengthBias, length_bias
from rlvr_cli.algo.policy_loss import SurrogateOut
from rlvr_cli.envs.protocol import ENVIRONMENT
from rlvr_cli.recipe.schema import Recipe
from rlvr_cli.train.batch import Batch
from rlvr_cli.train.objective import TokenSelection
from rlvr_cli.train.rollouts.collect import Group, RolloutStats

SAMPLES_LOGGED = 4
"""Groups written to samples/step_N.jsonl at each evaluation step (for reading, not analysis)."""

MISMATCH_KEYS = ("mismatch_abs_mean", "mismatch_abs_max", "is_ratio_p01", "is_ratio_p50", "is_ratio_p99",
                 "is_corrected_frac", "is_weight_mean")


def mean(xs) -> float | None:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else None


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


@dataclass
class UpdateStats:
    """Clip, ratio and entropy statistics of one step's updates, kept apart from the loss."""

    tokens: float = 0.0
    clip_low: float = 0.0
    clip_high: float = 0.0
    dual_clip: float = 0.0
    ratio_max: float = -math.inf
    ratio_min: float = math.inf
    ent_sum: float = 0.0
    ent_tokens: float = 0.0
    losses: list[float] = field(default_factory=list)
    norms: list[float] = field(default_factory=list)
    updates: int = 0
    skipped: int = 0
    no_loss_tokens: int = 0
    """Updates whose minibatch had no loss token (no optimiser step; metric `updates_empty`)."""
    sel_tokens: float = 0.0
    kept: float | None = None
    thresholds: list[float] = field(default_factory=list)
    cov_selected: float | None = None
    cov_sum: float = 0.0
    cov_selected_sum: float = 0.0
    alpha: float | None = None
    """The adaptive entropy coefficient of the current update (None: loss.entropy_coef, fixed)."""
    alphas: list[float] = field(default_factory=list)
    update_entropy: list[float] = field(default_factory=lambda: [0.0, 0.0])
    """sum_t H_t and the token count over the current update's loss tokens (this rank)."""
    coef_state: float | None = None

    def add_tokens(self, sur: SurrogateOut, loss_mask: torch.Tensor) -> None:
        """Clip and ratio statistics over the tokens that count in the loss."""
        self.tokens += float(loss_mask.sum())
        self.clip_low += float((sur.clip_low * loss_mask).sum())
        self.clip_high += float((sur.clip_high * loss_mask).sum())
        self.dual_clip += float((sur.dual_clip * loss_mask).sum())
        if bool((loss_mask > 0).any()):
            sel = sur.ratio[loss_mask > 0]
            self.ratio_max = max(self.ratio_max, float(sel.max()))
            self.ratio_min = min(self.ratio_min, float(sel.min()))

    def add_entropy(self, entropy: torch.Tensor, mask: torch.Tensor) -> None:
        self.ent_sum += float((entropy.detach() * mask).sum())
        self.ent_tokens += float(mask.sum())

    def begin_update(self, alpha: float | None) -> None:
        self.alpha, self.update_entropy = alpha, [0.0, 0.0]
        if alpha is not None:
            self.alphas.append(alpha)

    def add_update_entropy(self, entropy: torch.Tensor, loss_mask: torch.Tensor) -> None:
        """The adaptive entropy coefficient's measurement: the entropy over the policy loss's tokens."""
        if self.alpha is not None:
            self.update_entropy[0] += float((entropy.detach() * loss_mask).sum())
            self.update_entropy[1] += float(loss_mask.sum())

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
        (self.tokens, self.clip_low, self.clip_high, self.dual_clip, self.ent_sum, self.ent_tokens) = dist.all_reduce(
            [self.tokens, self.clip_low, self.clip_high, self.dual_clip, self.ent_sum, self.ent_tokens], "sum")
        self.ratio_max, neg_min = dist.all_reduce([self.ratio_max, -self.ratio_min], "max")
        self.ratio_min = -neg_min

    def metrics(self) -> dict:
        return {
            "entropy": self.ent_sum / self.ent_tokens if self.ent_tokens else None,
            "clip_low_frac": self.clip_low / self.tokens if self.tokens else 0.0,
            "clip_high_frac": self.clip_high / self.tokens if self.tokens else 0.0,
            "dual_clip_frac": self.dual_clip / self.tokens if self.tokens else 0.0,
            "ratio_max": self.ratio_max if self.ratio_max > -math.inf else None,
            "ratio_min": self.ratio_min if self.ratio_min < math.inf else None,
            "loss": mean(self.losses),
            "grad_norm": max(self.norms) if self.norms else None,
            "updates": self.updates,
            "updates_skipped": self.skipped,
            "updates_empty": self.no_loss_tokens,
            "top_entropy_kept_frac": _ratio(self.kept, self.sel_tokens),
            "top_entropy_threshold": mean(t for t in self.thresholds if math.isfinite(t)),
            "cov_selected_frac": _ratio(self.cov_selected, self.sel_tokens),
            "cov_mean": _ratio(self.cov_sum if self.cov_selected is not None else None, self.sel_tokens),
            "cov_selected_mean": _ratio(self.cov_selected_sum if self.cov_selected else None, self.cov_selected),
            "entropy_coef": mean(self.alphas),
            "entropy_coef_state": self.coef_state,
        }


def no_groups_metrics(updates: int) -> dict:
    """The update metrics of a step with no group to train on (dynamic sampling kept none): its
    ``updates`` slots all pass without a loss token."""
    stats = UpdateStats(updates=updates, no_loss_tokens=updates)
    return {**stats.metrics(), "reward_shaped_mean": None, "kl_mean": None, "kl_max": None, "kl_seq_mean": None,
            "adv_abs_mean": None, "zero_std_frac": None, "batch_groups": 0, "train_passk": None,
            **mismatch_metrics(None), **LengthBias(None, None, None).as_metrics()}


def batch_metrics(recipe: Recipe, batch: Batch, groups: list[Group], spread, train_passk, isc) -> dict:
    """The statistics of the step's trained batch: KL to the reference, shaped reward, advantages, the
    groups without spread (``spread`` (P, G): the rewards the advantages saw), the sampler mismatch and
    the per-token gradient weight each response gets by its correctness (all over the whole step's batch)."""
    kl = kl_metrics(recipe.kl.estimator, batch.old_logp, batch.ref_logp, batch.mask, batch.n_rows)
    loss_tokens = torch.tensor(dist.gather_concat(batch.loss_mask.sum(dim=1).long().tolist()))
    return {
        **kl,
        "reward_shaped_mean": float(batch.shaped.mean()),
        "adv_abs_mean": float(batch.advantages.abs().mean()),
        "zero_std_frac": float(zero_spread_groups(spread).float().mean()),
        "batch_groups": len(groups),
        "train_passk": train_passk,
        **mismatch_metrics(isc),
        **length_bias(batch.advantages.cpu(), loss_tokens, [c for grp in groups for c in grp.correct],
                      recipe.loss.aggregation, recipe.loss.length_constant).as_metrics(),
    }


def rollout_metrics(rs: RolloutStats, group_size: int, term_names: list[str] = ()) -> dict:
    """Policy statistics over everything sampled this step (all dynamic-sampling rounds); ``term_names``:
    each reward term's ``rewards/<name>/mean`` (:func:`rlvr_cli.rewards.scorer.term_metric_names`)."""
    sampled = rs.sampled
    correct = [c for grp in sampled for c in grp.correct]
    lengths = [len(x) for grp in sampled for x in grp.response_ids]
    outcomes: dict[str, int] = {}
    for grp in sampled:
        for oc in grp.outcomes:
            outcomes[oc] = outcomes.get(oc, 0) + 1
    n_correct = [sum(grp.correct) for grp in sampled]
    return {
        "reward_mean": mean(x for grp in sampled for x in grp.rewards),
        "accuracy": mean(correct),
        "len_mean": mean(lengths),
        "len_correct": mean(n for n, c in zip(lengths, correct) if c),
        "len_incorrect": mean(n for n, c in zip(lengths, correct) if not c),
        "truncated_frac": mean(f == "length" for grp in sampled for f in grp.finish_reasons),
        "groups_all_correct_frac": mean(c == group_size for c in n_correct),
        "groups_all_wrong_frac": mean(c == 0 for c in n_correct),
        "groups_dropped_frac": rs.groups_dropped / max(1, len(sampled)),
        "ds_rounds": rs.rounds,
        "ds_prompts": rs.prompts_sampled,
        "outcomes": outcomes,
        "gen_tokens": rs.gen_tokens,
        "stale_batches_dropped": rs.batches_dropped,
        **{name: mean(v[j] for grp in sampled for v in grp.term_values if j < len(v)) for j, name in enumerate(term_names)},
        **tool_metrics(sampled),
    }


TOOL_KEYS = ("tools/call_rate", "tools/failure_rate", "tools/env_token_share", "tools/turns_mean", "tools/acc_with_call",
             "tools/acc_without_call", "tools/void_turns", "tools/prefix_mismatches")


def tool_metrics(sampled: list[Group]) -> dict:
    """The multi-turn statistics of everything sampled this step (names and meanings: :mod:`rlvr_cli.metrics`);
    every value null for single-turn groups."""
    stats = [st for grp in sampled for st in grp.episode_stats]
    if not stats:
        return dict.fromkeys(TOOL_KEYS)
    correct = [c for grp in sampled for c in grp.correct]
    origins = [o for grp in sampled for org in grp.origins for o in org]
    calls = sum(st.calls for st in stats)
    return {
        "tools/call_rate": mean(st.calls for st in stats),
        "tools/failure_rate": sum(st.failures for st in stats) / calls if calls else None,
        "tools/env_token_share": mean(o == ENVIRONMENT for o in origins),
        "tools/turns_mean": mean(st.turns for st in stats),
        "tools/acc_with_call": mean(c for c, st in zip(correct, stats) if st.calls),
        "tools/acc_without_call": mean(c for c, st in zip(correct, stats) if not st.calls),
        "tools/void_turns": mean(st.void_turns for st in stats),
        "tools/prefix_mismatches": sum(m for grp in sampled for m in grp.prefix_mismatches),
    }


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


def mismatch_metrics(isc: ISCorrection | None) -> dict:
    """Sampler/trainer mismatch and IS-weight statistics (None where the sampler's log-probs are the
    behaviour policy, so there is nothing to compare)."""
    return {k: isc.stats.get(k) if isc is not None else None for k in MISMATCH_KEYS}


def kl_metrics(estimator: str, old_logp, ref_logp, mask, n_rows: int) -> dict:
    """Mean / max / per-sequence KL(pi_old || pi_ref) over the step's response tokens ``mask`` (B, T)
    selects (summed over ranks; ``n_rows`` the step's rows over all ranks)."""
    if ref_logp is None:
        return {"kl_mean": None, "kl_max": None, "kl_seq_mean": None}
    kl_tok = KL_ESTIMATORS[estimator](old_logp, ref_logp) * mask
    total, tokens, seq = dist.all_reduce([kl_tok.sum(), mask.sum(), kl_tok.sum(dim=1).sum()], "sum")
    top = dist.all_reduce_max(kl_tok.max() if kl_tok.numel() else -math.inf)
    f32 = partial(torch.tensor, dtype=torch.float32)  # the divisions in float32, as one process always did them
    return {"kl_mean": float(f32(total) / f32(tokens)), "kl_max": top, "kl_seq_mean": float(f32(seq) / f32(n_rows))}


def timing(rs: RolloutStats, time_ref: float, time_update: float, t_step: float) -> dict:
    return {
        "time_sample_s": round(rs.time_sample_s, 4),
        "time_verify_s": round(rs.time_verify_s, 4),
        "time_ref_s": round(time_ref, 4),
        "time_update_s": round(time_update, 4),
        "step_time_s": round(time.perf_counter() - t_step, 4),
        "tokens_per_s": round(rs.gen_tokens / rs.time_sample_s, 1) if rs.time_sample_s > 0 else None,
        **{k: None if v is None else round(v, 4) for k, v in (
            ("time_wait_s", rs.time_wait_s), ("time_handover_s", rs.time_handover_s),
            ("time_sampler_idle_s", rs.time_sampler_idle_s))},
    }


def sample_rows(groups: list[Group], advantages: list[float]) -> list[dict]:
    """The first :data:`SAMPLES_LOGGED` groups' responses with their reward and advantage (samples/step_N.jsonl)."""
    records, k = [], 0
    for gi, grp in enumerate(groups):
        for j, text in enumerate(grp.texts):
            if gi < SAMPLES_LOGGED:
                records.append({
                    "prompt_id": grp.problem.id,
                    "prompt": grp.problem.prompt,
                    "reference": grp.problem.reference,
                    "response": text,
                    "num_tokens": len(grp.response_ids[j]),
                    "finish_reason": grp.finish_reasons[j],
                    "reward": grp.rewards[j],
                    "correct": grp.correct[j],
                    "advantage": advantages[k] if k < len(advantages) else None,
                    **({"tool_calls": grp.episode_stats[j].calls, "tool_notes": grp.episode_stats[j].notes}
                       if grp.episode_stats else {}),  # multi-turn: what the environment saw
                })
            k += 1
    return records
