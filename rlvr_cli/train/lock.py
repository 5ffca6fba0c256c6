"""The run directory's lock, under the name the trainer's modules import it by: it lives in
:mod:`rlvr_cli.rundir` with the rest of the run directory's contract."""

from rlvr_cli.rundir import LOCK_NAME, _held, acquire, holder_pid, release

__all__ = ["LOCK_NAME", "_held", "acquire", "holder_pid", "release"]
