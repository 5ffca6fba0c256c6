"""rlvr_cli/tasks/countdown.py: the exhaustive solver by hand, and every drawn problem solvable."""

from __future__ import annotations

import random
from fractions import Fraction

from rlvr_cli.tasks.countdown import CountdownTask, _apply, random_solution, solutions


def test_apply_divides_exactly_and_refuses_zero():
    assert _apply("/", Fraction(1), Fraction(3)) == Fraction(1, 3) and _apply("/", Fraction(1), Fraction(0)) is None
    assert _apply("-", Fraction(2), Fraction(5)) == -3


def test_solutions_by_hand():
    # 2 and 3 make 6 only as 2*3 and 3*2; 5 as 2+3 and 3+2; -1 as 2-3; no way to 7
    assert [e for e, _ in solutions((2, 3), 6)] == ["2*3", "3*2"]
    assert [e for e, _ in solutions((2, 3), 5)] == ["2+3", "3+2"]
    assert [e for e, _ in solutions((2, 3), -1)] == ["2-3"]
    assert solutions((2, 3), 7) == ()
    # with a third number: (2+3)*4 = 20, and its steps in the order they were made
    found = dict(solutions((2, 3, 4), 20))
    assert found["(2+3)*4"] == ("2+3=5", "5*4=20")
    assert "2" not in [e for e, _ in solutions((2, 3), 2)]  # a number alone is no equation


def test_every_drawn_problem_has_a_solution():
    task = CountdownTask()
    rng = random.Random(0)
    for p in [*task.eval_problems()[:5], *task.train_problems(rng, 5)]:
        numbers, target = p.meta["numbers"], p.meta["target"]
        assert random_solution(numbers, target, random.Random(1)) is not None or solutions(tuple(numbers), target)
