"""Built-in task `arithmetic`: zero-padded multi-digit addition, `347+285=` -> `...#632`; or, with
``prompt_template`` (e.g. `What is {a} + {b}?`, usually with ``chat_template``), the same sums asked
as a question to an instruct model, whose free-text answer is read by the recipe's ``reward.extract``.

The supervised traces (the warm start's data) come in styles of very different length that are all
correct, so that response length can drift under RL without changing correctness, and many distinct
correct responses exist per prompt:

    direct    #632
    terse     12,13,6#632                      column totals, right to left (carry included)
    verbose   7+5=12,4+8+1=13,3+2+1=6#632       one equation per column

plus up to ``check_max`` redundant checks `=632` before the marker or after the answer, and, with
``ramble_prob`` > 0, filler words `wait,` (1..ramble_max, or geometric with the same mean with
``ramble_length: geometric``) at the start of the response (or, with
``ramble_position: before_answer``, after the work and just before the answer: `12,14,6,wait,#642`;
with ``after_error``, right after the wrong column, or after a random column of a correct trace:
`12,wait,14,6#642`).
A trace carries one deliberate column error (the column total off by 1-3, propagated through the
carries into the answer; in any column, or only the last with ``error_column: last``) with probability
``error_rate``, or ``ramble_error_rate`` when it rambles; with ``error_mark`` (e.g. `?`) the wrong total
is written as a visible guess, `7+5=12,4+8+1=?14,...`:
that makes verbosity predict being wrong, as in real models that ramble when unsure.
"""

from __future__ import annotations

import random

from rlvr_cli.errors import UserError
from rlvr_cli.recipe.schema import ArithmeticTaskSpec as ArithmeticSpec
from rlvr_cli.tasks.base import Problem, stable_hash

MARKER = "#"
FILLER = "wait,"
"""The filler word of the rambling traces (uncertainty talk that changes nothing in the answer)."""


