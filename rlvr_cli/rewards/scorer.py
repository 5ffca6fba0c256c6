"""The reward of a recipe: a weighted sum of named terms, plus the true verifier's verdict beside it.

    r_i = sum_k weight_k * term_k(o_i)

Terms (``reward.terms`` in the recipe) are the entries of the reward-term registry
(:mod:`rlvr_cli.recipe.reward_terms`): each says what it needs checked (the response against the gold
answer by its verifier, or against a fixed wrong label) and computes its value from that (the scorer
hands it :class:`_Inputs`); a ``function`` term, the user's own code, is called once per prompt's group
in the worker pool (:mod:`rlvr_cli.rewards.function`). Each term's value before weighting is reported in
``Score.terms``, keyed by its type, or ``type#i`` (i = its position in ``reward.terms``) when a type
appears twice.

Whatever drives training, ``Score.correct``/``outcome``/``answer`` come from the task's TRUE
verifier, so accuracy is always measured. A response cut at the length limit (``truncated``) never gave
its final answer: with ``reward.truncated_is_incorrect`` (default) its true outcome is ``incorrect`` and
every answer-based term is 0 (a ``random`` term still draws, and a ``function`` sees it as TRL would).

Speed: identical (verifier, response, reference) checks in a batch are run once; the integer and
countdown verifiers, ``format`` and the spurious terms run in-process (bounded by construction, a few
microseconds each), and so do math checks that need no sympy (no answer, plain numbers on both sides);
other math checks and all code checks go to the worker pool with the hard limit ``timeout_s`` (code:
the program's own limit plus a margin for start-up and clean-up), started on first need.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rlvr_cli.errors import UserError
from rlvr_cli.rewards import outcome as oc
from rlvr_cli.rewards.format_reward import format_reward
from rlvr_cli.rewards.function import PASSED, Call, FunctionFailed, to_call, values_from
from rlvr_cli.checked_import import check_importable
from rlvr_cli.rewards.outcome import Outcome
from rlvr_cli.rewards.pool import Check, VerifierPool, run_checks
from rlvr_cli.rewards.registry import get_verifier, options_for
from rlvr_cli.rewards.sandbox import STARTUP_ALLOWANCE_S
from rlvr_cli.rewards.spurious import format_only_reward, random_reward
from rlvr_cli.tasks import chat_messages
from rlvr_cli.tasks.base import Problem

if TYPE_CHECKING:
    from rlvr_cli.recipe.schema import RewardSpec

CODE_CLEANUP_MARGIN_S = 2.0
"""Added to a code check's limit beyond the program's own: interpreter start-up and killing the run."""


@dataclass
class ScoreItem:
    problem: Problem
    response: str
    sample_index: int
    """Which sample of this prompt (0..G-1)."""
    step: int = 0
    """Training step (part of the sample identity for `random`)."""
    truncated: bool = False
    """The response hit the length limit without an end of sequence."""
    completion_ids: list[int] | None = None
    """The response's token ids (TRL's ``completion_ids`` for a ``function`` term; None where unknown)."""
    trl_global_step: int | None = None
    """TRL's ``trainer_state.global_step`` when scored under TRL (the bridge); None: ``step - 1``, as TRL
    counts a run's first step 0."""


@dataclass
class Score:
    reward: float
    """Weighted sum of the recipe's reward terms."""
    correct: bool
    """From the task's TRUE verifier, whatever drives training."""
    outcome: str
    """The true verifier's outcome."""
    answer: str | None
    """The true verifier's canonical answer (the maj@k key)."""
    terms: dict[str, float] = field(default_factory=dict)
    """Value of each term before weighting, keyed by term type (`type#i` if a type repeats)."""


class _LazyPool:
    """Stands in for the pool and creates it only if a check really needs it."""

    def __init__(self, get):
        self._get = get

    def run(self, checks):
        return self._get().run(checks)


def term_keys(types: list[str]) -> list[str]:
    """Keys of ``Score.terms``: the type, or ``type#i`` (i = position) for a type that appears twice."""
    counts = Counter(types)
    return [t if counts[t] == 1 else f"{t}#{i}" for i, t in enumerate(types)]


def term_metric_names(terms) -> list[str]:
    """``rewards/<name>/mean`` per term of ``reward.terms`` (TRL's metric name): ``<name>`` is a function
    term's function name (TRL names it after the function), a built-in term's type, and ``name#i``
    (i = its position) where two terms share a name."""
    return [f"rewards/{key}/mean" for key in term_keys([t.name() for t in terms])]


def check_functions(reward_spec: RewardSpec, task_spec) -> None:
    """``UserError`` when a ``function`` term of ``reward_spec`` cannot be imported (in a child process, under
    its limits) or called with rlvr's keywords and the data's columns (the task is built to know them); no
    model and no worker. What ``rlvr recipes validate`` checks for the user's reward code."""
    from rlvr_cli.tasks import build_task

    if any(t.user_code for t in reward_spec.terms):
        Scorer(reward_spec, build_task(task_spec)).close()


