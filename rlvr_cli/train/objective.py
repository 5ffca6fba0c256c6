"""The recipe read as formulas: which :mod:`rlvr_cli.algo` functions a step calls, on plain tensors.

Every function here takes the recipe and tensors (no model, no session), so each phase of the step's
objective is testable on hand-made tensors: the shaped reward (:func:`shape_rewards`), the advantages
(:func:`step_advantages`), the entropy remedies' tokens (:func:`token_selection`), the per-token loss
(:func:`token_loss`) and the rows that loss leaves at exactly zero (:func:`zero_loss_rows`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rlvr_cli.algo.advantages import group_advantages
from rlvr_cli.algo.entropy_remedies import (
    clip_cov_selection,
    detach_selected,
    high_entropy_threshold,
    kl_cov_penalty,
    kl_cov_selection,
    token_covariance,
    top_entropy_mask,
)
from rlvr_cli.algo.kl import KL_ESTIMATORS, kl_penalized_rewards
from rlvr_cli.algo.length_control import length_controlled_rewards
from rlvr_cli.algo.overlong import soft_overlong_penalty
from rlvr_cli.algo.passk import pass_at_k
from rlvr_cli.algo.passk_objectives import passk_analytic_advantages, pkpo_rewards
from rlvr_cli.algo.policy_loss import RATIOS, SurrogateOut, clipped_surrogate
from rlvr_cli.recipe.schema import Recipe


def shape_rewards(recipe: Recipe, rewards, response_lengths, old_logp, ref_logp, mask) -> torch.Tensor:
    """The reward the advantages see: raw ``rewards`` (B,) + length controls + DAPO soft overlong penalty on the
    ``response_lengths`` (B,), then KL in the reward (r <- r - beta * sum_t k1_t) when the reference's
    log-probs ``ref_logp`` (B, T) were computed."""
    shaped = rewards.clone()
    if (lc := recipe.reward.length_control) is not None:  # first, on group-major rows; c_i = r_i > 0 (schema)
        r, n = rewards.view(-1, recipe.rollout.group_size), response_lengths.view(-1, recipe.rollout.group_size)
        shaped = length_controlled_rewards(r, n, r > 0, *lc.weights()).flatten()
    sp = recipe.overlong.soft_punish
    if sp is not None:
        shaped = shaped + soft_overlong_penalty(response_lengths, recipe.rollout.max_new_tokens, sp.buffer, sp.factor)
    if ref_logp is not None and recipe.kl.in_reward:
        shaped = kl_penalized_rewards(shaped, old_logp, ref_logp, mask, recipe.kl.beta)
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
    counts = shaped.sum(dim=1).round().tolist()
    passk = sum(pass_at_k(g, int(c), pk.k) for c in counts) / len(counts) if counts else None
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


@dataclass
class LossInputs:
    """The fixed (no-gradient) tensors of the rows a token loss is computed on."""

    old_logp: torch.Tensor
    """(B, T) log-probs of the behaviour policy."""
    ref_logp: torch.Tensor | None
    """(B, T) log-probs of the reference; None when no reference is loaded."""
    adv: torch.Tensor
    """(B, 1) advantages."""
    loss_mask: torch.Tensor
    """(B, T) float: the tokens that count in the loss."""
    is_weights: torch.Tensor | None = None
    """(B, T) sampler-mismatch importance weights; None: no correction."""


def token_loss(recipe: Recipe, logp, entropy, rows: LossInputs,
               sel: TokenSelection | None = None) -> tuple[torch.Tensor, SurrogateOut]:
    """Per-token loss (B, T): w_t * remedy(clipped surrogate) + beta * KL_t (KL in the loss) - entropy_coef * H_t.

    ``logp`` and ``entropy`` (B, T) are the current policy's; ``sel`` the remedies' tokens of these
    rows (None: no remedy).
    """
    lo, kl = recipe.loss, recipe.kl
    old_logp, ref_logp, adv, loss_mask, is_weights = rows.old_logp, rows.ref_logp, rows.adv, rows.loss_mask, rows.is_weights
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
    if ref_logp is not None and kl.in_loss:
        loss = loss + kl.beta * KL_ESTIMATORS[kl.estimator](logp, ref_logp)
    if lo.entropy_coef:
        loss = loss - lo.entropy_coef * entropy
    return loss, sur


def zero_loss_rows(recipe: Recipe, adv: torch.Tensor, ref_logp, loss_mask: torch.Tensor) -> torch.Tensor:
    """(B,) bool: the rows whose aggregated :func:`token_loss` is 0 for every value of the weights, so
    that their backward adds exactly nothing to the gradient (the trainer forwards them without one).

    - No loss token (``loss_mask``, (B, T), all 0: e.g. truncated and masked): every term is masked.
    - Advantage exactly 0 (a group with no reward spread under a group baseline, a pass@k advantage
      with no k-subset spread), where every term of the loss carries A: the clipped surrogate
      -min(rho*0, clip(rho)*0) = 0, and its top-entropy mask, Clip-Cov's detach and the importance
      weights keep it 0; not with KL in the loss, an entropy bonus or KL-Cov's penalty (it can pick
      any token), which reach such a row whatever A is.
    """
    cov = recipe.loss.cov_penalty
    terms_without_adv = ((ref_logp is not None and recipe.kl.in_loss) or recipe.loss.entropy_coef
                         or (cov is not None and cov.type == "kl_cov"))
    no_loss_token = loss_mask.sum(dim=1) == 0
    return no_loss_token if terms_without_adv else no_loss_token | (adv == 0)