def column_totals(a: int, b: int, digits: int, error_col: int | None = None, delta: int = 0) -> tuple[list[int], int]:
    """Column totals (right to left, carries included) and the resulting answer.

    With ``error_col`` the total of that column is off by ``delta`` (kept within 0..19) and the error
    propagates through the carries, as a person's slip would. 347 + 285 -> ([12, 13, 6], 632).
    """
    totals, carry, out_digits = [], 0, []
    for j in range(digits):
        x = (a // 10**j) % 10 + (b // 10**j) % 10 + carry
        if j == error_col:
            x = min(19, max(0, x + delta))
        totals.append(x)
        out_digits.append(x % 10)
        carry = x // 10
    answer = carry * 10**digits + sum(d * 10**j for j, d in enumerate(out_digits))
    return totals, answer



def held_out_pairs(digits: int, num_eval: int, split_seed: int) -> tuple[list[tuple[int, int]], set[tuple[int, int]]]:
    """The held-out (a, b) pairs of ``digits``-digit addition, drawn once from ``split_seed`` (in draw
    order, and as a set); refuses a split that would leave fewer training prompts than held-out ones."""
    space = 10 ** (2 * digits)
    if num_eval * 2 > space:
        raise UserError(
            f"task.num_eval: {num_eval} held-out prompts leave too few training prompts "
            f"for {digits}-digit addition ({space} prompts in all)"
        )
    rng = random.Random(split_seed)
    pairs: list[tuple[int, int]] = []
    seen: set[tuple[int, int]] = set()
    while len(pairs) < num_eval:
        pair = (rng.randrange(10**digits), rng.randrange(10**digits))
        if pair not in seen:
            seen.add(pair)
            pairs.append(pair)
    return pairs, seen


def training_pairs(rng: random.Random, digits: int, held_out: set[tuple[int, int]], n: int) -> list[tuple[int, int]]:
    """``n`` (a, b) pairs of ``digits``-digit addition drawn from ``rng``, none of them held out."""
    out: list[tuple[int, int]] = []
    while len(out) < n:
        pair = (rng.randrange(10**digits), rng.randrange(10**digits))
        if pair not in held_out:
            out.append(pair)
    return out


def shifted_wrong_sum(problem: Problem) -> str:
    """A fixed wrong sum: the true one shifted by a nonzero amount chosen from the prompt's hash."""
    h = stable_hash("incorrect:" + problem.id)
    delta, gold = 1 + h % 9, int(problem.reference)
    return str(gold + delta if (h >> 8) % 2 or gold - delta < 0 else gold - delta)

class AdditionProblems:
    """The problem sets of a task over `a + b` pairs: the held-out pairs (`_eval_pairs`, `_eval_set`, from
    :func:`held_out_pairs`), training pairs drawn outside them, and the wrong-sum reference of the
    incorrect-label reward. A task that uses it defines `problem(a, b)` and `spec.digits`."""

    def eval_problems(self) -> list[Problem]:
        return [self.problem(a, b) for a, b in self._eval_pairs]

    def train_problems(self, rng: random.Random, n: int) -> list[Problem]:
        return [self.problem(a, b) for a, b in training_pairs(rng, self.spec.digits, self._eval_set, n)]

    def incorrect_reference(self, problem: Problem) -> str:
        return shifted_wrong_sum(problem)


class ArithmeticTask(AdditionProblems):
    name = "arithmetic"
    verifier = "integer"

    def __init__(self, spec: ArithmeticSpec | None = None):
        self.spec = spec or ArithmeticSpec()
        # The raw form's answer follows `#`; a question (prompt_template) is answered in free text,
        # read by the recipe's reward.extract.
        self.answer_marker = MARKER if self.spec.prompt_template is None else ""
        d = self.spec.digits
        self._space = 10 ** (2 * d)
        self._eval_pairs, self._eval_set = held_out_pairs(d, self.spec.num_eval, self.spec.split_seed)
        st = self.spec.styles
        self._styles = ("direct", "terse", "verbose")
        self._style_weights = (st.direct, st.terse, st.verbose)

    # --- prompts ---------------------------------------------------------------------------------
    def problem(self, a: int, b: int) -> Problem:
        d = self.spec.digits
        template = self.spec.prompt_template
        prompt = f"{a:0{d}d}+{b:0{d}d}=" if template is None else template.format(a=a, b=b)
        return Problem(id=f"add{d}:{a:0{d}d}+{b:0{d}d}", prompt=prompt, reference=str(a + b), meta={"a": a, "b": b})

    def _filler_length(self, rng: random.Random) -> int:
        """Filler words of a rambling trace: uniform 1..ramble_max, or geometric with the same mean
        (1 + ramble_max)/2, i.e. one more word with probability q = 1 - 2/(1 + ramble_max) after each,
        so the decision to go on is the same at every word (capped at 4 x ramble_max)."""
        m = self.spec.ramble_max
        if self.spec.ramble_length == "uniform":
            return rng.randint(1, m)
        q, k = 1 - 2 / (1 + m), 1
        while k < 4 * m and rng.random() < q:
            k += 1
        return k

    def _mark(self, col: int, error_col: int | None) -> str:
        """The error mark (``spec.error_mark``, e.g. `?`) before the wrong column total, else nothing."""
        return self.spec.error_mark if col == error_col else ""

    def filler_words(self, response: str) -> int:
        """How many filler words `wait,` the response has before its answer marker (all of it without one)."""
        return response.split(MARKER, 1)[0].count(FILLER)

    # --- supervised traces -----------------------------------------------------------------------
    def trace(self, problem: Problem, rng: random.Random) -> str:
        s, d = self.spec, self.spec.digits
        if s.prompt_template is not None:
            raise UserError("task.prompt_template: supervised traces exist only for the raw `347+285=` form")
        a, b = problem.meta["a"], problem.meta["b"]
        rambles = self._filler_length(rng) if rng.random() < s.ramble_prob else 0
        error_rate = s.ramble_error_rate if rambles else s.error_rate
        error_col, delta = None, 0
        if rng.random() < error_rate:
            error_col = rng.randrange(d) if s.error_column == "any" else d - 1
            true_totals, _ = column_totals(a, b, d)
            choices = [x for x in (-3, -2, -1, 1, 2, 3) if 0 <= true_totals[error_col] + x <= 19]
            delta = rng.choice(choices)
        totals, answer = column_totals(a, b, d, error_col, delta)
        style = rng.choices(self._styles, weights=self._style_weights)[0]
        if style == "direct":
            parts = []
        elif style == "terse":
            parts = [self._mark(j, error_col) + str(t) for j, t in enumerate(totals)]
        else:
            parts, carry = [], 0
            for j, t in enumerate(totals):
                da, db = (a // 10**j) % 10, (b // 10**j) % 10
                lhs = f"{da}+{db}" + (f"+{carry}" if carry else "")
                parts.append(f"{lhs}={self._mark(j, error_col)}{t}")
                carry = t // 10
        work = ",".join(parts)
        checks = f"={answer}" * rng.randint(0, s.check_max)
        position = s.check_position if s.check_position != "both" else rng.choice(("before", "after"))
        before, after = (checks, "") if position == "before" else ("", checks)
        filler = FILLER * rambles
        if s.ramble_position == "after_error" and filler and parts:
            # right after the wrong column (a random one in a correct trace): `12,wait,wait,14,6#642`
            col = error_col if error_col is not None else rng.randrange(d)
            head, tail = ",".join(parts[: col + 1]), ",".join(parts[col + 1 :])
            return head + "," + filler + tail + before + MARKER + str(answer) + after
        if s.ramble_position in ("before_answer", "after_error"):
            return work + ("," if work and filler else "") + filler + before + MARKER + str(answer) + after
        return filler + work + before + MARKER + str(answer) + after
