"""Length controls: reward shaping that acts on response length, applied before the group baseline.

Each function maps a group's rewards r (P, G) to shaped rewards r' (P, G); the advantage estimator of
:mod:`rlvr_cli.algo.advantages` then subtracts the group baseline as usual, so with a group-mean (or
leave-one-out) baseline the advantages stay zero-mean within every group whatever the shaping adds.
``lengths`` |o_i| are response tokens (P, G), ``correct`` c_i in {0, 1} the verifier's verdict (P, G).

1. Brevity bonus for correct responses only (prime-rl's correctness-gated "efficiency" length shaping,
   PrimeIntellect-ai/prime-rl PR #2265, ``orchestrator/advantage.py``)::

       m   = mean of |o_j| over the group's correct responses
       b_i = c_i * clamp(1 - |o_i| / m, 0, 1)              (0 for a group with no correct response)
       r'_i = r_i + w * b_i

   A correct response shorter than the group's average correct one gains up to w; wrong responses and
   longer correct ones are untouched, so the bonus cannot reward a wrong answer for being short.
   Convention that differs: prime-rl multiplies, r'_i = r_i (1 + b_i) with w = 1, which equals this
   sum when a correct response's reward is 1; the sum keeps the bonus in reward units when other terms
   (format, offsets) change r_i. prime-rl marks "correct" as r_i = max_j r_j > 0; here c_i is the
   verifier's verdict.

2. Group-relative length penalty (Kimi k1.5, arXiv:2501.12599, §2.3.3 "Length Penalty")::

       lambda_i = 1/2 - (|o_i| - min_j |o_j|) / (max_j |o_j| - min_j |o_j|)
       len_i    = lambda_i if c_i else min(0, lambda_i)
       r'_i     = r_i + w * len_i

   min and max run over the whole group (correct and wrong). The shortest response gets +1/2 if
   correct, the longest -1/2 either way; a wrong response is never rewarded for being short (its term
   is <= 0) but is penalised for being longer than the group's mid-range, so this control acts on the
   wrong responses' length, which the brevity bonus does not. Convention: a group whose lengths are all
   equal gets len_i = 0 (the paper's ratio is 0/0 there; an eps in the denominator would instead give
   every correct response +1/2, a reward rescale that GRPO's std would undo but Dr. GRPO's would not).
   Kimi uses w = 1 after a warm-up; the weight is a recipe constant here.

3. Reward offset for incorrect responses ("penalise wrong", e.g. -1 instead of 0)::

       r'_i = r_i + delta * (1 - c_i)

   With binary rewards and a group-mean baseline this is an affine map r' = (1 - delta) r + delta, so
   the offset cancels in the baseline and only the scale remains: Dr. GRPO's advantages (no std) are
   multiplied by (1 - delta), GRPO's (group std) are unchanged. It changes the update only without a
   baseline (REINFORCE) or where a response's reward is not 0/1 (format terms, partial credit).

Worked examples (the first unit tests), one group each:
- brevity bonus, w = 1: rewards [1, 1, 1, 0], lengths [10, 20, 30, 40], correct [1, 1, 1, 0]: the mean
  correct length is 20, b = [0.5, 0, 0, 0], r' = [1.5, 1, 1, 0]; advantages without std
  r' - 0.875 = [0.625, 0.125, 0.125, -0.875] (sum 0).
- length penalty, w = 1: rewards [1, 0, 1, 0], lengths [10, 20, 30, 40], correct [1, 0, 1, 0]:
  lambda = [1/2, 1/6, -1/6, -1/2], len = [1/2, 0, -1/6, -1/2], r' = [1.5, 0, 5/6, -0.5].
- offset delta = -1: rewards [1, 0, 0, 1] -> [1, -1, -1, 1]; advantages without std [+1, -1, -1, +1]
  (twice the unshaped [+0.5, -0.5, -0.5, +0.5]); with group std +-0.866 both ways.
"""

from __future__ import annotations

import torch


def _check_shapes(**tensors: torch.Tensor) -> None:
    shapes = {name: tuple(t.shape) for name, t in tensors.items()}
    first = next(iter(shapes.values()))
    if len(first) != 2 or any(s != first for s in shapes.values()):
        raise ValueError(f"expected tensors of one shape (P, G), got {shapes}")


def brevity_bonus(lengths: torch.Tensor, correct: torch.Tensor) -> torch.Tensor:
    """b_i = c_i * clamp(1 - |o_i| / mean_{j: c_j} |o_j|, 0, 1) per group (module docstring, item 1).

    Shapes (P, G) -> (P, G). 0 for wrong responses, for correct ones at or above the group's mean
    correct length, and for every response of a group with no correct response.
    """
    _check_shapes(lengths=lengths, correct=correct)
    lens = lengths.to(torch.float32)
    ok = correct.to(torch.bool)
    n_ok = ok.sum(dim=1, keepdim=True)
    mean_ok = (lens * ok).sum(dim=1, keepdim=True) / n_ok.clamp(min=1)
    bonus = (1 - lens / mean_ok.clamp(min=1e-12)).clamp(0, 1)
    return torch.where(ok & (n_ok > 0), bonus, torch.zeros_like(bonus))


def group_length_penalty(lengths: torch.Tensor, correct: torch.Tensor) -> torch.Tensor:
    """Kimi k1.5's len_i (arXiv:2501.12599 §2.3.3; module docstring, item 2). Shapes (P, G) -> (P, G).

    In [-1/2, 1/2] for correct responses and [-1/2, 0] for wrong ones; 0 for a group of equal lengths.
    """
    _check_shapes(lengths=lengths, correct=correct)
    lens = lengths.to(torch.float32)
    lo = lens.min(dim=1, keepdim=True).values
    hi = lens.max(dim=1, keepdim=True).values
    spread = hi - lo
    lam = 0.5 - (lens - lo) / spread.clamp(min=1e-12)
    lam = torch.where(spread > 0, lam, torch.zeros_like(lam))
    return torch.where(correct.to(torch.bool), lam, lam.clamp(max=0))


def offset_incorrect(rewards: torch.Tensor, correct: torch.Tensor, offset: float) -> torch.Tensor:
    """r'_i = r_i + offset * (1 - c_i): e.g. offset -1 scores a wrong answer -1 instead of 0 (item 3)."""
    _check_shapes(rewards=rewards, correct=correct)
    return rewards + offset * (1 - correct.to(rewards.dtype))


def length_controlled_rewards(
    rewards: torch.Tensor,
    lengths: torch.Tensor,
    correct: torch.Tensor,
    brevity_weight: float = 0.0,
    length_penalty_weight: float = 0.0,
    incorrect_offset: float = 0.0,
) -> torch.Tensor:
    """r' = offset_incorrect(r) + brevity_weight * b + length_penalty_weight * len. Shapes (P, G).

    The three terms add, so their order does not matter; all weights 0 returns ``rewards`` unchanged.
    Feed r' to the advantage estimator (its group baseline keeps the advantages zero-mean).
    """
    _check_shapes(rewards=rewards, lengths=lengths, correct=correct)
    out = offset_incorrect(rewards, correct, incorrect_offset) if incorrect_offset else rewards.clone()
    if brevity_weight:
        out = out + brevity_weight * brevity_bonus(lengths, correct).to(out.dtype)
    if length_penalty_weight:
        out = out + length_penalty_weight * group_length_penalty(lengths, correct).to(out.dtype)
    return out
