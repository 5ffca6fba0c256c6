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
from rlvr_cli.train import rank_report
from rlvr_cli.errors import RunFailed, UserError
from rlvr_cli.recipe.schema import Recipe
from rlvr_cli.run_files import acquire as acquire_lock, release as release_lock
from rlvr_cli.train.parallel import check_settings
from rlvr_cli.train.run_writer import RunDir


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
        code, rank_errors, why = launch_torchrun(argv, nproc)
        if code:
            record_lost_rank0(run_dir, nproc, code)
            if rank_errors:  # a rank's bad input: exit 2 with its own lines, not torchrun's traceback
                rank, problems = rank_errors[0]
                raise UserError([f"rank {rank}: {line}" for line in problems])
            raise RunFailed(why or f"{nproc} processes under torchrun: exit status {code} (see the output above); "
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


def record_rank_failure(error: UserError | RunFailed) -> bool:
    """Under ``--nproc``: leave what stopped this rank for the launcher, which says it once for every
    rank (:mod:`rlvr_cli.train.rank_report`); True when recorded (the rank then exits without printing it)."""
    if not dist.launched_by_torchrun():
        return False
    rank = int(os.environ.get("RANK", "0"))
    if isinstance(error, UserError):
        return rank_report.record("user", rank, error.problems)
    return rank_report.record("failed", rank, [str(error)])


def launch_torchrun(argv: list[str], nproc: int) -> tuple[int, list[tuple[int, list[str]]], str | None]:
    """Run ``rlvr`` with ``argv`` on ``nproc`` processes of this machine under torchrun; returns its exit
    status, the ranks' ``UserError`` lines and, when it failed otherwise, the one line that says why. The
    ranks' output passes through as it comes; torchrun's own log lines and failure report are held back
    and shown only when neither a rank nor the report says why."""
    import shutil
    import tempfile

    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           "-m", "rlvr_cli", *argv]
    where = Path(tempfile.mkdtemp(prefix="rlvr-rank-errors-"))
    try:
        proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, env={**os.environ, rank_report.RANK_ERRORS_ENV: str(where)})
        out = rank_report.HeldOutput(sys.stderr.buffer)
        while chunk := os.read(proc.stderr.fileno(), 65536):
            out.feed(chunk)
        out.close()
        code = proc.wait()
        if not code:
            return 0, [], None
        found = rank_report.recorded(where)
        why = None if found["user"] else rank_report.failure_line(nproc, code, out.held.decode("utf-8", "replace"),
                                                                   found["failed"])
        if (why is None and not found["user"]) or os.environ.get("RLVR_DEBUG"):  # torchrun's own account
            sys.stderr.buffer.write(bytes(out.held))
            sys.stderr.buffer.flush()
        return code, found["user"], why
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
