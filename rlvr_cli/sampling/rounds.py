"""One sampling round of a training step, the trainer's and `rlvr doctor`'s alike: the prompt draw, the
keyed draws, the sampling settings and the decode (issue 51).

Round r of step t draws its P prompts from a generator seeded by (seed, t, "prompts", r), and response
i of prompt j samples with the keyed uniforms of (seed, t, "sample", r; j, i)
(:mod:`rlvr_cli.keyed_random`): a response is a function of its step, round, prompt index, sample
index and the weights, whichever process samples which prompts. The trainer
(:func:`rlvr_cli.train.rollouts.collect.collect_rollouts`) samples its rank's share of each round;
the doctor (:mod:`rlvr_cli.evaluation.doctor`) the first prompts of step 1's first round, so that it
shows exactly what step 1 samples (tests/evaluation/test_doctor.py checks both agree). Scoring and the
groups are the callers': this layer sits below the reward terms.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from rlvr_cli.envs import problem_row
from rlvr_cli.keyed_random import row_keys, stream_key
from rlvr_cli.sampling import Samples, SamplingOptions, generate
from rlvr_cli.sampling.turns import generate_turns
from rlvr_cli.tasks import Problem, encode_prompt


@dataclass(frozen=True)
class RoundKey:
    """Which round of which step of which run: the key of its prompt draw and of its samples."""

    seed: int
    step: int
    round: int = 0


@dataclass
class SampledRound:
    """The G responses of each sampled prompt, prompt-major (row k: prompt ``which[k // G]``, sample k % G)."""

    prompt_ids: list[list[int]]
    """The encoded prompts sampled, in the order of ``which``."""
    samples: Samples
    texts: list[str]
    """Each response decoded (special tokens skipped), as the verifiers read it."""


@dataclass(frozen=True)
class Turns:
    """How a round samples multi-turn trajectories: a fresh episode per response (TRL builds one
    environment_factory() object per rollout) and the recipe's ``environment.max_turns``."""

    make_episode: Callable[[dict], object]
    max_turns: int


def draw_prompts(task, key: RoundKey, n: int) -> list[Problem]:
    """The round's ``n`` training prompts (every process draws the same)."""
    return task.train_problems(stream_key(key.seed, key.step, "prompts", key.round).rng(), n)


@dataclass(frozen=True)
class RoundSettings:
    """How a round samples besides the recipe's ``rollout``: the autocast dtype, and multi-turn or not."""

    autocast_dtype: torch.dtype | None = None
    turns: Turns | None = None
    """A recipe's ``environment:``: each response a multi-turn trajectory with its own episode
    (:func:`rlvr_cli.sampling.turns.generate_turns`); None: single-turn."""


def sample_round(model, tokenizer, task, rollout, key: RoundKey, problems: list[Problem], which: list[int],
                 settings: RoundSettings | None) -> SampledRound:
    """Sample ``rollout.group_size`` responses to each prompt ``problems[j]``, j in ``which``, with the
    recipe's ``rollout`` settings and ``settings`` (None: no autocast, single-turn); response i of prompt j
    draws with the keys of (key; j, i)."""
    settings = settings or RoundSettings()
    autocast_dtype, turns = settings.autocast_dtype, settings.turns
    g = rollout.group_size
    prompt_ids = [encode_prompt(tokenizer, task, problems[j]) for j in which]
    options = SamplingOptions(rollout.max_new_tokens, tokenizer.eos_token_id, tokenizer.pad_token_id,
                              rollout.temperature, rollout.top_p, rollout.top_k, ignore_eos=rollout.ignore_eos,
                              autocast_dtype=autocast_dtype)
    keys = row_keys(stream_key(key.seed, key.step, "sample", key.round), [(j, i) for j in which for i in range(g)])
    flat = [ids for ids in prompt_ids for _ in range(g)]
    if turns is None:
        out = generate(model, flat, options, row_keys=keys)
    else:
        rows = [problem_row(problems[j]) for j in which for _ in range(g)]
        out = generate_turns(model, tokenizer, flat, [turns.make_episode(row) for row in rows], rows, options,
                             turns.max_turns, keys)
    return SampledRound(prompt_ids, out, [tokenizer.decode(ids, skip_special_tokens=True) for ids in out.response_ids])
