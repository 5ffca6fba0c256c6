"""What a sweep checks before it writes anything: each directory it will write is one it can create or
write in, no path is longer than the file system allows, each run's process count is one its recipe can
run (`rlvr train --nproc`'s own refusals: the overlapped trainer on one process, a group per process), what
each run's recipe points at exists and fits (its model, its data files and rows, its reward functions:
imported in a child process, as `rlvr recipes validate` checks them), and nothing of the user's is where the sweep would
overwrite it (sweep.json, the comparison's files).

`rlvr sweep` and its `--dry-run` both run these checks once the spec is expanded (every run's recipe
checked, :mod:`.spec`): :func:`check_outputs` before the run directories are read
(:func:`rlvr_cli.sweep.state.plan_states`), :func:`check_runs` after. Every problem is one line, and the
sweep exits 2 having written nothing. What cannot be known beforehand (a disk that fills, a log that
cannot be opened) fails the run it strikes, alone.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path

from rlvr_cli.errors import UserError
from rlvr_cli.recipe.distributed import distributed_problem
from rlvr_cli.sweep.record import check_record
from rlvr_cli.sweep.spec import Plan, PlannedRun

PATH_MAX = 4096
"""Bytes of a path on Linux (PATH_MAX)."""
INSIDE_RUN = 96
"""Bytes the trainer adds below a run directory (``checkpoints/step_N/model.safetensors`` and the like)."""
COMPARE_FILES = ("summary.md", "summary.json", "compare.png", "compare.svg")
"""What `rlvr compare` writes into its directory, and so what the sweep's comparison overwrites."""


def check_outputs(plans: list[Plan]) -> None:
    """Each plan's output directory, its logs/, sweep.json and comparison: checked before the run directories
    in it are read. Raises ``UserError`` with one line per problem; writes nothing."""
    problems: list[str] = []
    for plan in plans:
        label = "--out" if plan.out_flag else f"{plan.spec_path}: out"
        bad_out = [f"{label}: {p}" for p in _too_long(plan.out)] or _writable(plan.out, label, {})
        if bad_out:  # what goes into it is not worth a line each
            problems += bad_out
            continue
        problems += _writable(plan.out / "logs", f"{label}: its logs", {})
        try:
            check_record(plan.out)
        except UserError as e:
            problems += e.problems
        if plan.compare_out is not None:
            where = "the comparison (--out)" if plan.out_flag else f"{plan.spec_path}: compare.out"
            problems += _writable(plan.compare_out, where, {})
            problems += _foreign_compare_files(plan.compare_out)
    _raise(problems)


def check_runs(plans: list[Plan], states: list[dict[str, str]]) -> None:
    """Each run that will train (``states``: :func:`rlvr_cli.sweep.state.plan_states`): its paths' lengths, the
    directory it is made in, its process count, what its recipe points at. Raises ``UserError`` with one line per problem; writes nothing."""
    probed: dict[Path, str | None] = {}
    _raise([p for plan, st in zip(plans, states) for r in [*plan.needs, *plan.runs]
            for p in _run_problems(plan, r, st[r.name], probed)] + _reference_problems(plans, states))


def _reference_problems(plans: list[Plan], states: list[dict[str, str]]) -> list[str]:
    """What each run still to train points at (:func:`rlvr_cli.rewards.references.check_references`), checked
    once per distinct task and reward and said once per arm: a missing data file or reward function stops the
    sweep before any run, not only the run that reads it."""
    from rlvr_cli.rewards.references import check_references

    found: dict[str, list[str]] = {}
    problems = []
    planned = {os.path.abspath(d.dir) for plan in plans for d in [*plan.needs, *plan.runs]}
    for plan, st in zip(plans, states):
        for r in [*plan.needs, *plan.runs]:
            if st[r.name] == "finished":
                continue
            model = _model_problem(r.recipe.model.name, planned)
            if model is not None:
                where = plan.where(r.arm) if r.arm != "needs" else f"{plan.spec_path}: needs"
                problems.append(f"{where}: model.name: {model}")
            key = json.dumps([r.recipe.task.model_dump(mode="json"), r.recipe.reward.model_dump(mode="json")],
                             sort_keys=True)
            if key not in found:
                found[key] = check_references(r.recipe)
            where = plan.where(r.arm) if r.arm != "needs" else f"{plan.spec_path}: needs"
            problems += [f"{where}: {p}" for p in found[key]]
    return problems


def _raise(problems: list[str]) -> None:
    if problems:
        raise UserError(sorted(set(problems), key=problems.index))


def _run_problems(plan: Plan, run: PlannedRun, state: str, probed: dict) -> list[str]:
    where = plan.where(run.arm) if run.arm != "needs" else f"{plan.spec_path}: needs"
    problems = [f"{where}: {p}" for p in _too_long(run.dir, INSIDE_RUN) + _too_long(plan.out / "logs" / f"{run.name}.log")]
    if state != "finished":
        problems += _writable(run.dir.parent, where, probed)
        problems += _processes(where, plan.spec.nproc, run)
    return problems


