"""Starting a training run: in this process, or on N processes of this machine under torchrun.

One process (or each process torchrun starts): check, create and lock the run directory
(:func:`rlvr_cli.train.preflight.starting_run`; under torchrun rank 0 does it, the rank that writes),
then train. ``--nproc N``: check what can be checked without writing anything, start this command
again under torchrun, and when torchrun fails with the run still marked ``running`` (rank 0 died
before it could say why), record the failure for it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import nullcontext
from pathlib import Path

from rlvr_cli import dist
from rlvr_cli.errors import RunFailed, UserError
from rlvr_cli.recipe.schema import Recipe
from rlvr_cli.rundir import acquire as acquire_lock, release as release_lock
from rlvr_cli.train.parallel import check_settings
from rlvr_cli.train.rundir import RunDir


def check_launch(recipe: Recipe, nproc: int) -> None:
    """Exit-2 errors for ``--nproc`` before any work: inside torchrun already, or settings N processes cannot run."""
    if nproc > 1 and dist.launched_by_torchrun():
        raise UserError("--nproc: already running under torchrun (it sets the processes); drop --nproc")
    if nproc > 1:
        check_settings(recipe, nproc)


def run_training(recipe: Recipe, run_dir: Path, resume: bool, nproc: int, argv: list[str]) -> bool:
    """Train ``recipe`` into ``run_dir`` on ``nproc`` processes (checked by :func:`check_launch`, its
    models built); ``argv`` is this command's arguments (after ``rlvr``), to start it again under
    torchrun. Returns whether this process should print the run's closing summary: the one process,
    or rank 0 under torchrun (not the launcher of N)."""
    from rlvr_cli.trackers import check_trackers
    from rlvr_cli.train.preflight import check_start, starting_run

    check_trackers(recipe.trackers)  # a missing tracker package is exit 2 before any work
    if nproc > 1:
        check_start(recipe, run_dir, resume)  # nothing written: rank 0 of the launched processes creates and locks
        code, rank_errors = launch_torchrun(argv, nproc)
        if code:
            record_lost_rank0(run_dir, nproc, code)
            if rank_errors:  # a rank's bad input: exit 2 with its own lines, not torchrun's traceback
                rank, problems = rank_errors[0]
                raise UserError([f"rank {rank}: {line}" for line in problems])
            raise RunFailed(f"{nproc} processes under torchrun: exit status {code} (see the ranks' messages above); "
                            "continue with --resume")
        return False  # rank 0 printed the closing summary
    # checked before anything is written, locked while it runs; under torchrun by rank 0, the rank that writes
    first = int(os.environ.get("RANK", "0")) == 0
    with starting_run(recipe, run_dir, resume) if first else nullcontext():
        if recipe.algorithm == "sft":
            from rlvr_cli.train.sft import train_sft

            train_sft(recipe, run_dir, resume=resume)
            return True
        from rlvr_cli.train.rl import train_rl

        with terminated_as_failure():
            train_rl(recipe, run_dir, resume=resume)
            main = dist.is_main()
    return main  # under torchrun only rank 0 prints the closing summary


RANK_ERRORS_ENV = "RLVR_RANK_ERRORS"
"""Directory (made by the launcher, mode 0700) where a rank under ``--nproc`` leaves its ``UserError``."""

_TRACEBACK = b"Traceback (most recent call last)"


def record_rank_error(error: UserError) -> None:
    """Under ``--nproc``: leave this rank's ``UserError`` for the launcher (a no-op elsewhere)."""
    where = os.environ.get(RANK_ERRORS_ENV)
    if not where or not dist.launched_by_torchrun():
        return
    from rlvr_cli.io import atomic_write_json

    rank = int(os.environ.get("RANK", "0"))
    try:
        atomic_write_json(Path(where) / f"rank{rank}.json", {"rank": rank, "problems": error.problems})
    except OSError:
        pass  # the launcher then reports torchrun's failure as before


def _rank_errors(where: Path) -> list[tuple[int, list[str]]]:
    """The ranks' recorded ``UserError`` lines, lowest rank first."""
    import json

    found = []
    for f in where.glob("rank*.json"):
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
            found.append((int(data["rank"]), [str(x) for x in data["problems"]]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return sorted(found)


def launch_torchrun(argv: list[str], nproc: int) -> tuple[int, list[tuple[int, list[str]]]]:
    """Run ``rlvr`` with ``argv`` on ``nproc`` processes of this machine under torchrun; returns its exit
    status and the ranks' ``UserError`` lines. stderr is passed through as it comes, except torchrun's
    own failure report (from its first ``Traceback``), held back and shown only when no rank said why."""
    import shutil
    import tempfile

    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           "-m", "rlvr_cli", *argv]
    where = Path(tempfile.mkdtemp(prefix="rlvr-rank-errors-"))
    try:
        proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, env={**os.environ, RANK_ERRORS_ENV: str(where)})
        held, tail, out = bytearray(), b"", sys.stderr.buffer
        while chunk := os.read(proc.stderr.fileno(), 65536):
            if held:
                held += chunk
                continue
            seen = tail + chunk
            at = seen.find(_TRACEBACK)
            if at < 0:
                out.write(chunk)
                out.flush()
                tail = seen[-len(_TRACEBACK):]
                continue
            cut = max(0, at - len(tail))
            out.write(chunk[:cut])
            held += chunk[cut:]
        code = proc.wait()
        errors = _rank_errors(where) if code else []
        if held and not errors:
            out.write(bytes(held))
        out.flush()
        return code, errors
    finally:
        shutil.rmtree(where, ignore_errors=True)


def record_lost_rank0(run_dir: Path, nproc: int, code: int) -> None:
    """After torchrun failed: a run.json still `running` means rank 0 died before it could write why
    (killed, out of memory); every rank is gone now, so the launcher records the failure for it."""
    run = RunDir(run_dir)
    if run.read_status().get("status") != "running":
        return
    try:
        acquire_lock(run_dir)  # free once every rank is gone; held means another trainer took the run over
    except UserError:
        return
    try:
        if run.read_status().get("status") != "running":  # another trainer came and went meanwhile
            return
        run.write_status("failed", error=f"a process of the {nproc} under torchrun ended without recording why "
                                         f"(torchrun exit status {code}: rank 0 was killed or crashed); "
                                         "continue with --resume")
    finally:
        release_lock(run_dir, every_hold=True)


class terminated_as_failure:
    """Turn SIGTERM (torchrun stopping the other workers when one fails) into a failed run, not a silent death.

    Inside it, SIGTERM raises :class:`RunFailed`, so the run loop marks the run failed before exiting;
    leaving it without an error leaves the process group. No-op in one process.
    """

    def __enter__(self):
        self._old = None
        if dist.launched_by_torchrun():
            def stop(signum, frame):
                if sys.exc_info()[1] is not None:  # already failing (a collective broke): let it finish writing
                    return
                rank, size = dist.world()
                raise RunFailed(f"rank {rank} of {size}: stopped by torchrun (SIGTERM) after another rank failed; "
                                "continue with --resume")

            self._old = signal.signal(signal.SIGTERM, stop)
        return self

    def __exit__(self, *exc):
        if self._old is not None:
            signal.signal(signal.SIGTERM, self._old)
        if exc[0] is None:
            dist.shutdown()
        return False
