"""`rlvr doctor`'s checks of the data and of the true reward (the rest is rlvr_cli/evaluation/doctor.py).

Every row, not a sample of draws: a task read from a file (:class:`~rlvr_cli.tasks.dataset.DatasetTask`)
serves each of its rows, training and held-out, with where it came from (``file:line: row i``), and each
check below names the first rows that fail it. A generated task (arithmetic, countdown) has no rows to
list: its held-out prompts and the prompts the doctor samples and more training draws (``rlvr_cli.evaluation.doctor.LENGTH_SAMPLE``) stand for it.

- prompts longer than the context: prompt tokens + ``rollout.max_new_tokens`` above the model's positions
  (:func:`too_long`, the check `rlvr train` makes before step 1 of a file task and refuses on, exit 2): `FAIL`.
- gold answers the verifier cannot read: every response to the row is then an ``error`` scored 0, and the
  run says so nowhere; `FAIL` (see :func:`rlvr_cli.rewards.references.gold_problem`).
- characters the tokenizer does not know: each becomes the one unknown token (builtin:tiny knows only
  the characters docs/tasks.md lists; any uppercase letter is unknown), so the model reads prompts that
  differ there as the same; a gold answer holding one cannot be written at all. `warn`.
- the true reward cannot be learned: no prompt solved in any sample of the base model. The verifier's
  reward is then 0 for every response, its group advantage is 0, and RL (which reweights what the model
  already samples) has nothing to raise: accuracy stays 0 whatever other terms (format, a function)
  do. `FAIL` with its own message; not when every response was cut (that is its own, earlier `FAIL`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from rlvr_cli.keyed_random import stream_key
from rlvr_cli.rewards.references import gold_problem
from rlvr_cli.tasks import encode_prompt
from rlvr_cli.tasks.base import Problem

NAMED = 3
"""Rows a finding names (then a count of the others)."""


class Verdict(NamedTuple):
    """One check's result, as the doctor's ``Finding`` takes it: ``Finding(*verdict)``."""

    check: str
    value: str
    verdict: str
    detail: str = ""


@dataclass(frozen=True)
class Row:
    where: str
    """``file:line: row i`` for a file's row; ``training draw k`` / ``held-out prompt k`` for a generated task."""
    problem: Problem


def task_rows(task, seed: int, draws: int, sampled: list[Problem]) -> tuple[list[Row], bool]:
    """(rows to check, whether they are every row of the task): a file task's every row, training and
    held-out, with its place in the file; a generated task's ``sampled`` prompts (step 1's), its held-out
    prompts and ``draws`` more training draws."""
    own = getattr(task, "located_rows", None)
    if callable(own):
        return [Row(w, p) for w, p in own()], True
    extra = task.train_problems(stream_key(seed, "doctor", "lengths").rng(), draws)
    rows = [Row(f"step-1 prompt {i}", p) for i, p in enumerate(sampled)]
    rows += [Row(f"held-out prompt {i}", p) for i, p in enumerate(task.eval_problems())]
    return rows + [Row(f"training draw {i}", p) for i, p in enumerate(extra)], False


def _named(rows: list[str]) -> str:
    more = f" and {len(rows) - NAMED} more" if len(rows) > NAMED else ""
    return "; ".join(rows[:NAMED]) + more


def _scope(n: int, every: bool) -> str:
    return f"{n} rows (every row)" if every else f"{n} prompts (held-out + training draws)"


def prompt_lengths(rows: list[Row], task, tok) -> list[int]:
    """Each row's prompt in tokens, as the sampler encodes it (a chat template applied)."""
    return [len(encode_prompt(tok, task, r.problem)) for r in rows]


def too_long(rows: list[Row], lengths: list[int], limit: int, max_new: int) -> str | None:
    """The rows whose prompt tokens + ``max_new`` exceed the model's ``limit`` positions, named (the first
    NAMED, then a count) as ``prompt + rollout.max_new_tokens (N) exceeds the model's L positions at ...``;
    None when every row fits. The one check `rlvr doctor` reports and `rlvr train` refuses to start on."""
    over = [f"{r.where} ({n} tokens)" for r, n in zip(rows, lengths) if n > limit - max_new]
    if not over:
        return None
    return f"prompt + rollout.max_new_tokens ({max_new}) exceeds the model's {limit} positions at {_named(over)}"


