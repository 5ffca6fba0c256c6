"""Collect one step's rollouts: P prompts x G responses, scored, with DAPO dynamic sampling.

Dynamic sampling (Yu et al. 2025, DAPO §3.2): a group whose raw correctness is all 0 or all 1 has
zero advantage for every response and contributes nothing but noise and denominator; drop such groups
and sample further rounds of P fresh prompts until P informative groups are collected or
``max_rounds`` is reached, then train on what there is (a smaller batch), logging both. The filter
looks at raw correctness from the true verifier (or the unshaped reward), never at the shaped reward.

Every round draws its prompts from a generator seeded by (seed, step, round), and response i of the
round's prompt j samples with the keyed uniforms of (seed, step, round; j, i) (:mod:`rlvr_cli.sampling.rounds`,
the round `rlvr doctor` samples too), so a step is reproducible on its own (resume needs no sampler state) and a group's samples do not
depend on the batch it is drawn in. Under N processes every rank draws the same P prompts, samples
and scores its contiguous share of whole groups (:func:`rlvr_cli.dist.share`), and the groups
are gathered in global order: every rank then keeps, counts and refills exactly as one process.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol

import torch

from rlvr_cli.envs.protocol import EpisodeStats
from rlvr_cli.evaluation.decoding import environment_turns
from rlvr_cli.models import sampling_autocast
from rlvr_cli.recipe.schema import Recipe
from rlvr_cli.rewards import ScoreItem
from rlvr_cli.rewards.shaping import environment_rewards
from rlvr_cli.sampling import TokenSupport
from rlvr_cli.sampling.rounds import RoundKey, RoundSettings, draw_prompts, sample_round
from rlvr_cli.tasks import Problem
from rlvr_cli.train.rollouts.lag import policy_lag
from rlvr_cli import dist


@dataclass
class Group:
    problem: Problem
    prompt_ids: list[int]
    response_ids: list[list[int]]
    logprobs: list[list[float]]
    finish_reasons: list[str]
    texts: list[str]
    rewards: list[float]
    """Raw reward of the recipe's reward terms (before overlong and KL shaping)."""
    correct: list[bool]
    """From the task's true verifier, whatever reward drives training."""
    outcomes: list[str]
    term_values: list[list[float]] = field(default_factory=list)
    """Each response's reward terms before weighting, in the order of ``reward.terms`` (GDPO normalises them
    one by one)."""
    supports: list[TokenSupport] = field(default_factory=list)
    """Each response's sampling supports under top-k / top-p (empty without truncation): the trainer's
    log-probs are renormalised over them (rlvr_cli/algo/logprobs.py)."""
    origins: list[list[int]] = field(default_factory=list)
    """Multi-turn (``environment:``): per response token, :data:`~rlvr_cli.envs.protocol.MODEL` or
    ``ENVIRONMENT``; empty for single-turn groups (every token the model's)."""
    episode_stats: list[EpisodeStats] = field(default_factory=list)
    """Multi-turn: each trajectory's counters (calls, failures, turns, void turns); empty for single-turn."""
    prefix_mismatches: list[int] = field(default_factory=list)
    """Multi-turn: each trajectory's re-tokenisation mismatches at a reply's seam (rlvr_cli/sampling/turns.py)."""

    def informative(self, metric: str) -> bool:
        values = self.correct if metric == "accuracy" else self.rewards
        return len(set(values)) > 1


@dataclass
class RolloutStats:
    rounds: int = 0
    prompts_sampled: int = 0
    groups_dropped: int = 0
    gen_tokens: int = 0
    time_sample_s: float = 0.0
    time_verify_s: float = 0.0
    sampled: list[Group] = field(default_factory=list)
    """Every group sampled this step (all rounds), for unbiased policy statistics."""
    time_wait_s: float | None = None
    """Overlapped trainer (:mod:`.overlap`): seconds the trainer waited for this batch; None in one process."""
    time_handover_s: float | None = None
    """Overlapped trainer: seconds handing weights over, the trainer's copy and send of the previous step's
    weights plus the sampler's load of the version that sampled this batch; None in one process."""
    time_sampler_idle_s: float | None = None
    """Overlapped trainer: seconds the sampler waited before this batch (for its weights, or for the trainer
    to catch up); None in one process."""
    batches_dropped: int = 0
    """Batches of this step sampled and dropped for being older than ``rollout.staleness.max`` (bounded, drop)."""


@dataclass
class Rollouts:
    """One step's rollouts."""

    groups: list[Group]
    """The kept groups (as :func:`collect_rollouts` returns them)."""
    stats: RolloutStats
    policy_version: int
    """Optimiser steps the sampling weights had seen: step - 1 on-policy, max(0, step - 1 - k) at a fixed lag k
    (:func:`~.lag.sampling_version`)."""

    def lag(self, step: int) -> int:
        """Steps between the policy that sampled this batch and the one that trains on it at ``step``."""
        return policy_lag(step, self.policy_version)