def _model_problem(ref: str, planned: set[str]) -> str | None:
    """Why the model ``ref`` cannot be loaded, found without loading or building it: an unknown built-in,
    a file, or a directory that is neither a model nor a run with a checkpoint
    (:func:`rlvr_cli.models.resolve_model_ref`'s own refusals); None for a directory the sweep trains first
    (a need's), a Hugging Face id (not fetched here), a GGUF file (read when its run starts) or a path that
    does not exist yet (another sweep may make it first: results/reproduce.py's second pool loads the first's
    runs; its run names it if it is still missing)."""
    if ref.startswith("builtin:"):
        from rlvr_cli.models.builtin import WARM_START_RECIPES, shipped_manifest

        known = dict.fromkeys([*shipped_manifest(), *WARM_START_RECIPES])
        if ref.split(":", 1)[1] in known:
            return None
        return f"{ref}: unknown built-in model (known: {', '.join(f'builtin:{n}' for n in known)})"
    if os.path.abspath(os.path.expanduser(ref)) in planned:
        return None
    from rlvr_cli.models import resolve_model_ref
    from rlvr_cli.models.gguf import is_gguf_ref

    if is_gguf_ref(ref) or not os.path.lexists(os.path.expanduser(ref)):
        return None
    try:
        resolve_model_ref(ref)
    except UserError as e:
        return e.problems[0]
    return None


def _processes(where: str, nproc: int, run: PlannedRun) -> list[str]:
    """`rlvr train --nproc N`'s own refusals (:func:`rlvr_cli.recipe.distributed.distributed_problem`), found
    before any run trains: `algorithm: rl` only, no overlapped sampler, one group of prompts per process."""
    problem = distributed_problem(run.recipe, nproc)
    return [] if problem is None else [f"{where}: nproc {nproc}: {problem}"]


def _nearest(path: Path) -> Path:
    """``path``, or its nearest ancestor that exists (what creating it starts from)."""
    path = path.absolute()
    while not os.path.lexists(path) and path != path.parent:
        path = path.parent
    return path


def _writable(path: Path, label: str, probed: dict) -> list[str]:
    """Whether ``path`` is a directory that can be written in, or can be created: tried by making and
    removing an empty directory where it is (or where it would be made), so a read-only file system,
    /proc or a missing permission shows as it would to the runs."""
    start = _nearest(path)
    if start not in probed:
        probed[start] = _probe(start)
    if not start.is_dir():
        what = "is a file" if start.is_file() else "is not a directory"
        return [f"{label} {path}: {what}" if start == path.absolute() else
                f"{label} {path}: {start} {what}, so it cannot be created"]
    return [] if probed[start] is None else [f"{label} {path}: cannot write in {start} ({probed[start]})"]


def _probe(directory: Path) -> str | None:
    """None when a directory can be made (and was removed again) in ``directory``; else why not."""
    if not directory.is_dir():
        return None
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".rlvr-sweep-probe-", dir=directory))
    except OSError as e:
        return e.strerror or str(e)
    return None


def _too_long(path: Path, inside: int = 0) -> list[str]:
    """A name longer than the file system holds, or a path (with ``inside`` bytes more) over PATH_MAX."""
    full = os.fsencode(path.absolute())
    try:
        name_max = os.pathconf(_nearest(path), "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    long = next((c for c in full.split(b"/") if len(c) > name_max), None)
    if long is not None:
        return [f"{os.fsdecode(long[:40])}...: a name of {len(long)} bytes; the file system holds at most {name_max}"]
    if len(full) + inside > PATH_MAX:
        return [f"{path}: {len(full)} bytes, too long a path for the files written below it (at most "
                f"{PATH_MAX - inside})"]
    return []


def _written_by_compare(path: Path) -> bool:
    """Whether ``path`` is one of `rlvr compare`'s files (by its header, or summary.json's schema)."""
    with open(path, "rb") as f:
        head = f.read(4096)
    if path.name == "summary.md":
        return head.startswith(b"# rlvr compare")
    if path.name == "summary.json":
        try:
            data = json.loads(path.read_bytes()) if path.stat().st_size < (64 << 20) else None
        except (ValueError, RecursionError):
            return False
        return isinstance(data, dict) and "schema_version" in data and "variants" in data
    return b"matplotlib" in head.lower()  # the figures: matplotlib names itself in both


def _foreign_compare_files(directory: Path) -> list[str]:
    problems = []
    for name in COMPARE_FILES:
        path = directory / name
        try:
            st = os.lstat(path)
        except OSError:
            continue
        try:
            ours = stat.S_ISREG(st.st_mode) and _written_by_compare(path)
        except OSError:
            ours = False
        if not ours:
            problems.append(f"{path}: not written by rlvr compare, and the sweep's comparison would replace it; "
                            "move it away, or compare elsewhere (compare.out in the spec, or --out)")
    return problems
