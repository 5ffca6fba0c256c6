"""reward.length_control through the trainer's reward shaping (train/objective.py: shape_rewards), hand-computed on
tensors; and the schema's refusals of length controls that cannot act."""

from __future__ import annotations

import pytest
import torch

from rlvr_cli.errors import UserError
from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.train.objective import shape_rewards, step_advantages

G4 = ["rollout.group_size=4", "rollout.prompts_per_step=2"]


def shaped(sets: list[str], rewards: list[float], lengths: list[float], base: str = "grpo") -> torch.Tensor:
    r = load_recipe(base, G4 + sets)
    # float32 as in the trainer's Batch
    return shape_rewards(r, torch.tensor(rewards, dtype=torch.float32), torch.tensor(lengths, dtype=torch.float32),
                         None, None, None)


def test_off_by_default_leaves_the_rewards_alone():
    rewards = [1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0]
    assert shaped([], rewards, [3, 9, 27, 81, 1, 2, 3, 4]).tolist() == rewards


def test_brevity_bonus_per_group():
    # group 1: mean correct length 20, b = [0.5, 0, 0, 0]; group 2 has no correct response: no bonus
    out = shaped(["reward.length_control.brevity_bonus=1"], [1, 1, 1, 0, 0, 0, 0, 0], [10, 20, 30, 40, 5, 6, 7, 8])
    assert out.tolist() == [1.5, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]


def test_brevity_bonus_reads_correctness_as_reward_above_zero_under_a_weighted_verifier():
    # verifier weight 2: rewards are {0, 2}; mean correct length (10 + 30) / 2 = 20, b = [0.5, 0, 0, 0], w = 0.5
    sets = ["reward.length_control.brevity_bonus=0.5", "reward.terms=[{type: task, weight: 2.0}]"]
    out = shaped(sets, [2, 2, 0, 0, 2, 0, 0, 0], [10, 30, 5, 5, 8, 8, 1, 1])
    # group 2: the only correct response is the mean itself, 1 - 8/8 = 0
    assert out.tolist() == [2.25, 2.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0]


def test_group_length_penalty_per_group():
    # group 1: lambda = [1/2, 1/6, -1/6, -1/2]; wrong ones keep min(0, lambda): [1/2, 0, -1/6, -1/2]
    # group 2: equal lengths, 0/0 taken as 0: unchanged
    out = shaped(["reward.length_control.group_length_penalty=1"], [1, 0, 1, 0, 1, 0, 0, 1], [10, 20, 30, 40] + [7] * 4)
    assert out[:4].tolist() == pytest.approx([1.5, 0.0, 5 / 6, -0.5])
    assert out[4:].tolist() == [1.0, 0.0, 0.0, 1.0]


def test_incorrect_offset_doubles_dr_grpo_advantages():
    out = shaped(["reward.length_control.incorrect_offset=-1"], [1, 0, 0, 1, 1, 1, 1, 0], [5] * 8, base="dr_grpo")
    assert out.tolist() == [1.0, -1.0, -1.0, 1.0, 1.0, 1.0, 1.0, -1.0]
    r = load_recipe("dr_grpo", G4)
    adv, _, _ = step_advantages(r, out.view(-1, 4))
    assert adv.tolist() == [[1.0, -1.0, -1.0, 1.0], [0.5, 0.5, 0.5, -1.5]]  # twice [.5, -.5, -.5, .5], [.25, .25, .25, -.75]


def test_offset_alone_is_numerically_inert_under_group_std():
    # what the schema refuses: (1 - delta) r + delta, then mean and std remove both (up to the std's eps)
    r = load_recipe("grpo", G4)
    raw = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 0.0]])
    plain, _, _ = step_advantages(r, raw)
    offset, _, _ = step_advantages(r, 2 * raw - 1)
    assert torch.allclose(plain, offset, atol=1e-5)
    assert plain[0].tolist() == pytest.approx([0.866, -0.866, -0.866, 0.866], abs=1e-3)


def test_controls_come_before_the_overlong_penalty():
    # max_new_tokens 16, buffer 4: length 14 is 2 tokens into the buffer, -0.5; brevity first: mean correct 11
    sets = ["reward.length_control.brevity_bonus=1", "rollout.max_new_tokens=16", "overlong.soft_punish.buffer=4"]
    out = shaped(sets, [1, 1, 0, 0, 0, 0, 0, 0], [8, 14, 8, 8] + [1] * 4)
    assert out[:4].tolist() == pytest.approx([1 + 3 / 11, 0.5, 0.0, 0.0])


def test_advantages_stay_zero_mean_per_group_with_every_control():
    sets = ["reward.length_control.brevity_bonus=1", "reward.length_control.group_length_penalty=1",
            "reward.length_control.incorrect_offset=-1"]
    out = shaped(sets, [1, 0, 1, 0, 1, 1, 0, 0], [10, 20, 30, 40, 3, 9, 27, 81])
    adv, _, _ = step_advantages(load_recipe("grpo", G4 + sets), out.view(-1, 4))
    assert adv.sum(dim=1).abs().max() < 1e-5


@pytest.mark.parametrize("sets, message", [
    (["reward.length_control.incorrect_offset=-1"], "incorrect_offset alone is inert under advantage.scale group_std"),
    (["reward.length_control.incorrect_offset=-1", "advantage.scale=batch_std"], "inert under advantage.scale batch_std"),
    (["reward.length_control.brevity_bonus=1", "reward.terms=[{type: task}, {type: format, weight: 0.1}]"],
     "needs reward.terms to be one verifier term of positive weight"),
    (["reward.length_control.brevity_bonus=1", "reward.terms=[{type: task, weight: -1.0}]"], "of positive weight"),
    (["reward.length_control={}"], "sets no control"),
    (["reward.length_control.brevity_bonus=1", "advantage.passk={method: pkpo, k: 2}"], "cannot be combined with advantage.passk"),
    (["reward.length_control.incorrect_offset=0.5"], "incorrect_offset: Input should be less than 0"),
    (["reward.length_control.brevity_bonus=0"], "brevity_bonus: Input should be greater than 0"),
    (["reward.length_control.brevity=1"], "brevity"),
])
def test_refusals(sets, message):
    with pytest.raises(UserError, match=message):
        load_recipe("grpo", G4 + sets)


@pytest.mark.parametrize("sets", [
    ["reward.length_control.incorrect_offset=-1", "advantage.baseline=none"],  # REINFORCE: the offset is a baseline shift
    ["reward.length_control.incorrect_offset=-1", "reward.length_control.brevity_bonus=1"],  # no longer binary
    ["reward.length_control.incorrect_offset=-1", "overlong.soft_punish.buffer=8"],
])
def test_offset_accepted_where_it_acts(sets):
    assert load_recipe("grpo", G4 + sets).reward.length_control.incorrect_offset == -1.0
