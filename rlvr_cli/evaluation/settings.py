"""The evaluation protocol: its defaults (a run's ``eval`` section, or EvalSpec's), flag overrides, checks.

A run directory is evaluated with its own recipe's settings unless a flag says otherwise, so
``rlvr eval RUN`` reproduces the run's ``eval/step_N.json``. Settings that differ from the run's
(a flag override, a budget, greedy) make a different protocol, named by :func:`protocol_label`; its
files go to ``eval/LABEL/`` and never over the training evaluations.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from rlvr_cli.errors import UserError
from rlvr_cli.evaluation.decoding import ANSWER_TOKENS, itc_label

FLAGS = {
    "n": "--n",
    "num_prompts": "--num-prompts",
    "temperature": "--temperature",
    "top_p": "--top-p",
    "max_new_tokens": "--max-new-tokens",
    "seed": "--seed",
    "pass_at_k": "--pass-at-k",
    "maj_at_k": "--maj-at-k",
}
"""Sampling settings a flag can override, and the flag that names each in error messages."""


def powers_of_two(n: int) -> list[int]:
    """1, 2, 4, ... up to n (the default k values)."""
    return [2**i for i in range(n.bit_length()) if 2**i <= n]


@dataclass(frozen=True)
class EvalSettings:
    n: int = 16
    num_prompts: int = 64
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 64
    seed: int = 1234
    pass_at_k: list[int] = field(default_factory=lambda: powers_of_two(16))
    maj_at_k: list[int] = field(default_factory=lambda: powers_of_two(16))
    greedy: bool = False
    budget: int | None = None
    min_think: int | None = None
    answer_tokens: int = ANSWER_TOKENS
    turns: Any = field(default=None, compare=False)
    """A multi-turn run's :class:`~rlvr_cli.sampling.rounds.Turns` (:func:`.decoding.environment_turns`): its
    responses are trajectories with the tool, as in training; None: single-turn."""

    @classmethod
    def from_recipe(cls, recipe) -> EvalSettings:
        """A run's own protocol: its recipe's (fully resolved) ``eval`` section."""
        e = recipe.eval
        return cls(
            e.n, e.num_prompts, e.temperature, e.top_p, e.max_new_tokens, e.seed, list(e.pass_at_k), list(e.maj_at_k)
        )


def with_overrides(base: EvalSettings, marker: str, **flags) -> EvalSettings:
    """``base`` with the flags that were given (None = not given), checked; UserError names each bad flag.

    k values inherit from ``base`` only while n does: another n defaults them to powers of two, and
    maj@k defaults to the pass@k values whenever those changed.
    """
    given = {k: v for k, v in flags.items() if v is not None}
    s = replace(base, **given)
    new_n = s.n != base.n
    if new_n and "pass_at_k" not in given:
        s = replace(s, pass_at_k=powers_of_two(s.n))
    if "maj_at_k" not in given and (new_n or "pass_at_k" in given):
        s = replace(s, maj_at_k=list(s.pass_at_k))
    problems = _check(s, marker)
    if problems:
        raise UserError(problems)
    return s


def _check(s: EvalSettings, marker: str) -> list[str]:
    from rlvr_cli.recipe.schema import MAX_EVAL_RESPONSES

    out = []
    if s.n * s.num_prompts > MAX_EVAL_RESPONSES:
        out.append(f"--n {s.n} x --num-prompts {s.num_prompts} = {s.n * s.num_prompts:.3g} responses; at most "
                   f"{MAX_EVAL_RESPONSES:.0e} (each is kept until the record is written)")
    for name in ("pass_at_k", "maj_at_k"):
        bad = [k for k in getattr(s, name) if k > s.n]
        if bad:
            out.append(f"{FLAGS[name]} {','.join(map(str, bad))}: k must be <= n ({s.n}); raise --n or drop these k")
    for flag, value in (("--budget", s.budget), ("--min-think", s.min_think)):
        if value is not None and not marker:
            out.append(f"{flag}: the task has no answer marker, so thinking has no end to force or delay")
    if s.min_think is not None:
        if s.budget is not None and s.min_think > s.budget:
            out.append(f"--min-think {s.min_think}: must be <= --budget ({s.budget})")
        elif s.budget is None and s.min_think >= s.max_new_tokens:
            out.append(
                f"--min-think {s.min_think}: must be below --max-new-tokens ({s.max_new_tokens}), "
                "or no response could finish"
            )
    return out


def _fmt(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def protocol_label(run_default: EvalSettings, s: EvalSettings, task_name: str | None = None) -> str | None:
    """Name of the protocol ``s`` relative to a run's own: `n_64-temperature_0.6-budget_32`; None if the same.

    ``task_name`` is given when the task differs from the run's.
    """
    parts = [f"task_{task_name}"] if task_name else []
    parts += [f"{name}_{_fmt(getattr(s, name))}" for name in FLAGS if getattr(s, name) != getattr(run_default, name)]
    itc = itc_label(s.budget, s.min_think, s.greedy, s.answer_tokens)
    return "-".join(parts + ([itc] if itc else [])) or None
