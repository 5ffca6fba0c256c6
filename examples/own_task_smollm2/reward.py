"""A reward function with TRL's signature: it works unchanged as `GRPOTrainer(reward_funcs=[names_a_candidate])`
and as an rlvr reward term (`reward.terms: [{type: function, function: reward.py:names_a_candidate}]`).

It reads the two numbers from the dataset's `a` and `b` columns (TRL passes every column; so does rlvr) and
pays for a reply whose last number is one of them: a reply that answers the question at all, right or wrong.
The task's own verifier pays for the right one.
"""

import re

NUMBER = re.compile(r"-?\d+")


def names_a_candidate(completions, a, b, **kwargs):
    """1.0 when the reply's last number is `a` or `b`, else 0.0 (plain text or a chat message)."""
    rewards = []
    for completion, x, y in zip(completions, a, b):
        text = completion[-1]["content"] if isinstance(completion, list) else completion
        numbers = NUMBER.findall(text)
        rewards.append(1.0 if numbers and int(numbers[-1]) in (x, y) else 0.0)
    return rewards
