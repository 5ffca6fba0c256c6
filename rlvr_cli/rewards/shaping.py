"""The reward the advantages see, from the scored responses: one function for the trainer and the doctor.

:func:`shape_rewards` applies, in this order, the length controls, the tool calls' price, DAPO's soft
overlong punishment and KL in the reward; :func:`environment_rewards` is the environment's own reward
(TRL's ``get_reward()``), added to the reward terms before shaping. ``rlvr doctor`` checks the reward
of step 1 with the same code (rlvr_cli/evaluation/doctor.py), so what it reports is what trains.

    r'_i = L(r)_i - c * calls_i + overlong(|o_i|) - beta * sum_t k1_t     (KL term only for kl.placement reward)

Each term's equation, paper and unit test are in its own function under :mod:`rlvr_cli.algo` (length
controls: Kimi k1.5 / prime-rl; the call cost: env_tokens.call_cost_rewards; DAPO arXiv 2503.14476 §3.4;
KL in the reward: Ouyang et al. 2022); this module fixes only their order, tested in
tests/algo/test_algo_env_tokens.py and tests/train/test_length_control_wiring.py.
"""

from __future__ import annotations

import torch

from rlvr_cli.algo.env_tokens import call_cost_rewards
from rlvr_cli.algo.kl import kl_penalized_rewards
from rlvr_cli.algo.length_control import length_controlled_rewards
from rlvr_cli.algo.overlong import soft_overlong_penalty
from rlvr_cli.recipe.schema import Recipe


def shape_rewards(recipe: Recipe, rewards, response_lengths, old_logp, ref_logp, mask, model_tokens=None,
                  calls=None) -> torch.Tensor:
    """The reward the advantages see: raw ``rewards`` (B,) + length controls - the tool calls' price
    (``environment.call_cost`` times ``calls`` (B,), multi-turn) + DAPO soft overlong penalty on the
    ``response_lengths`` (B,, environment tokens included), then KL in the reward (r <- r - beta * sum_t
    k1_t) when the reference's log-probs ``ref_logp`` (B, T) were computed, over the model's tokens
    (``model_tokens`` (B, T)) unless ``environment.kl_on_env_tokens``."""
    shaped = rewards.clone()
    if (lc := recipe.reward.length_control) is not None:  # first, on group-major rows; c_i = r_i > 0 (schema)
        r, n = rewards.view(-1, recipe.rollout.group_size), response_lengths.view(-1, recipe.rollout.group_size)
        shaped = length_controlled_rewards(r, n, r > 0, *lc.weights()).flatten()
    env = recipe.environment
    if env is not None and calls is not None:  # the calls' price, after the length controls (they read raw r)
        shaped = call_cost_rewards(shaped, calls, env.call_cost)
        if model_tokens is not None and not env.kl_on_env_tokens:
            mask = mask * model_tokens
    sp = recipe.overlong.soft_punish
    if sp is not None:
        shaped = shaped + soft_overlong_penalty(response_lengths, recipe.rollout.max_new_tokens, sp.buffer, sp.factor)
    if ref_logp is not None and recipe.kl.in_reward:
        shaped = kl_penalized_rewards(shaped, old_logp, ref_logp, mask, recipe.kl.beta)
    return shaped


def environment_rewards(out, n: int) -> list[float]:
    """Each trajectory's environment reward (TRL's ``get_reward()``, summed with the reward terms at
    weight 1, as TRL sums its reward sources); 0.0 without an environment or where it has none."""
    episodes = getattr(out, "episodes", None) or []
    values = [ep.reward() for ep in episodes]
    return [float(v) if v is not None else 0.0 for v in values] if values else [0.0] * n
