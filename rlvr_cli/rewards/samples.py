"""Scoring a JSONL file of samples offline (what ``rlvr verify`` does).

A line is a JSON object with a response and a reference (``rlvr sample`` writes ``response``,
``reference``, ``task`` and ``verifier``; other files name their fields). A line that cannot be scored
(not UTF-8, not JSON, not an object, a field missing or of the wrong type, an unknown verifier) is
reported by its line number and skipped, never silently dropped; blank lines are ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from rlvr_cli.recipe.schema import CodeSpec
from rlvr_cli.rewards.extract import DEFAULT_EXTRACT
from rlvr_cli.rewards.outcome import Outcome
from rlvr_cli.rewards.pool import Check, VerifierPool, run_checks
from rlvr_cli.rewards.registry import VERIFIERS, options_for
from rlvr_cli.rewards.sandbox import STARTUP_ALLOWANCE_S
from rlvr_cli.rewards.scorer import CODE_CLEANUP_MARGIN_S

# answer markers of the built-in tasks, by the `task` field of a line
TASK_MARKERS = {"arithmetic": "#", "countdown": "#", "dataset": ""}
# without a task name: the countdown verifier only ever sees the built-in task's format
DEFAULT_MARKERS = {"countdown": "#"}


@dataclass
class Sample:
    line: int
    record: dict
    verifier: str
    response: str
    reference: str
    marker: str


def _reference_text(value) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        try:
            return str(value)
        except ValueError:  # an int beyond the 4300-digit limit of int -> str (json.loads refuses those first)
            return None
    if isinstance(value, (dict, list)):
        try:
            return json.dumps(value)
        except (ValueError, RecursionError):
            return None
    return None


def read_samples(
    path: str | Path,
    verifier: str | None = None,
    response_field: str = "response",
    reference_field: str = "reference",
    marker: str | None = None,
) -> tuple[list[Sample], list[str]]:
    """(samples, one problem line per skipped line). ``verifier``/``marker`` None: from each line."""
    samples, problems = [], []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            if number == 1:
                raw = raw.removeprefix(b"\xef\xbb\xbf")  # a byte-order mark some editors write first
            if not raw.strip():
                continue
            sample, problem = _parse_line(number, raw, verifier, response_field, reference_field, marker)
            if problem:
                problems.append(f"line {number}: {problem} (skipped)")
            else:
                samples.append(sample)
    return samples, problems


def _parse_line(number, raw: bytes, verifier, response_field, reference_field, marker):
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, f"not valid UTF-8 (byte {e.start})"
    try:
        record = json.loads(text)
    except json.JSONDecodeError as e:
        return None, f"not valid JSON ({e.msg}, column {e.colno})"
    except ValueError as e:  # a number beyond Python's 4300-digit limit for int(str)
        return None, f"not readable JSON ({str(e).split(';')[0]})"
    except RecursionError:
        return None, "not readable JSON (nested too deeply)"
    if not isinstance(record, dict):
        return None, "not a JSON object"
    response = record.get(response_field)
    if not isinstance(response, str):
        return None, f"no string field {response_field!r}"
    reference = _reference_text(record.get(reference_field))
    if reference is None:
        return None, f"no field {reference_field!r} (a string, number or JSON object)"
    name = verifier or record.get("verifier")
    if not isinstance(name, str) or not name:
        return None, "no verifier (give --verifier, or a `verifier` field)"
    if name not in VERIFIERS:
        return None, f"unknown verifier {name!r} (choose from {', '.join(VERIFIERS)})"
    if marker is None:
        task = record.get("task")
        line_marker = TASK_MARKERS.get(task, "") if isinstance(task, str) else DEFAULT_MARKERS.get(name, "")
    else:
        line_marker = marker
    return Sample(number, record, name, response, reference, line_marker), None


def sample_checks(samples: list[Sample], timeout_s: float, extract=DEFAULT_EXTRACT, code: CodeSpec | None = None) -> list[Check]:
    code = code or CodeSpec()
    checks = []
    for s in samples:
        options = {"marker": s.marker, "extract": tuple(extract), **code.model_dump()}
        limit = timeout_s
        if s.verifier == "code":
            limit = max(timeout_s, code.timeout_s + STARTUP_ALLOWANCE_S + CODE_CLEANUP_MARGIN_S)
        checks.append(Check(s.verifier, s.response, s.reference, options_for(s.verifier, options), limit))
    return checks


def score_samples(samples: list[Sample], timeout_s: float = 5.0, workers: int = 0, extract=DEFAULT_EXTRACT,
                  code: CodeSpec | None = None, chunk: int = 256, progress=None) -> list[Outcome]:
    """One Outcome per sample, in order; ``progress(n_done)`` after each chunk."""
    code = code or CodeSpec()
    checks = sample_checks(samples, timeout_s, extract, code)
    preload = tuple(sorted({c.verifier for c in checks} & {"math", "code"}))
    out: list[Outcome] = []
    with VerifierPool(workers, preload=preload, code_options={"isolation": code.isolation, "python": code.python}) as pool:
        for start in range(0, len(checks), chunk):
            out.extend(run_checks(checks[start : start + chunk], pool))
            if progress is not None:
                progress(len(out))
    return out
