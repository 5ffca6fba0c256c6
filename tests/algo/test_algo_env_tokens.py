"""rlvr_cli/algo/env_tokens.py: what a multi-turn batch's environment tokens carry, with hand-computed losses.

Two trajectories (token losses as if every token were the model's, env log-probs for echo):
  A: model 1, model 3, env 5 (log-prob -1), env 7 (log-prob -3)
  B: model 2, env 4 (log-prob -2), model 6
"""

from __future__ import annotations

import pytest
import torch

from rlvr_cli.algo.aggregation import aggregate
from rlvr_cli.algo.env_tokens import call_cost_rewards, echo_loss, env_token_masks, void_turn_rows
from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.train.objective import LossInputs, aggregate_loss, environment_masks, token_loss, zero_loss_rows

LOSS = torch.tensor([[1.0, 3.0, 5.0, 7.0], [2.0, 4.0, 6.0, 0.0]])
LOGP = torch.tensor([[-0.5, -0.5, -1.0, -3.0], [-0.5, -2.0, -0.5, 0.0]])
MASK = torch.tensor([[1.0, 1, 1, 1], [1, 1, 1, 0]])
MODEL = torch.tensor([[1.0, 1, 0, 0], [1, 0, 1, 0]])


def _loss(mode, divisor_all=False, agg="seq_mean_token_mean", alpha=0.1):
    m = env_token_masks(MASK, MODEL, mode, kl_on_env=False, divisor_counts_env=divisor_all)
    carry = torch.maximum(m.policy, m.kl)
    out = aggregate(LOSS * m.policy, carry, agg, length_constant=8, divisor_mask=m.divisor)
    if m.echo is not None:
        out = out + echo_loss(LOGP, m.echo, alpha, float(m.echo.sum()))
    return float(out)


@pytest.mark.parametrize("mode, divisor_all, agg, want", [
    ("mask", False, "seq_mean_token_mean", (2 + 4) / 2),          # A (1+3)/2, B (2+6)/2
    ("mask", True, "seq_mean_token_mean", (4 / 4 + 8 / 3) / 2),   # the divisor counts env tokens: 11/6
    ("train", False, "seq_mean_token_mean", (16 / 2 + 12 / 2) / 2),  # env tokens trained, |o| = model tokens
    ("train", True, "seq_mean_token_mean", (16 / 4 + 12 / 3) / 2),
    ("echo", False, "seq_mean_token_mean", 3 + 0.1 * (1 + 3 + 2) / 3),  # + alpha * mean env NLL
    ("mask", False, "token_mean", 12 / 4),
    ("mask", True, "token_mean", 12 / 7),
    ("train", False, "token_mean", 28 / 4),
    ("train", True, "token_mean", 28 / 7),
    ("train", True, "seq_mean_token_sum_norm", 28 / (2 * 8)),
    ("mask", False, "seq_mean_token_sum_norm", 12 / (2 * 8)),
])
def test_the_hand_computed_losses(mode, divisor_all, agg, want):
    assert _loss(mode, divisor_all, agg) == pytest.approx(want)


def test_mask_train_echo_and_the_divisor_all_differ():
    got = {(m, d): _loss(m, d) for m in ("mask", "train", "echo") for d in (False, True)}
    assert len(set(round(v, 9) for v in got.values())) == 6


def test_the_masks():
    m = env_token_masks(MASK, MODEL, "echo", kl_on_env=True, divisor_counts_env=False)
    assert m.policy.tolist() == MODEL.tolist() and m.kl.tolist() == MASK.tolist()
    assert m.divisor.tolist() == MODEL.tolist()
    assert m.echo.tolist() == [[0, 0, 1, 1], [0, 1, 0, 0]]
    # environment tokens before the first model token (a reset text) are not echoed (prime-rl: the prompt)
    head = env_token_masks(torch.ones(1, 4), torch.tensor([[0.0, 0, 1, 0]]), "echo", False, False)
    assert head.echo.tolist() == [[0, 0, 0, 1]]
    assert env_token_masks(MASK, MODEL, "train", False, True).policy.tolist() == MASK.tolist()
    with pytest.raises(ValueError, match="env_tokens"):
        env_token_masks(MASK, MODEL, "drop", False, False)


