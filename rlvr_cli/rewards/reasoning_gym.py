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

Not safe in-process: the scorers are arbitrary Python (some evaluate expressions), so checks go through
the verifier worker pool and its hard wall-clock and memory limits.
"""

from __future__ import annotations

import json
from functools import lru_cache

from rlvr_cli.rewards import outcome as oc
from rlvr_cli.rewards.outcome import Outcome

IN_PROCESS_SAFE = False
ANSWER_TAG = "answer"


@lru_cache(maxsize=64)
def scoring_dataset(name: str, config_json: str):
    """A reasoning-gym dataset object for its scorer (one item: scorers read the entry, not the data)."""
    import reasoning_gym

    return reasoning_gym.create_dataset(name, size=1, seed=0, **json.loads(config_json))


def extract(response: str, **_options) -> str | None:
    from reasoning_gym.utils import extract_answer

    return extract_answer(response, tag_name=ANSWER_TAG)


def check(response: str, reference: str) -> Outcome:
    ref = json.loads(reference)
    answer = extract(response)
    if answer is None:
        return oc.unparseable(f"no <{ANSWER_TAG}>...</{ANSWER_TAG}> in the response")
    ds = scoring_dataset(ref["dataset"], json.dumps(ref.get("config") or {}, sort_keys=True))
    score = float(ds.score_answer(answer, ref["entry"]))
    return oc.judged(score >= float(ref.get("threshold", 1.0)), answer, f"reasoning-gym score {score:g}")


def warm_up() -> None:
    """Import reasoning-gym before the first timed check (its import takes about a second)."""
    import reasoning_gym  # noqa: F401
