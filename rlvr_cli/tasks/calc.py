"""Built-in task `calc`: arithmetic the built-in model mostly fails alone, for the calculator environment.

`347*28=` (``operation: mul``, 3-digit x 2-digit) or `1234+5678+9012=` (``sum3``); the answer follows `#`.
A supervised trace (the warm start's data) calls the calculator with probability ``tool_prob``, in the
``tags`` protocol, with the reply written exactly as `builtin:calculator` writes it::

    <calc>347*28</calc><r>9716</r>#9716        a call, then the answer read off the reply
    #9716                                      a direct answer (the model cannot compute it)

so a warm-started model calls in about that share of its samples and a group of G samples mixes both.
The call's text and the reply come from :mod:`rlvr_cli.envs` (the protocol and the calculator), so a
trace and a rollout can never disagree on a character.
"""

from __future__ import annotations

import random

from rlvr_cli.envs.calculator import evaluate, show
from rlvr_cli.envs.calls import render_call, wrap
from rlvr_cli.recipe.schema import CalcTaskSpec
from rlvr_cli.tasks.base import Problem, stable_hash

MARKER = "#"
TOOL = "calc"
"""The calculator's one tool (:meth:`rlvr_cli.envs.calculator.Calculator.calc`)."""


class CalcTask:
    name = "calc"
    verifier = "integer"
    answer_marker = MARKER

    def __init__(self, spec: CalcTaskSpec | None = None):
        self.spec = spec or CalcTaskSpec()
        rng = random.Random(self.spec.split_seed)
        self._eval_terms: list[tuple[int, ...]] = []
        self._eval_set: set[tuple[int, ...]] = set()
        while len(self._eval_terms) < self.spec.num_eval:
            terms = self._draw(rng)
            if terms not in self._eval_set:
                self._eval_set.add(terms)
                self._eval_terms.append(terms)

    def _draw(self, rng: random.Random) -> tuple[int, ...]:
        if self.spec.operation == "mul":
            return rng.randrange(100, 1000), rng.randrange(10, 100)
        return tuple(rng.randrange(1000, 10000) for _ in range(3))

    def expression(self, terms: tuple[int, ...]) -> str:
        return ("*" if self.spec.operation == "mul" else "+").join(str(t) for t in terms)

    def problem(self, terms: tuple[int, ...]) -> Problem:
        expr = self.expression(terms)
        return Problem(id=f"calc:{expr}", prompt=expr + "=", reference=show(evaluate(expr)),
                       meta={"expression": expr})

    def eval_problems(self) -> list[Problem]:
        return [self.problem(t) for t in self._eval_terms]

    def train_problems(self, rng: random.Random, n: int) -> list[Problem]:
        out = []
        while len(out) < n:
            terms = self._draw(rng)
            if terms not in self._eval_set:
                out.append(self.problem(terms))
        return out

    def incorrect_reference(self, problem: Problem) -> str:
        h = stable_hash("incorrect:" + problem.id)
        return str(int(problem.reference) + 1 + h % 9)

    def trace(self, problem: Problem, rng: random.Random) -> str:
        """A call and the calculator's reply, then the answer; or the answer alone (see the module docstring)."""
        if rng.random() < self.spec.tool_prob:
            expr = problem.meta["expression"]
            return render_call("tags", TOOL, expr) + wrap("tags", problem.reference) + MARKER + problem.reference
        return MARKER + problem.reference
