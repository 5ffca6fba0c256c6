"""A reward function with TRL's signature: it works unchanged as `GRPOTrainer(reward_funcs=[column_credit])`
and as an rlvr reward term (`reward.terms: [{type: function, function: examples/own_task/reward.py:column_credit}]`).

It reads the operands from the dataset's `a` and `b` columns (listed in the recipe's `task.reward_columns`)
and gives partial credit for the column totals written before the answer: `12,13,6#632` or
`7+5=12,4+8+1=13,3+2+1=6#632` for 347 + 285. A response without written work gets 0.
"""

import re

TOTAL = re.compile(r"(?:^|[,=])(\d+)(?=,|$)")
"""A number that ends a comma-separated item: `12` in `12,13`, `12` in `7+5=12,`."""


def column_totals(a: int, b: int, digits: int = 3) -> list[int]:
    """Column sums right to left with the carry: 347 + 285 -> [12, 13, 6]."""
    totals, carry = [], 0
    for j in range(digits):
        total = a // 10**j % 10 + b // 10**j % 10 + carry
        totals.append(total)
        carry = total // 10
    return totals


def column_credit(completions, a, b, **kwargs):
    """Share of the column totals that the work before `#` writes correctly, in order."""
    rewards = []
    for text, x, y in zip(completions, a, b):
        written = [int(t) for t in TOTAL.findall(text.split("#", 1)[0])]
        truth = column_totals(x, y)
        rewards.append(sum(w == t for w, t in zip(written, truth)) / len(truth))
    return rewards
