"""rlvr_cli/rewards/spurious.py: the random reward is a keyed Bernoulli draw; format_only asks only for an answer."""

from __future__ import annotations

import hashlib

from rlvr_cli.rewards.spurious import format_only_reward, random_reward


def test_the_random_reward_is_the_hash_of_its_key_against_p():
    key = b"random:0:1:2:p7:3"
    u = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") / 2**64
    assert random_reward(u + 1e-12, 0, 1, 2, "p7", 3) == 1.0 and random_reward(u, 0, 1, 2, "p7", 3) == 0.0
    assert random_reward(0.0, 0, 1, 2, "p7", 3) == 0.0 and random_reward(1.0, 0, 1, 2, "p7", 3) == 1.0


def test_the_random_reward_has_mean_p_and_depends_on_every_part_of_its_key():
    draws = [random_reward(0.3, 5, 0, step, f"q{i}", j) for step in range(10) for i in range(10) for j in range(10)]
    assert abs(sum(draws) / len(draws) - 0.3) < 0.05  # 1000 draws: sd 0.0145
    base = [random_reward(0.5, 0, 0, 0, f"q{i}", 0) for i in range(64)]
    for other in ([random_reward(0.5, 1, 0, 0, f"q{i}", 0) for i in range(64)],
                  [random_reward(0.5, 0, 1, 0, f"q{i}", 0) for i in range(64)],
                  [random_reward(0.5, 0, 0, 1, f"q{i}", 0) for i in range(64)],
                  [random_reward(0.5, 0, 0, 0, f"q{i}", 1) for i in range(64)]):
        assert other != base
    assert base == [random_reward(0.5, 0, 0, 0, f"q{i}", 0) for i in range(64)]  # the same in every rerun


def test_format_only_rewards_any_answer_right_or_wrong():
    assert format_only_reward("so the answer is # 12", "integer", {"marker": "#"}) == 1.0
    assert format_only_reward("so the answer is # 13", "integer", {"marker": "#"}) == 1.0
    assert format_only_reward("no idea", "integer", {"marker": "#"}) == 0.0
