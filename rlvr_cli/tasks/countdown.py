"""Built-in task `countdown`: reach a target from given numbers with + - * /, each number at most once.

Prompt `3,5,7>22:`; a response ends with the marker and an equation, e.g. `5*3=15,15+7=22#(5*3)+7`
(verbose) or `#(5*3)+7` (terse). The reference is JSON `{"numbers": [3, 5, 7], "target": 22}`; the
`countdown` verifier parses the equation after the last marker with a safe parser and checks the
numbers used and the exact value (fractions allowed mid-way). Most prompts have several correct
equations (different numbers, orders and operations), so there are many correct responses to learn.
"""

from __future__ import annotations

import json
import random
from fractions import Fraction
from functools import lru_cache

from rlvr_cli.errors import UserError
from rlvr_cli.recipe.schema import CountdownTaskSpec as CountdownSpec
from rlvr_cli.tasks.base import Problem, stable_hash

MARKER = "#"
OPS = "+-*/"


def _apply(op: str, x: Fraction, y: Fraction) -> Fraction | None:
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    if op == "*":
        return x * y
    return None if y == 0 else x / y


@lru_cache(maxsize=4096)
def solutions(numbers: tuple[int, ...], target: int) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Every (equation, steps) that reaches ``target`` from a subset of ``numbers``, each used at most once.

    Items are combined two at a time in both orders (the classic countdown search); ``steps`` are the
    intermediate equations `5*3=15` in the order they were made. Exhaustive, so slow for 4 numbers:
    traces use :func:`random_solution`; this is the reference for tests and a fallback.
    """
    found: dict[str, tuple[str, ...]] = {}

    def search(items: list[tuple[Fraction, str, tuple[str, ...]]]):
        for value, expr, steps in items:
            if value == target and any(ch in expr for ch in OPS) and expr not in found:
                found[expr] = steps
        if len(items) < 2:
            return
        for i in range(len(items)):
            for j in range(len(items)):
                if i == j:
                    continue
                (vx, ex, sx), (vy, ey, sy) = items[i], items[j]
                for op in OPS:  # both orders of + and * too: they are different correct responses
                    v = _apply(op, vx, vy)
                    if v is None:
                        continue
                    wrap = lambda e: f"({e})" if any(ch in e for ch in OPS) else e  # noqa: E731
                    expr = f"{wrap(ex)}{op}{wrap(ey)}"
                    step = f"{_fmt(vx)}{op}{_fmt(vy)}={_fmt(v)}"
                    rest = [it for k, it in enumerate(items) if k not in (i, j)]
                    search(rest + [(v, expr, sx + sy + (step,))])

    search([(Fraction(n), str(n), ()) for n in numbers])
    return tuple(sorted(found.items()))


def random_expression(numbers, rng: random.Random):
    """(value, equation, steps) of a random expression over a random subset (>= 2) of ``numbers``.

    None when it divides by zero. The target of every prompt is made this way, and supervised traces
    search for solutions this way too (cheap, and it finds different equations on different draws).
    """
    k = rng.randint(2, len(numbers))
    items = [(Fraction(n), str(n), ()) for n in rng.sample(list(numbers), k)]
    while len(items) > 1:
        vx, ex, sx = items.pop(rng.randrange(len(items)))
        vy, ey, sy = items.pop(rng.randrange(len(items)))
        op = rng.choice(OPS)
        v = _apply(op, vx, vy)
        if v is None:
            return None
        wrap = lambda e: f"({e})" if any(ch in e for ch in OPS) else e  # noqa: E731
        items.append((v, f"{wrap(ex)}{op}{wrap(ey)}", sx + sy + (f"{_fmt(vx)}{op}{_fmt(vy)}={_fmt(v)}",)))
    return items[0]


def random_solution(numbers, target: int, rng: random.Random, tries: int = 300):
    """(equation, steps) reaching ``target``, found by random search, or None after ``tries`` draws."""
    for _ in range(tries):
        made = random_expression(numbers, rng)
        if made is not None and made[0] == target:
            return made[1], made[2]
    return None


def _fmt(v: Fraction) -> str:
    return str(v.numerator) if v.denominator == 1 else f"{v.numerator}/{v.denominator}"


class CountdownTask:
    name = "countdown"
    answer_marker = MARKER
    verifier = "countdown"

    def __init__(self, spec: CountdownSpec | None = None):
        self.spec = spec or CountdownSpec()
        if self.spec.count > 4:
            raise UserError("task.count: the built-in countdown generator supports at most 4 numbers")
        rng = random.Random(self.spec.split_seed)
        self._eval: list[Problem] = []
        self._eval_keys: set = set()
        attempts = 0
        while len(self._eval) < self.spec.num_eval:
            attempts += 1
            if attempts > 50 * self.spec.num_eval + 1000:
                raise UserError("task.num_eval: cannot find that many distinct countdown prompts; lower it")
            p = self._draw(rng)
            if self._key(p) not in self._eval_keys:
                self._eval_keys.add(self._key(p))
                self._eval.append(p)

    @staticmethod
    def _key(p: Problem):
        return (tuple(sorted(p.meta["numbers"])), p.meta["target"])

    def _draw(self, rng: random.Random) -> Problem:
        s = self.spec
        while True:
            numbers = [rng.randint(1, s.max_number) for _ in range(s.count)]
            made = random_expression(numbers, rng)
            if made is None:
                continue
            value, expr, steps = made
            if value.denominator == 1 and 1 <= value <= s.max_target:
                p = self.problem(numbers, int(value))
                p.meta["solution"] = (expr, steps)
                return p

    def problem(self, numbers: list[int], target: int) -> Problem:
        prompt = ",".join(map(str, numbers)) + f">{target}:"
        ref = json.dumps({"numbers": list(numbers), "target": target})
        return Problem(id=f"cd:{prompt}", prompt=prompt, reference=ref, meta={"numbers": list(numbers), "target": target})

    def eval_problems(self) -> list[Problem]:
        return list(self._eval)

    def train_problems(self, rng: random.Random, n: int) -> list[Problem]:
        out = []
        while len(out) < n:
            p = self._draw(rng)
            if self._key(p) not in self._eval_keys:
                out.append(p)
        return out

    def incorrect_reference(self, problem: Problem) -> str:
        """The same numbers with a target moved by a nonzero amount chosen from the prompt's hash."""
        h = stable_hash("incorrect:" + problem.id)
        target = problem.meta["target"] + 1 + h % 5
        return json.dumps({"numbers": problem.meta["numbers"], "target": target})

    def trace(self, problem: Problem, rng: random.Random) -> str:
        numbers, target = tuple(problem.meta["numbers"]), problem.meta["target"]
        if rng.random() < self.spec.error_rate:
            expr, steps = self._mistake(numbers, target, rng)
        else:
            # the equation the target was made from, or another one found by a short random search
            found = random_solution(numbers, target, rng, tries=60) if rng.random() < 0.5 else None
            expr, steps = found or problem.meta.get("solution") or rng.choice(solutions(numbers, target))
        work = ",".join(steps) if rng.random() < self.spec.verbose_prob else ""
        return work + MARKER + expr

    @staticmethod
    def _mistake(numbers: tuple[int, ...], target: int, rng: random.Random):
        """A wrong equation: a random expression over the numbers whose value misses the target."""
        while True:
            made = random_expression(numbers, rng)
            if made is not None and made[0] != target:
                return made[1], made[2]
