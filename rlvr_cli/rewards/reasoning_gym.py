"""Verifier `reasoning_gym`: a reasoning-gym generator's own scorer, mapped to rlvr's outcomes.

The reference is JSON written by the `reasoning_gym` task (rlvr_cli/tasks/reasoning_gym.py):
``{"dataset": NAME, "config": {...}, "entry": {question, answer, metadata}, "threshold": t}``. The
answer is what the response puts in ``<answer>...</answer>`` (reasoning-gym's own convention and
extractor, the last such tag). Outcomes:

- no ``<answer>`` tag: ``unparseable``;
- ``score_answer(answer, entry) >= threshold`` (default 1.0): ``correct``, else ``incorrect``
  (reasoning-gym scorers give partial credit, e.g. 0.05 for a well-formed wrong countdown expression;
  the score is kept in the outcome's detail);
- the scorer raising: ``error``; running past the pool's limit: ``timeout`` (the pool kills it).

Model text is never run as code. Some scorers read the answer (or, for two, the reference) with
Python's ``eval`` or sympy's ``parse_expr`` (an ``eval`` after a token rewrite): an answer such as
``__import__('os').system(...)`` would run in the verifier worker, as the trainer's user, and could
write files, read secrets, or patch the scorer so that later answers score 1. Before the first check,
``install_safe_readers`` puts the readers of ``rlvr_cli/rewards/safe_eval.py`` in place of those calls,
in the scorers' own modules (``EVALUATING``): a literal reader for ``eval``, an arithmetic-only gate in
front of ``parse_expr``. An answer they refuse scores what an unreadable answer scores. A dataset of a
reasoning-gym version whose scorer module no longer has the call rlvr replaces is refused (`error`)
rather than scored unguarded; ``tests/rewards/test_safe_eval_in_reasoning_gym.py`` traces every registered scorer for
new ``eval``/``exec``/``parse_expr`` paths.

Still not safe in-process: a scorer can take unbounded time or memory (sympy's ``simplify``, a power
tower), so checks go through the verifier worker pool and its hard wall-clock and memory limits.
"""

from __future__ import annotations

import builtins
import json
import types
from functools import lru_cache

from rlvr_cli.rewards import outcome as oc
from rlvr_cli.rewards import safe_eval
from rlvr_cli.rewards.outcome import Outcome

IN_PROCESS_SAFE = False
ANSWER_TAG = "answer"

EVALUATING = {
    # dataset: (the name its scorer module calls, what rlvr puts in its place)
    "binary_matrix": ("eval", "literal"),  # the answer, as a Python list of lists
    "n_queens": ("eval", "literal"),  # the answer, as a Python board
    "spiral_matrix": ("eval", "literal"),  # the answer, as a Python list
    "string_insertion": ("eval", "literal"),  # the answer, as a Python list of characters
    "number_sorting": ("eval", "literal"),  # the reference list (the answer is read as JSON)
    "bitwise_arithmetic": ("eval", "int_arithmetic"),  # the reference expression (the answer by int())
    "countdown": ("parse_expr", "parse_expr"),
    "puzzle24": ("parse_expr", "parse_expr"),
    "polynomial_multiplication": ("sp", "sympy"),  # sp.parse_expr
    "simple_integration": ("sympy", "sympy"),  # sympy.parse_expr
    "intermediate_integration": ("sympy", "sympy"),  # sympy.parse_expr
}
"""The reasoning-gym scorers that evaluate text, and the safe reader each gets (see the module docstring)."""


class _SympyWithGatedParser(types.ModuleType):
    """The sympy module as one scorer module sees it: everything sympy's, but a gated ``parse_expr``."""

    def __init__(self, real: types.ModuleType):
        super().__init__(real.__name__, real.__doc__)
        self._real = real
        self.parse_expr = safe_eval.gated_parse_expr(real.parse_expr)

    def __getattr__(self, name):
        return getattr(self._real, name)


def _replacement(kind: str, current):
    """The safe reader to put in place of ``current``: ``current`` itself when it is one already, None
    when ``current`` is not what rlvr knows how to replace."""
    import sympy
    from sympy.parsing.sympy_parser import parse_expr

    if kind in ("literal", "int_arithmetic"):
        safe = getattr(safe_eval, kind)
        return safe if current in (builtins.eval, safe) else None
    if kind == "parse_expr":
        if getattr(current, "__wrapped__", None) is parse_expr:
            return current
        return safe_eval.gated_parse_expr(parse_expr) if current is parse_expr else None
    if kind == "sympy":
        if isinstance(current, _SympyWithGatedParser):
            return current
        return _SympyWithGatedParser(sympy) if current is sympy else None
    raise ValueError(kind)


_installed = False


def install_safe_readers() -> None:
    """Put the safe readers in the scorer modules of ``EVALUATING`` (idempotent).

    Raises ``RuntimeError`` when a registered dataset's module no longer calls what rlvr replaces (a
    reasoning-gym version rlvr does not know): scoring it unguarded is not an option."""
    global _installed
    if _installed:
        return
    import importlib

    from reasoning_gym.factory import DATASETS

    for dataset, (name, kind) in EVALUATING.items():
        if dataset not in DATASETS:
            continue
        module = importlib.import_module(DATASETS[dataset][0].__module__)
        current = vars(module).get(name, builtins.eval if name == "eval" else None)
        safe = _replacement(kind, current)
        if safe is None:
            raise RuntimeError(f"reasoning-gym dataset {dataset}: its scorer module {module.__name__} no longer calls "
                               f"{name} as rlvr expects; rlvr will not score it unguarded (update rlvr_cli/rewards/reasoning_gym.py)")
        setattr(module, name, safe)
    _installed = True


@lru_cache(maxsize=64)
def scoring_dataset(name: str, config_json: str):
    """A reasoning-gym dataset object for its scorer (one item: scorers read the entry, not the data)."""
    import reasoning_gym

    install_safe_readers()
    return reasoning_gym.create_dataset(name, size=1, seed=0, **json.loads(config_json))


def extract(response: str, **_options) -> str | None:
    from reasoning_gym.utils import extract_answer

    return extract_answer(response, tag_name=ANSWER_TAG)


def check(response: str, reference: str) -> Outcome:
    ref = json.loads(reference)
    answer = extract(response)
    if answer is None:
        return oc.unparseable(f"no <{ANSWER_TAG}>...</{ANSWER_TAG}> in the response")
    install_safe_readers()
    ds = scoring_dataset(ref["dataset"], json.dumps(ref.get("config") or {}, sort_keys=True))
    score = float(ds.score_answer(answer, ref["entry"]))
    return oc.judged(score >= float(ref.get("threshold", 1.0)), answer, f"reasoning-gym score {score:g}")


def warm_up() -> None:
    """Import reasoning-gym and put its safe readers in place before the first timed check (the import
    takes about a second)."""
    install_safe_readers()
