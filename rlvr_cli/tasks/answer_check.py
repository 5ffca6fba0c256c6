"""Built-in task `answer_check`: addition answered first, then checked, `347+285=` -> `####632` ...

The base of the length-inflation experiment. A response states the sum at once, on the line after
GSM8K's `####` (the verifier reads that line), then re-derives it column by column on the next line and
compares, then may ramble before EOS:

    ####642
    7+5=12,4+8+1=13,3+2+1=6=632?no,wait,wait,wait      (check: verbose)
    ####632
    12,13,6=632?ok                                       (check: terse)

Why this shape (docs/length.md): GRPO's 1/|o| favours longer filler only in a state where the
policy can tell it is probably wrong, and only while such states keep being visited. Here the answer
comes before any work, so a wrong answer is a limit of the model's skill (it must add in one go),
not a marked guess it can stop making; and the check after it is the easy column work, so the model
can see after the fact whether its answer was right, and its filler can depend on that.

The supervised traces carry a wrong answer with probability ``answer_error_rate`` (one column total off
by 1-3, propagated through the carries), so that `?no` has examples; the check is always right. The
filler `,wait` follows `?no` with probability ``ramble_given_wrong`` and `?ok` with
``ramble_given_right``, its length geometric with mean ``ramble_mean`` words (capped at 4x the mean).
With ``check_marks`` the answer is zero-padded to digits+1 (every digit at a fixed place) and each
check column whose digit disagrees with the answer's is marked `!` (`####0642` ... `4+8+1=13!,...`):
the verdict then needs no comparison of two numbers far apart, which the 0.39M model did not learn
(its verdicts without marks did not depend on its own correctness; with them they do).
Score it with ``reward.extract: [gsm8k]``: without `####` the chain's `last_number` would read the
check's own sum.
"""

from __future__ import annotations

import random

from rlvr_cli.recipe.schema import AnswerCheckTaskSpec
from rlvr_cli.tasks.arithmetic import AdditionProblems, column_totals, held_out_pairs
from rlvr_cli.tasks.base import Problem

ANSWER_SIGN = "####"
"""Precedes the answer (GSM8K's sign: the `integer` verifier's `gsm8k` extraction reads the line after it)."""
FILLER = ",wait"
"""One filler word after the check (uncertainty talk that changes nothing in the answer)."""
CHECK_OK, CHECK_NO = "?ok", "?no"


class AnswerCheckTask(AdditionProblems):
    name = "answer_check"
    answer_marker = ""
    verifier = "integer"

    def __init__(self, spec: AnswerCheckTaskSpec | None = None):
        self.spec = spec or AnswerCheckTaskSpec()
        self._eval_pairs, self._eval_set = held_out_pairs(self.spec.digits, self.spec.num_eval, self.spec.split_seed)

    # --- prompts ---------------------------------------------------------------------------------
    def problem(self, a: int, b: int) -> Problem:
        d = self.spec.digits
        return Problem(id=f"check{d}:{a:0{d}d}+{b:0{d}d}", prompt=f"{a:0{d}d}+{b:0{d}d}=", reference=str(a + b), meta={"a": a, "b": b})

    # --- reading responses -----------------------------------------------------------------------
    def filler_words(self, response: str) -> int:
        """Filler words `,wait` after the check's verdict (`?ok` / `?no`); 0 without a verdict."""
        i = max(response.rfind(CHECK_OK), response.rfind(CHECK_NO))
        return 0 if i < 0 else response[i:].count(FILLER)

    @staticmethod
    def verdict(response: str) -> str | None:
        """The check's verdict, `ok` or `no` (the last one written), or None without one."""
        i = max(response.rfind(CHECK_OK), response.rfind(CHECK_NO))
        return None if i < 0 else response[i + 1 : i + 3]

    # --- supervised traces -----------------------------------------------------------------------
    def answer_text(self, answer: int) -> str:
        """The answer as written: zero-padded to digits+1 with ``check_marks`` (each digit at a fixed place)."""
        return f"{answer:0{self.spec.digits + 1}d}" if self.spec.check_marks else str(answer)

    def check_text(self, a: int, b: int, answer: int | None = None) -> str:
        """The column work that re-derives a + b (verbose `7+5=12,...` or terse `12,13,6`) and `=sum`.

        With ``check_marks`` a column whose digit disagrees with ``answer``'s is marked `!` (the last
        column also when its carry-out disagrees with the answer's leading digit), and the sum is
        zero-padded like the answer: 347+285 answered 642 -> `7+5=12,4+8+1=13!,3+2+1=6=0632`.
        """
        d, marks = self.spec.digits, self.spec.check_marks
        totals, total = column_totals(a, b, d)
        answer = total if answer is None else answer

        def mark(j: int, t: int) -> str:
            wrong = t % 10 != (answer // 10**j) % 10 or (j == d - 1 and t // 10 != answer // 10**d)
            return "!" if marks and wrong else ""

        if self.spec.check == "terse":
            parts = [f"{t}{mark(j, t)}" for j, t in enumerate(totals)]
        else:
            parts, carry = [], 0
            for j, t in enumerate(totals):
                da, db = (a // 10**j) % 10, (b // 10**j) % 10
                parts.append(f"{da}+{db}" + (f"+{carry}" if carry else "") + f"={t}{mark(j, t)}")
                carry = t // 10
        return ",".join(parts) + f"={self.answer_text(total)}"

    def _filler_length(self, rng: random.Random) -> int:
        """Geometric with mean m = ramble_mean: one more word with probability 1 - 1/m after each."""
        m = self.spec.ramble_mean
        k = 1
        while k < 4 * m and rng.random() < 1 - 1 / m:
            k += 1
        return k

    def trace(self, problem: Problem, rng: random.Random) -> str:
        s, d = self.spec, self.spec.digits
        a, b = problem.meta["a"], problem.meta["b"]
        answer = a + b
        if rng.random() < s.answer_error_rate:
            col = rng.randrange(d)
            true_totals, _ = column_totals(a, b, d)
            delta = rng.choice([x for x in (-3, -2, -1, 1, 2, 3) if 0 <= true_totals[col] + x <= 19])
            _, answer = column_totals(a, b, d, col, delta)
        right = answer == a + b
        verdict = CHECK_OK if right else CHECK_NO
        rambles = rng.random() < (s.ramble_given_right if right else s.ramble_given_wrong)
        filler = FILLER * self._filler_length(rng) if rambles else ""
        return f"{ANSWER_SIGN}{self.answer_text(answer)}\n{self.check_text(a, b, answer)}{verdict}{filler}"