class Scorer:
    """Scores responses with a recipe's ``RewardSpec`` for a task; owns the verifier worker pool.

    Use as a context manager (or call ``close``); workers start on the first math, code or function check.
    ``score`` is thread-safe (one batch at a time) and never raises for anything a model can write; a
    ``function`` term that fails raises ``UserError`` (the user's code is wrong, not the model).
    A ``function`` term's module is imported here at once, in a child process under a time and memory limit
    (:mod:`rlvr_cli.checked_import`), so that a missing module, a module that hangs or exits at
    import, or a signature that cannot take rlvr's keywords is an error before any sampling.
    """

    def __init__(self, spec: RewardSpec, task, seed: int = 0):
        self.spec, self.task, self.seed = spec, task, seed
        self.true_verifier = task.verifier
        get_verifier(self.true_verifier)
        self.marker = task.answer_marker
        self.keys = term_keys([t.type for t in spec.terms])
        self.options = {
            "marker": self.marker,
            "extract": tuple(spec.extract),
            "rel_tol": spec.math_rel_tol,
            **spec.code.model_dump(),
        }
        self._pool: VerifierPool | None = None
        self._lock = threading.Lock()
        spec_of_task = getattr(task, "spec", None)
        self.chat = bool(getattr(spec_of_task, "chat_template", False))
        self.columns = [c for c in getattr(task, "column_names", None) or getattr(spec_of_task, "reward_columns", None) or []
                        if c not in PASSED]
        """The dataset's columns a ``function`` term gets under their own names (TRL passes every column)."""
        self.functions = [(i, t) for i, t in enumerate(spec.terms) if t.user_code]
        refs = list(dict.fromkeys(t.function for _, t in self.functions))
        problems = check_importable(refs, set(PASSED) | set(self.columns), spec.worker_memory_mb)
        for i, term in self.functions:
            if term.function in problems:
                raise UserError(f"reward.terms[{i}].function: {problems[term.function]}")

    # --- lifecycle ---------------------------------------------------------------------------------
    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _get_pool(self) -> VerifierPool:
        if self._pool is None:
            used = {t.verifier(self.true_verifier) for t in self.spec.terms if t.needs is not None}
            used.add(self.true_verifier)
            preload = tuple(sorted(v for v in used if not get_verifier(v).IN_PROCESS_SAFE))  # warmed up in each worker
            code_warm = {"isolation": self.spec.code.isolation, "python": self.spec.code.python}
            functions = tuple(sorted({t.function for _, t in self.functions}))
            self._pool = VerifierPool(self.spec.workers, self.spec.worker_memory_mb, preload, code_warm, functions)
        return self._pool

    # --- scoring -----------------------------------------------------------------------------------
    def _check(self, name: str, response: str, reference: str) -> Check:
        timeout = self.spec.timeout_s
        if name == "code":
            timeout = max(timeout, self.spec.code.timeout_s + STARTUP_ALLOWANCE_S + CODE_CLEANUP_MARGIN_S)
        return Check(name, response, reference, options_for(name, self.options), timeout)

    def score(self, items: list[ScoreItem], functions: bool = True) -> list[Score]:
        """One Score per item, in order (see the module docstring). ``functions=False`` leaves the user's
        ``function`` terms out of ``terms`` and ``reward`` (an evaluation, which reads only correctness)."""
        with self._lock:
            return self._score(items, functions)

    def _score(self, items: list[ScoreItem], functions: bool = True) -> list[Score]:
        checks: list[Check] = []
        index: dict[tuple[str, str, str], int] = {}

        def need(name: str, response: str, reference: str) -> int:
            key = (name, response, reference)
            if key not in index:
                index[key] = len(checks)
                checks.append(self._check(name, response, reference))
            return index[key]

        plans = []
        for item in items:
            skip = item.truncated and self.spec.truncated_is_incorrect
            response, ref = item.response, item.problem.reference
            plan = {"true": None if skip else need(self.true_verifier, response, ref), "terms": []}
            for term in self.spec.terms:  # what each term needs checked (rlvr_cli/recipe/reward_terms.py)
                slot = None
                if skip and term.answer_based:
                    pass
                elif term.needs == "verdict":
                    slot = need(term.verifier(self.true_verifier), response, ref)
                elif term.needs == "wrong_label":
                    wrong = self._incorrect_reference(item)
                    slot = None if wrong is None else need(term.verifier(self.true_verifier), response, wrong)
                plan["terms"].append(slot)
            plans.append(plan)

        outcomes = run_checks(checks, _LazyPool(self._get_pool))
        called = self._function_values(items) if functions else {i: None for i, _ in self.functions}
        return [self._assemble(item, plan, outcomes, {i: v and v[k] for i, v in called.items()})
                for k, (item, plan) in enumerate(zip(items, plans))]

    # --- the user's functions ------------------------------------------------------------------------
    def _call(self, group: list[ScoreItem]) -> Call:
        """One prompt's group as TRL's keyword arguments (conversational when the task uses a chat template)."""
        p, n = group[0].problem, len(group)
        if self.chat:
            prompt = chat_messages(self.task.spec, p)
            completions = [[{"role": "assistant", "content": it.response}] for it in group]
        else:
            prompt, completions = p.prompt, [it.response for it in group]
        row = p.meta.get("columns") or {}
        columns = {**{c: [row.get(c)] * n for c in self.columns}, "answer": [p.reference] * n}
        first = group[0]
        global_step = first.trl_global_step if first.trl_global_step is not None else max(0, first.step - 1)
        return Call([prompt] * n, completions, [it.completion_ids for it in group], columns, global_step)

    def _function_values(self, items: list[ScoreItem]) -> dict[int, list[float]]:
        """Each ``function`` term's value per item: one call per prompt's group, all in the worker pool.
        Raises ``UserError`` naming the function and the prompt when a call fails (never a silent 0)."""
        if not self.functions or not items:
            return {}
        groups: dict[tuple[str, int], list[int]] = {}
        for k, item in enumerate(items):
            groups.setdefault((item.problem.id, item.step), []).append(k)
        jobs = [(i, term, ks) for i, term in self.functions for ks in groups.values()]
        timeout = self.spec.timeout_s
        calls = [to_call(term.function, self._call([items[k] for k in ks]), timeout) for i, term, ks in jobs]
        values: dict[int, list[float]] = {i: [0.0] * len(items) for i, _ in self.functions}
        problems = []
        skipped = 0
        for (i, term, ks), out in zip(jobs, self._get_pool().run(calls, stop_after_failure=True)):
            if out.skipped:  # not run: another call failed first (one time limit to the report, not one per call)
                skipped += 1
                continue
            try:
                got = values_from(out, len(ks), timeout)
            except FunctionFailed as e:
                p = items[ks[0]].problem
                problems.append(f"reward.terms[{i}].function {term.function}: {e}; on the prompt {p.prompt[:200]!r} "
                                f"(id {p.id}, step {items[ks[0]].step})")
                continue
            for k, v in zip(ks, got):
                values[i][k] = v
        if problems:
            more = [f"... and {len(problems) - 1} more calls of this step failed"] if len(problems) > 1 else []
            raise UserError(problems[:1] + more + ([f"({skipped} more calls of this step were not made)"] if skipped else []))
        return values

    def _incorrect_reference(self, item: ScoreItem) -> str | None:
        try:
            return self.task.incorrect_reference(item.problem)
        except Exception:  # noqa: BLE001 - a task that cannot make a wrong label gives the term 0
            return None

    def _assemble(self, item: ScoreItem, plan: dict, outcomes: list[Outcome], called: dict[int, float | None]) -> Score:
        """The item's Score; ``called`` holds each function term's value (None: not called, left out)."""
        skip = item.truncated and self.spec.truncated_is_incorrect
        true = oc.incorrect(None, "truncated: no final answer") if skip else outcomes[plan["true"]]
        values: dict[str, float] = {}
        reward = 0.0
        for i, (term, key, slot) in enumerate(zip(self.spec.terms, self.keys, plan["terms"])):
            if i in called and called[i] is None:
                continue
            if skip and term.answer_based:
                value = 0.0
            else:
                value = term.value(_Inputs(self, i, item, None if slot is None else outcomes[slot], called.get(i)))
            values[key] = value
            reward += term.weight * value
        return Score(reward=reward, correct=true.outcome == "correct", outcome=true.outcome, answer=true.answer, terms=values)


class _Inputs:
    """What the scorer hands term ``i`` for one response (rlvr_cli.recipe.reward_terms.TermInputs)."""

    def __init__(self, scorer: Scorer, i: int, item: ScoreItem, verdict: Outcome | None, function_value: float | None):
        self.scorer, self.i, self.item = scorer, i, item
        self.verdict, self.function_value = verdict, function_value

    def format(self, think: bool) -> float:
        s = self.scorer
        try:
            return format_reward(self.item.response, s.true_verifier, s.marker, think, s.spec.extract)
        except Exception:  # noqa: BLE001 - never raise for model output; a broken extractor scores 0
            return 0.0

    def format_only(self) -> float:
        try:
            return format_only_reward(self.item.response, self.scorer.true_verifier, self.scorer.options)
        except Exception:  # noqa: BLE001 - as format
            return 0.0

    def random(self, p: float) -> float:
        it = self.item
        return random_reward(p, self.scorer.seed, self.i, it.step, it.problem.id, it.sample_index)
