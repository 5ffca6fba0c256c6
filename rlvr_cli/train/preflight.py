"""Starting a run without leaving a mess: check what can be checked, lock, and undo a failed start.

A recipe that validates can still be unusable here: ``--out`` is a file or cannot be created, the
device is absent, ``--resume`` names no run. Those are found before anything is written. What can
only fail while starting (a model that does not load) is undone instead: a run directory this start
created and that holds no step yet is removed. A resumed run records its resume only at its first
write, so a resume refused before it starts (a model, a task, a damaged checkpoint) leaves the run
byte for byte as it was; one that failed after it had written says so in ``run.json`` rather than
staying ``running``. A full disk, wherever it strikes, ends the run as
``failed`` with a message naming the disk (exit 1), not an internal error.
"""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from pathlib import Path

from rlvr_cli.errors import RunFailed, UserError
from rlvr_cli.models import resolve_device
from rlvr_cli.recipe.schema import Recipe
from rlvr_cli.run_files import acquire as acquire_lock, release as release_lock, RECIPE, CHECKPOINTS_DIR, STATUS
from rlvr_cli.train.run_writer import RunDir, disk_full, disk_full_message


def check_start(recipe: Recipe, run_dir: Path, resume: bool) -> None:
    """Raise ``UserError`` for a start that cannot work; writes nothing."""
    if run_dir.exists() and not run_dir.is_dir():
        raise UserError(f"--out {run_dir}: is a file, not a directory")
    ancestor = run_dir
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise UserError(f"--out {run_dir}: {ancestor} is a file, not a directory")
    if resume and not (run_dir / RECIPE).is_file():
        raise UserError(f"{run_dir}: no run to resume (no recipe.yaml there); drop --resume to start a new run")
    if not resume and (run_dir / RECIPE).is_file():
        raise UserError(f"{run_dir}: run directory already exists; pass --resume to continue it, or choose another --out")
    resolve_device(recipe.device)


def check_rows_fit(recipe: Recipe, task, tokenizer, model) -> None:
    """``UserError`` naming the rows of a file task (``file:line: row i``) whose prompt and
    ``rollout.max_new_tokens`` exceed the model's positions (:func:`rlvr_cli.evaluation.doctor_data.too_long`,
    the doctor's check): found before step 1, not at the step that draws one (issue 49). Every row is
    tokenized once; a generated task (no rows of its own) and a model stating no limit pass."""
    from rlvr_cli.evaluation import doctor_data

    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if recipe.algorithm != "rl" or not isinstance(limit, int) or not callable(getattr(task, "located_rows", None)):
        return
    rows, _ = doctor_data.task_rows(task, recipe.seed, 0, [])
    said = doctor_data.too_long(rows, doctor_data.prompt_lengths(rows, task, tokenizer), limit,
                                recipe.rollout.max_new_tokens)
    if said is not None:
        raise UserError(f"task: {said}; shorten those prompts or rollout.max_new_tokens "
                        "(`rlvr doctor` checks every row)")


def _started(run: RunDir) -> bool:
    """Whether the run got anywhere worth keeping: a logged step, a checkpoint or a recorded end."""
    return bool(run.read_metrics()) or (run.root / CHECKPOINTS_DIR).is_dir() or run.read_status().get("status") not in (None, "running")


def _status_bytes(run_dir: Path) -> bytes | None:
    try:
        return (run_dir / STATUS).read_bytes()
    except OSError:
        return None


def _missing_ancestors(path: Path) -> list[Path]:
    """The parents of ``path`` that do not exist yet, innermost first."""
    out = []
    for parent in path.absolute().parents:
        if parent.exists():
            break
        out.append(parent)
    return out


@contextmanager
def starting_run(recipe: Recipe, run_dir: str | Path, resume: bool):
    """Check, create and lock ``run_dir`` for the run inside the ``with``; undo a failed start."""
    run_dir = Path(run_dir)
    check_start(recipe, run_dir, resume)
    created = not run_dir.exists()
    before = set() if created else {p.name for p in run_dir.iterdir()}
    made = _missing_ancestors(run_dir)  # the parents `--out a/b/run` will create, to remove on a failed start
    try:
        acquire_lock(run_dir, record_pid=not resume)  # a resume records its pid at its first write
    except UserError:
        if created and run_dir.is_dir() and not any(run_dir.iterdir()):
            run_dir.rmdir()  # a directory made for a lock we did not get (another process made it first: not empty)
        raise
    run = RunDir(run_dir)
    status_before = _status_bytes(run_dir)
    try:
        try:
            yield run
        except Exception as e:
            if isinstance(e, (UserError, RunFailed)) or not disk_full(e, run_dir):
                raise
            failed = RunFailed(disk_full_message(run_dir, "writing"))
            try:
                run.write_status("failed", error=str(failed))
            except OSError:
                pass  # still no room even for run.json: the message below says what to do
            raise failed from None
    except BaseException as e:
        if not _started(run):
            if created:
                shutil.rmtree(run_dir, ignore_errors=True)
                for parent in made:  # innermost first; one that something else has written into stays
                    try:
                        parent.rmdir()
                    except OSError:
                        break
            elif not resume:
                for name in {p.name for p in run_dir.iterdir()} - before:
                    path = run_dir / name
                    shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
        elif run.read_status().get("status") == "running" and _status_bytes(run_dir) != status_before:
            # this start wrote `running` (a resume records itself only once it starts writing: one
            # refused before then leaves the run as it was, and is not marked failed here either)
            reason = "; ".join(e.problems) if isinstance(e, UserError) else f"{type(e).__name__}: {e}"
            run.write_status("failed", error=f"the run could not start: {reason}")
        raise
    finally:
        release_lock(run_dir, every_hold=True)  # the run is over, whatever still references its session