class RolloutSession(Protocol):
    """What collecting rollouts reads of a session: the trainer's :class:`~rlvr_cli.train.session.Session`
    in its own process, :class:`~.sampler_process.SamplerSession` in the overlapped trainer's sampler."""

    recipe: Recipe
    model: torch.nn.Module
    tokenizer: object
    autocast_dtype: torch.dtype | None
    """The trainer's autocast dtype (None: none); the sampling pass uses :func:`sample_autocast`."""

    def full_params(self) -> AbstractContextManager:
        """Whole parameters for the sampling forwards, which ranks run different numbers of (FSDP2 gathers
        them; elsewhere nothing to do)."""


def sample_autocast(recipe, session: RolloutSession) -> torch.dtype | None:
    """The autocast dtype of the sampling pass: ``rollout.sample_autocast`` when set (a deliberate
    sampler/trainer mismatch, as a bf16 inference engine beside a float32 trainer), else the trainer's."""
    return sampling_autocast(recipe.rollout.sample_autocast, session.autocast_dtype)


def collect_rollouts(session: RolloutSession, task, scorer, step: int) -> tuple[list[Group], RolloutStats]:
    """The groups to train on at ``step`` and the statistics of everything sampled to get them."""
    ro, ds = session.recipe.rollout, session.recipe.dynamic_sampling
    model = session.model
    stats = RolloutStats()
    kept: list[Group] = []
    max_rounds = ds.max_rounds if ds.enabled else 1
    was_training = model.training
    model.eval()
    with session.full_params():
        _rounds(session, task, scorer, step, max_rounds, stats, kept)
    if was_training:
        model.train()
    stats.gen_tokens = int(dist.all_reduce_sum(stats.gen_tokens))
    stats.time_sample_s, stats.time_verify_s = dist.all_reduce([stats.time_sample_s, stats.time_verify_s], "max")
    return kept[: ro.prompts_per_step], stats


def _rounds(session: RolloutSession, task, scorer, step: int, max_rounds: int, stats: RolloutStats, kept: list[Group]) -> None:
    """Sample, score and filter rounds of P prompts into ``kept`` until P are kept or the rounds run out."""
    r = session.recipe
    ro, ds = r.rollout, r.dynamic_sampling
    tok, model, g = session.tokenizer, session.model, ro.group_size
    turns = environment_turns(r.environment, r.model.name, tok, task, r.reward.extract)
    for round_ in range(max_rounds):
        stats.rounds += 1
        key = RoundKey(r.seed, step, round_)
        problems = draw_prompts(task, key, ro.prompts_per_step)
        stats.prompts_sampled += len(problems)
        mine = dist.share(len(problems))  # this rank's prompts (all of them in one process)
        t0 = time.perf_counter()
        sampled = sample_round(model, tok, task, ro, key, problems, mine, RoundSettings(sample_autocast(r, session), turns))
        prompt_ids, out, texts = sampled.prompt_ids, sampled.samples, sampled.texts
        stats.time_sample_s += time.perf_counter() - t0
        stats.gen_tokens += out.gen_tokens
        t0 = time.perf_counter()
        items = [
            ScoreItem(problem=problems[mine[k // g]], response=texts[k], sample_index=k % g, step=step,
                      truncated=out.finish_reasons[k] == "length", completion_ids=out.response_ids[k])
            for k in range(len(texts))
        ]
        scores = scorer.score(items)
        env_rewards = environment_rewards(out, len(texts))
        stats.time_verify_s += time.perf_counter() - t0
        local = []
        for i, j in enumerate(mine):
            sl = slice(i * g, (i + 1) * g)
            local.append(Group(
                problem=problems[j],
                prompt_ids=prompt_ids[i],
                response_ids=out.response_ids[sl],
                logprobs=out.logprobs[sl],
                finish_reasons=out.finish_reasons[sl],
                texts=texts[sl],
                rewards=[s.reward + e for s, e in zip(scores[sl], env_rewards[sl])],
                correct=[s.correct for s in scores[sl]],
                outcomes=[s.outcome for s in scores[sl]],
                term_values=[list(s.terms.values()) for s in scores[sl]],
                supports=out.supports[sl],
                **_trajectory_fields(out, sl),
            ))
        for grp in dist.gather_concat(local):  # the round's groups in global order, on every rank
            stats.sampled.append(grp)
            if not ds.enabled or grp.informative(ds.metric):
                kept.append(grp)
            else:
                stats.groups_dropped += 1
        if len(kept) >= ro.prompts_per_step:
            break


def _trajectory_fields(out, sl: slice) -> dict:
    """A group's multi-turn fields (origins, episode counters, seam mismatches); none for single-turn."""
    if not getattr(out, "episodes", None):
        return {}
    return {"origins": out.origins[sl], "episode_stats": [ep.stats for ep in out.episodes[sl]],
            "prefix_mismatches": out.prefix_mismatches[sl]}
