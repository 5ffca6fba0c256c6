"""The recipe read as formulas: which :mod:`rlvr_cli.algo` functions a step calls, on plain tensors.

Every function here takes the recipe and tensors (no model, no session), so each phase of the step's
objective is testable on hand-made tensors: the shaped reward (:func:`shape_rewards`, from
:mod:`rlvr_cli.rewards.shaping`: the doctor shapes with it too), the advantages
(:func:`step_advantages`), the entropy remedies' tokens (:func:`token_selection`), the per-token loss
(:func:`token_loss`, its objective :func:`policy_surrogate`), the adaptive entropy coefficient
(:class:`EntropyControl`) and the rows that loss leaves at exactly zero (:func:`zero_loss_rows`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from rlvr_cli.algo.advantages import group_advantages
from rlvr_cli.algo.entropy_control import applied_entropy_coef, next_entropy_coef
from rlvr_cli.algo.entropy_remedies import (
    clip_cov_selection,
    detach_selected,
    high_entropy_threshold,
    kl_cov_penalty,
    kl_cov_selection,
    token_covariance,
    top_entropy_mask,
)
from rlvr_cli.algo.aggregation import aggregate
from rlvr_cli.algo.env_tokens import EnvTokenMasks, echo_loss, env_token_masks, void_turn_rows
from rlvr_cli.algo.kl import KL_ESTIMATORS
from rlvr_cli.algo.overlong import soft_overlong_penalty
from rlvr_cli.algo.passk import pass_at_k
from rlvr_cli.algo.passk_objectives import passk_analytic_advantages, pkpo_rewards
from rlvr_cli.algo.reward_combination import decoupled_group_advantages
from rlvr_cli.algo.off_policy import behaviour_kl
from rlvr_cli.algo.policy_loss import SurrogateOut
from rlvr_cli.recipe.schema import Recipe
from rlvr_cli.rewards.shaping import shape_rewards  # noqa: F401 - the step's first phase, named here with the rest


def decoupled_terms(recipe: Recipe, term_values, response_lengths) -> tuple[torch.Tensor, list[float]] | None:
    """GDPO's reward terms: the (B, K') values each normalised on its own and their weights; None unless
    ``reward.combination`` is `decoupled`. The K recipe terms (before weighting), plus DAPO's soft overlong
    penalty as one more term of weight 1 when it is on (as in TRL, where it is a reward function)."""
    if recipe.reward.combination != "decoupled":
        return None
    weights = [t.weight for t in recipe.reward.terms]
    sp = recipe.overlong.soft_punish
    if sp is None:
        return term_values, weights
    penalty = soft_overlong_penalty(response_lengths, recipe.rollout.max_new_tokens, sp.buffer, sp.factor)
    return torch.cat([term_values, penalty.unsqueeze(1).to(term_values.dtype)], dim=1), [*weights, 1.0]


def step_advantages(recipe: Recipe, shaped: torch.Tensor, terms: tuple[torch.Tensor, list[float]] | None = None
                    ) -> tuple[torch.Tensor, torch.Tensor, float | None]:
    """Advantages (P, G) from the shaped rewards (P, G); also the rewards whose spread is logged (the
    transformed ones under pass@k) and the batch's mean pass@k estimate (None without pass@k).

    pass@k (binary rewards, guaranteed by the schema): PKPO transforms the rewards, then the recipe's
    baseline and scale apply; the analytic pass@k advantage replaces both. GDPO (``terms`` from
    :func:`decoupled_terms`, rows group-major) replaces the advantage of the sum.
    """
    a, pk = recipe.advantage, recipe.advantage.passk
    if terms is not None:
        values, weights = terms
        per_group = values.reshape(shaped.shape[0], shaped.shape[1], -1)
        return decoupled_group_advantages(per_group, weights, a.eps).to(shaped.device), shaped, None
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


def policy_surrogate(recipe: Recipe, logp, old_logp, adv, mask) -> SurrogateOut:
    """Per-token policy loss of ``loss.objective``, its registry entry's formula
    (:mod:`rlvr_cli.recipe.objectives`): ``logp`` (B, T) with gradient, the behaviour ``old_logp`` (B, T),
    ``adv`` (B, 1), ``mask`` (B, T)."""
    return recipe.loss.objective.surrogate(recipe.loss, logp, old_logp, adv, mask)


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
        if cp.type == "clip_cov":  # as verl: tokens the objective's clip already cuts are not candidates
            sur = policy_surrogate(recipe, logp, old_logp, adv, mask)
            cut = sur.clip_low | sur.clip_high
            exclude = cut if type(lo.objective).zero_gradient else torch.zeros_like(cut)
            sel.cut = clip_cov_selection(sel.cov, mask, cp.clip_ratio, cp.lb, cp.ub, generator, exclude=exclude)
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
    """(B, T) per-token weights of the policy loss (importance weights, M2PO's mask); None: no correction."""
    behaviour_logp: torch.Tensor | None = None
    """(B, T) the behaviour policy's log-probs when off_policy.behaviour_kl is on (rlvr_cli/train/off_policy.py)."""
    env: EnvTokenMasks | None = None
    """Multi-turn: each term's tokens (rlvr_cli/algo/env_tokens.py; ``loss_mask`` is then its policy mask P); None single-turn."""


def token_loss(recipe: Recipe, logp, entropy, rows: LossInputs, sel: TokenSelection | None = None,
               entropy_coef: float | None = None) -> tuple[torch.Tensor, SurrogateOut]:
    """Per-token loss (B, T): w_t * remedy(objective) + beta * KL_t (KL in the loss) + tau * KL_t(pi || pi_behaviour)
    (off_policy.behaviour_kl) - alpha * H_t.

    ``logp`` and ``entropy`` (B, T) are the current policy's; ``sel`` the remedies' tokens of these
    rows (None: no remedy); the objective is ``loss.objective`` (:func:`policy_surrogate`); alpha is
    ``entropy_coef`` (the adaptive coefficient of this update), else ``loss.entropy_coef``.
    """
    lo, kl = recipe.loss, recipe.kl
    old_logp, ref_logp, adv, loss_mask, is_weights = rows.old_logp, rows.ref_logp, rows.adv, rows.loss_mask, rows.is_weights
    sur = policy_surrogate(recipe, logp, old_logp, adv, loss_mask)
    loss = sur.loss
    if sel is not None and sel.keep is not None:  # top-entropy: numerator only, the normaliser keeps every token
        loss = loss * sel.keep
    if sel is not None and sel.cut is not None:
        loss = detach_selected(loss, sel.cut)
    if sel is not None and sel.penalised is not None:
        loss = loss + kl_cov_penalty((logp - old_logp) * loss_mask, sel.penalised, lo.cov_penalty.coef)
    if is_weights is not None:
        loss = loss * is_weights
    on = (lambda t, m: t) if rows.env is None else (lambda t, m: t * m)  # noqa: E731 - each term on its tokens
    policy = None if rows.env is None else rows.env.policy
    loss = on(loss, policy)
    if ref_logp is not None and kl.in_loss:
        loss = loss + on(kl.beta * KL_ESTIMATORS[kl.estimator](logp, ref_logp), None if rows.env is None else rows.env.kl)
    # --- off_policy.behaviour_kl (issue 41): + tau * KL_t(pi_theta || pi_behaviour), prime-rl's kl_tau
    if rows.behaviour_logp is not None:
        bk = recipe.off_policy.behaviour_kl
        loss = loss + on(bk.coef * behaviour_kl(logp, rows.behaviour_logp, bk.estimator), policy)
    alpha = lo.entropy_coef if entropy_coef is None else entropy_coef
    if alpha:
        loss = loss - on(alpha * entropy, policy)
    return loss, sur


def environment_masks(recipe: Recipe, loss_mask, model_tokens, void_turns) -> EnvTokenMasks | None:
    """Multi-turn (``environment:``): each loss term's tokens (:func:`rlvr_cli.algo.env_tokens.env_token_masks`)
    from the ``loss_mask`` (B, T) after truncation, the ``model_tokens`` (B, T) and each row's
    ``void_turns`` (B,), whose rows SimpleTIR's filter leaves out; None for a single-turn batch."""
    env = recipe.environment
    if env is None or model_tokens is None:
        return None
    if env.void_turn_filter:
        loss_mask = loss_mask * (~void_turn_rows(void_turns)).to(loss_mask.dtype).unsqueeze(1)
    return env_token_masks(loss_mask, model_tokens, env.env_tokens, env.kl_on_env_tokens, env.divisor_counts_env_tokens)


def aggregate_loss(recipe: Recipe, tok_loss, logp, rows: LossInputs, z: float, echo_tokens: float) -> torch.Tensor:
    """The micro-batch's share of the minibatch loss: the token loss aggregated (loss.aggregation, the
    minibatch's normaliser ``z``), under ``environment:`` over each term's tokens with the divisor's
    lengths, plus echo's cross-entropy over its ``echo_tokens`` (rlvr_cli/algo/env_tokens.py)."""
    lo, em = recipe.loss, rows.env
    if em is None:
        return aggregate(tok_loss, rows.loss_mask, lo.aggregation, lo.length_constant, normalizer=z)
    carry = torch.maximum(em.policy, em.kl)
    loss = aggregate(tok_loss, carry, lo.aggregation, lo.length_constant, normalizer=z, divisor_mask=em.divisor)
    if em.echo is not None:
        loss = loss + echo_loss(logp, em.echo, recipe.environment.echo_weight, echo_tokens)
    return loss


@dataclass
class EntropyControl:
    """``loss.entropy_control``'s state between optimiser updates (arXiv 2505.22312; TRL
    ``use_adaptive_entropy``): c and the last update's measured mean token entropy (+inf before the
    first). Kept in the session's checkpointed state, so a resumed run continues it exactly."""

    coef: float
    last_entropy: float = math.inf

    @classmethod
    def from_state(cls, recipe: Recipe, state: dict) -> EntropyControl:
        """The saved state (``state["entropy_control"]``), else c_0 = ``loss.entropy_coef``."""
        saved = state.get("entropy_control")
        return cls(**saved) if saved else cls(recipe.loss.entropy_coef)

    def save(self, state: dict) -> None:
        state["entropy_control"] = {"coef": self.coef, "last_entropy": self.last_entropy}

    def alpha(self, recipe: Recipe) -> float:
        """The coefficient of the next update's entropy bonus."""
        return applied_entropy_coef(self.coef, self.last_entropy, recipe.loss.entropy_control.target)

    def advance(self, recipe: Recipe, entropy: float) -> None:
        """After an update whose loss tokens had mean entropy ``entropy``: c_{k+1}, and e_k kept."""
        ec = recipe.loss.entropy_control
        self.coef = next_entropy_coef(self.coef, entropy, ec.target, ec.delta, ec.coef_min, ec.coef_max)
        self.last_entropy = entropy


def zero_loss_rows(recipe: Recipe, adv: torch.Tensor, ref_logp, loss_mask: torch.Tensor) -> torch.Tensor:
    """(B,) bool: the rows whose aggregated :func:`token_loss` is 0 for every value of the weights, so
    that their backward adds exactly nothing to the gradient (the trainer forwards them without one).

    - No loss token (``loss_mask``, (B, T), all 0: e.g. truncated and masked): every term is masked.
    - Advantage exactly 0 (a group with no reward spread under a group baseline, a pass@k advantage
      with no k-subset spread), where every term of the loss carries A: the clipped surrogate
      -min(rho*0, clip(rho)*0) = 0 (every loss.objective is proportional to A), and its top-entropy
      mask, Clip-Cov's detach and the importance weights keep it 0; not with KL in the loss, an
      entropy bonus (fixed or adaptive) or KL-Cov's penalty (it can pick any token), which reach
      such a row whatever A is; nor with off_policy.behaviour_kl, the same; nor with echo's cross-entropy.
      Under ``environment:`` pass the tokens that carry any term (:attr:`EnvTokenMasks.carry`) as ``loss_mask``.
    """
    cov, env = recipe.loss.cov_penalty, recipe.environment
    terms_without_adv = ((ref_logp is not None and recipe.kl.in_loss) or recipe.loss.entropy_coef
                         or recipe.loss.entropy_control is not None or (cov is not None and cov.type == "kl_cov")
                         or recipe.off_policy.behaviour_kl is not None or (env is not None and env.env_tokens == "echo"))
    no_loss_token = loss_mask.sum(dim=1) == 0
    return no_loss_token if terms_without_adv else no_loss_token | (adv == 0)