def test_without_a_divisor_mask_the_aggregation_is_unchanged():
    for agg in ("seq_mean_token_mean", "token_mean", "seq_mean_token_sum_norm"):
        a = aggregate(LOSS, MASK, agg, 8)
        assert float(aggregate(LOSS, MASK, agg, 8, divisor_mask=MASK)) == pytest.approx(float(a))


def test_call_cost_and_void_rows():
    assert call_cost_rewards(torch.tensor([1.0, 0.0]), torch.tensor([2, 0]), 0.25).tolist() == [0.5, 0.0]
    assert void_turn_rows(torch.tensor([0.0, 2.0])).tolist() == [False, True]


def _recipe(*changes):
    return load_recipe("grpo", ["environment.factory=builtin:calculator", *changes])


def test_the_void_turn_filter_leaves_the_trajectory_out():
    r = _recipe("environment.void_turn_filter=true")
    m = environment_masks(r, MASK, MODEL, torch.tensor([0.0, 1.0]))
    assert m.policy[1].sum() == 0 and m.divisor[1].sum() == 0 and m.policy[0].tolist() == [1, 1, 0, 0]
    assert environment_masks(_recipe(), MASK, MODEL, torch.tensor([0.0, 1.0])).policy[1].sum() == 2


def test_kl_on_env_tokens_through_the_token_loss():
    """KL in the loss (beta 0.1, k1 = logp - ref = 1 per token) on model tokens only, or on all tokens;
    A = 0 so the policy term is 0: the loss is the KL term alone, seq-mean of per-row means over model tokens."""
    logp, ref = torch.zeros(2, 4), -torch.ones(2, 4)
    adv = torch.zeros(2, 1)
    for on_env, want in ((False, 0.1), (True, 0.1 * (4 / 2 + 3 / 2) / 2)):
        r = _recipe(f"environment.kl_on_env_tokens={str(on_env).lower()}", "kl.beta=0.1", "kl.estimator=k1",
                    "kl.placement=loss")
        m = environment_masks(r, MASK, MODEL, torch.zeros(2))
        rows = LossInputs(logp, ref, adv, m.policy, env=m)
        tok, _ = token_loss(r, logp, torch.zeros(2, 4), rows)
        assert float(aggregate_loss(r, tok, logp, rows, 2.0, 0.0)) == pytest.approx(want)
        assert not zero_loss_rows(r, adv.squeeze(1), ref, m.carry).any()  # KL reaches rows with A = 0


def test_echo_rows_are_never_zero_loss():
    r = _recipe("environment.env_tokens=echo")
    m = environment_masks(r, MASK, MODEL, torch.zeros(2))
    assert not zero_loss_rows(r, torch.zeros(2), None, m.carry).any()
    assert zero_loss_rows(_recipe(), torch.zeros(2), None, m.carry).all()


def test_the_call_cost_is_where_the_rewards_are_shaped():
    """r - c * calls in shape_rewards, after the length controls (which read the raw reward), before KL in the reward."""
    from rlvr_cli.train.objective import shape_rewards

    rewards, lengths, calls = torch.tensor([1.0, 0.0, 1.0, 0.0]), torch.tensor([4.0, 4.0, 8.0, 8.0]), torch.tensor([2, 0, 1, 1])
    mask = torch.ones(4, 8)
    r = _recipe("environment.call_cost=0.25", "rollout.group_size=4")
    assert shape_rewards(r, rewards, lengths, None, None, mask, mask, calls).tolist() == [0.5, 0.0, 0.75, -0.25]
    assert shape_rewards(load_recipe("grpo", ["rollout.group_size=4"]), rewards, lengths, None, None, mask).tolist() == rewards.tolist()
    lc = _recipe("environment.call_cost=0.25", "rollout.group_size=4", "reward.length_control.brevity_bonus=1")
    plain = shape_rewards(load_recipe("grpo", ["rollout.group_size=4", "reward.length_control.brevity_bonus=1"]),
                          rewards, lengths, None, None, mask)
    priced = shape_rewards(lc, rewards, lengths, None, None, mask, mask, calls)
    assert torch.allclose(priced, plain - 0.25 * calls)
