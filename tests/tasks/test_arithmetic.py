"""rlvr_cli/tasks/arithmetic.py: column sums by hand, a held-out split that training never draws from, a
wrong-sum label that is never the sum."""

from __future__ import annotations

import random

import pytest

from rlvr_cli.errors import UserError
from rlvr_cli.recipe.schema import ArithmeticTaskSpec
from rlvr_cli.tasks.arithmetic import ArithmeticTask, column_totals, held_out_pairs, shifted_wrong_sum, training_pairs


def test_column_totals_by_hand():
    # 347 + 285: 7+5 = 12 (carry 1), 4+8+1 = 13 (carry 1), 3+2+1 = 6 -> 632
    assert column_totals(347, 285, 3) == ([12, 13, 6], 632)
    # 999 + 1: every column carries, the answer gains a digit
    assert column_totals(999, 1, 3) == ([10, 10, 10], 1000)
    # a slip of +1 in the middle column (13 -> 14) travels on: 6 becomes 7 -> 742
    assert column_totals(347, 285, 3, error_col=1, delta=1) == ([12, 14, 6], 642)
    assert column_totals(0, 0, 2, error_col=0, delta=-5) == ([0, 0], 0)  # kept within 0..19


def test_training_never_draws_a_held_out_pair():
    pairs, held = held_out_pairs(1, 40, 0)  # 100 pairs in all, 40 held out
    assert len(pairs) == len(held) == 40 and pairs == held_out_pairs(1, 40, 0)[0]
    drawn = training_pairs(random.Random(1), 1, held, 500)
    assert len(drawn) == 500 and not set(drawn) & held
    with pytest.raises(UserError, match="task.num_eval: 51 held-out prompts leave too few"):
        held_out_pairs(1, 51, 0)


def test_a_problem_and_its_wrong_label():
    task = ArithmeticTask(ArithmeticTaskSpec(digits=3))
    p = task.problem(7, 85)
    assert (p.id, p.prompt, p.reference, task.answer_marker) == ("add3:007+085", "007+085=", "92", "#")
    wrong = [int(shifted_wrong_sum(q)) for q in task.eval_problems()]
    gold = [int(q.reference) for q in task.eval_problems()]
    assert all(w != g and 1 <= abs(w - g) <= 9 and w >= 0 for w, g in zip(wrong, gold))
    assert task.incorrect_reference(p) == shifted_wrong_sum(p)