def context_finding(rows: list[Row], every: bool, task, tok, limit, max_new: int):
    """Rows whose prompt tokens + ``max_new`` exceed the model's ``limit`` positions."""
    check = "prompts longer than the context"
    if not isinstance(limit, int):
        return Verdict(check, "the model states no position limit", "info")
    if not rows:
        return Verdict(check, "no rows", "info")
    lengths = prompt_lengths(rows, task, tok)
    said = too_long(rows, lengths, limit, max_new)
    if said is None:
        return Verdict(check, f"0 of {_scope(len(rows), every)}; longest {max(lengths)} + {max_new} new <= {limit} tokens", "ok")
    over = sum(n > limit - max_new for n in lengths)
    return Verdict(check, f"{over} of {_scope(len(rows), every)}", "FAIL",
                   f"{said}: training refuses to start (exit 2); shorten those prompts or rollout.max_new_tokens")


def gold_finding(rows: list[Row], every: bool, verifier: str):
    """Rows whose gold answer the task's verifier cannot read: each of their responses would be an
    ``error``, scored 0."""
    check = "gold answers the verifier can read"
    bad = [(r, why) for r in rows if (why := gold_problem(verifier, r.problem.reference))]
    if not bad:
        return Verdict(check, f"all of {_scope(len(rows), every)} (verifier {verifier})", "ok")
    named = _named([f"{r.where}: {why}" for r, why in bad])
    return Verdict(check, f"{len(bad)} of {_scope(len(rows), every)} unreadable (verifier {verifier})", "FAIL",
                   f"every response to such a row is an `error` scored 0, whatever it says: {named}")


def unknown_characters(tok, texts) -> list[str]:
    """The characters of ``texts`` that ``tok`` maps to its unknown token, in order of first appearance."""
    unk = getattr(tok, "unk_token_id", None)
    if unk is None:
        return []
    seen: dict[str, None] = {}
    for t in texts:
        seen.update(dict.fromkeys(t))
    return [c for c in seen if unk in tok(c, add_special_tokens=False)["input_ids"]]


def vocabulary_finding(rows: list[Row], every: bool, tok, model: str):
    """Characters of the prompts or gold answers that the tokenizer maps to its unknown token."""
    check = "characters the tokenizer knows"
    texts = [_text(r.problem) for r in rows]
    unknown = unknown_characters(tok, texts + [r.problem.reference for r in rows])
    if not unknown:
        return Verdict(check, f"all, in {_scope(len(rows), every)}", "ok")
    u = set(unknown)
    in_prompt = [r for r, t in zip(rows, texts) if u & set(t)]
    in_gold = [r for r in rows if u & set(r.problem.reference)]
    shown = " ".join(repr(c) for c in unknown[:20]) + (f" and {len(unknown) - 20} more" if len(unknown) > 20 else "")
    first = [f"{r.where}" for r in (in_prompt or in_gold)]
    detail = (f"{model}'s tokenizer reads {shown} as its unknown token, one token for all of them, so prompts that "
              f"differ only there look the same to the model; in {len(in_prompt)} prompts and {len(in_gold)} gold answers "
              f"(first: {_named(first)})")
    if in_gold:
        detail += "; a gold answer holding one can never be written, so those rows are never answered correctly"
    if model.startswith("builtin:"):
        detail += " (the built-in models know only the characters listed in docs/tasks.md)"
    return Verdict(check, f"{len(unknown)} unknown: {shown}", "warn", detail)


def _text(p: Problem) -> str:
    messages = p.meta.get("messages")
    return "\n".join(m["content"] for m in messages) if messages else p.prompt


def learnable_finding(solved: int, prompts: int, responses: int, g: int):
    """The true reward can be learned only if the base model solves some prompt in some sample."""
    check = "true reward learnable"
    if solved:
        return Verdict(check, f"{solved} of {prompts} prompts solved at least once", "ok")
    return Verdict(check, f"no prompt solved in {responses} samples ({prompts} prompts x {g})", "FAIL",
                   "the base model answered no prompt correctly in any sample, so the task's verifier (the true "
                   "reward) scores every response 0 and gives no group an advantage: RL reweights what the model "
                   "already samples and cannot raise accuracy from 0, whatever other terms (format, a function) do. "
                   "Use a model that solves some prompts (docs/own_task.md: what the built-in model can learn), easier "
                   "prompts, or more samples (--prompts, rollout.group_size) if a few solves are expected")
