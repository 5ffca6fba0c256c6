"""Read run directories (docs/design.md §3) robustly: recipe.yaml, run.json, metrics.jsonl, eval/step_N.json.

A run is readable when it has a parseable ``recipe.yaml`` (the recipe is what says which variant a run
is) and at least one complete metrics line. Everything else degrades to a warning kept with the run:
a corrupt metrics line is skipped, a half-written last line (a run in progress, or a crash) is ignored,
a missing or corrupt eval file only removes that evaluation. Nothing here raises for a bad run; the
caller gets :class:`RunUnreadable` with the reason and compares the rest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from rlvr_cli import run_files
from rlvr_cli.compare.foreign import split_foreign
from rlvr_cli.compare.run import Run, RunUnreadable, Skipped, to_frames, unreadable
from rlvr_cli.metrics import upgrade_row

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Run", "RunUnreadable", "Skipped", "expand_run_dirs", "load_run", "load_runs"]


def expand_run_dirs(paths: list[str]) -> tuple[list[Path], list[Skipped]]:
    """Each argument is a run directory, or a directory whose immediate sub-directories are runs
    (``rlvr compare runs/``). Duplicates (the same directory twice) are dropped, order kept."""
    found: list[Path] = []
    skipped: list[Skipped] = []
    seen: set[Path] = set()

    def add(p: Path) -> None:
        key = p.resolve()
        if key not in seen:
            seen.add(key)
            found.append(p)

    for arg in paths:
        p = Path(arg)
        try:
            if not p.exists():
                skipped.append(Skipped(arg, "does not exist"))
            elif not p.is_dir():
                skipped.append(Skipped(arg, "not a directory (expected a run directory)"))
            elif run_files.is_run_dir(p):
                add(p)
            else:
                children = sorted(c for c in p.iterdir() if run_files.is_run_dir(c))
                if not children:
                    skipped.append(Skipped(arg, "not a run directory (no recipe.yaml, metrics.jsonl, run.json or checkpoints/)"))
                for c in children:
                    add(c)
        except OSError as e:  # a directory the operating system will not let us list or enter
            skipped.append(Skipped(arg, unreadable(e, arg)))
    return found, skipped


def load_run(path: str | Path) -> Run:
    """Read one run; raise :class:`RunUnreadable` when it cannot be compared at all."""
    path = Path(path)
    warnings: list[str] = []
    recipe = _read_recipe(path)
    info = _read_run_json(path, warnings)
    metrics, nonfinite = _read_metrics(path, warnings)
    evals = _read_evals(path, warnings)
    seed = info.get("seed", recipe.get("seed"))
    status = str(info.get("status", "unknown"))
    if status == "failed" and info.get("error"):
        warnings.append(f"run.json: run failed: {info['error']}")
    return Run(
        path=path,
        recipe=recipe,
        status=status,
        seed=seed if isinstance(seed, int) else None,
        metrics=metrics,
        nonfinite=nonfinite,
        evals=evals,
        warnings=warnings,
        seconds=_seconds(info),
    )


def load_runs(paths: list[str]) -> tuple[list[Run], list[Skipped]]:
    """Expand and read every run; unreadable ones come back as :class:`Skipped` with the reason.
    TRL output directories and verl JSONL logs are read by :mod:`rlvr_cli.compare.foreign`."""
    paths, runs, skipped = split_foreign(paths)
    dirs, more = expand_run_dirs(paths)
    skipped += more
    for d in dirs:
        try:
            runs.append(load_run(d))
        except RunUnreadable as e:
            skipped.append(Skipped(str(d), str(e)))
        except OSError as e:
            skipped.append(Skipped(str(d), unreadable(e, d)))
        except (ValueError, TypeError, OverflowError, RecursionError, MemoryError) as e:  # a case the readers missed
            skipped.append(Skipped(str(d), f"unreadable: {type(e).__name__}: {_one_line(e)}"))
    return runs, skipped


# --- the files -------------------------------------------------------------------------------------
def _read_recipe(path: Path) -> dict:
    f = path / run_files.RECIPE
    if not f.is_file():
        raise RunUnreadable("recipe.yaml missing: cannot tell which variant the run is")
    try:
        data = yaml.safe_load(f.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise RunUnreadable(f"recipe.yaml unreadable: {_one_line(e)}") from None
    if not isinstance(data, dict):
        raise RunUnreadable("recipe.yaml: expected a mapping of recipe fields")
    return data


def _read_run_json(path: Path, warnings: list[str]) -> dict:
    f = path / run_files.STATUS
    if not f.is_file():
        warnings.append("run.json missing: status unknown")
        return {}
    try:
        data = _json(f.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        warnings.append(f"run.json unreadable ({_one_line(e)}): status unknown")
        return {}
    if not isinstance(data, dict):
        warnings.append("run.json: not a JSON object; status unknown")
        return {}
    return data


def _read_metrics(path: Path, warnings: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The run's metric rows by :func:`rlvr_cli.run_files.read_metrics` (the one rule: a damaged line is
    skipped and named among the run's warnings), under today's metric names."""
    if not (path / run_files.METRICS).is_file():
        raise RunUnreadable("metrics.jsonl missing: the run has not logged a step")
    try:
        log = run_files.read_metrics(path)
    except OSError as e:
        raise RunUnreadable(f"metrics.jsonl unreadable: {_one_line(e)}") from None
    warnings.extend(log.problems)
    if not log.rows:
        raise RunUnreadable("metrics.jsonl has no complete line: nothing logged yet")
    return to_frames({r["step"]: upgrade_row(r) for r in log.rows})  # a run written under older names reads as today's


def _read_evals(path: Path, warnings: list[str]) -> dict[int, dict]:
    files = run_files.eval_files(path)
    if not files:
        warnings.append("no eval/step_N.json files: pass@k not available")
        return {}
    evals: dict[int, dict] = {}
    for step, p in files:
        try:
            data = _json(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as e:
            warnings.append(f"eval/{p.name} unreadable ({_one_line(e)}); skipped")
            continue
        passk = _k_table(data.get("pass_at_k")) if isinstance(data, dict) else None
        if not passk:
            warnings.append(f"eval/{p.name}: no pass_at_k table; skipped")
            continue
        evals[step] = {**data, "pass_at_k": passk, "maj_at_k": _k_table(data.get("maj_at_k")) or {}}
    if evals and 0 not in evals:
        warnings.append("no base evaluation (eval/step_0.json): pass@k has no base to compare with")
    return evals


def _k_table(obj) -> dict[int, float] | None:
    """{"1": 0.3, "16": 0.9} -> {1: 0.3, 16: 0.9}; entries that are not (k, number) are dropped."""
    if not isinstance(obj, dict):
        return None
    out = {}
    for k, v in obj.items():
        try:
            kk = int(k)
        except (TypeError, ValueError):
            continue
        if isinstance(v, (int, float)) and not isinstance(v, bool) and kk >= 1:
            out[kk] = float(v)
    return dict(sorted(out.items()))


def _seconds(info: dict) -> float | None:
    """ended - started in seconds from run.json's ISO times; None when either is missing or unreadable."""
    import datetime as dt

    try:
        sec = (dt.datetime.fromisoformat(info["ended"]) - dt.datetime.fromisoformat(info["started"])).total_seconds()
    except (KeyError, TypeError, ValueError):
        return None
    return sec if sec >= 0 else None


def _json(text: str):
    """``json.loads`` whose every failure is a ``ValueError``: also a number beyond Python's
    4300-digit limit (already a ValueError) and nesting deeper than the recursion limit."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _one_line(e: Exception) -> str:
    return " ".join(str(e).split())[:200]
