"""Train a recipe for a benchmark: in a temporary directory, no evaluation, output silenced, one function
patched for the run (a timer or a profiler around it); returns the run's metrics rows."""

from __future__ import annotations

import contextlib
import io
import os
import tempfile


def train_quietly(recipe, owner, name: str, replacement) -> list[dict]:
    """``train_rl(recipe)`` with ``owner.name`` replaced by ``replacement`` and the evaluation a no-op."""
    import rlvr_cli.train.loop as loop
    import rlvr_cli.train.rl as rl
    from rlvr_cli.train.run_writer import RunDir

    real, real_eval = getattr(owner, name), loop.eval_and_record
    setattr(owner, name, replacement)
    loop.eval_and_record = lambda *a, **k: None
    try:
        with tempfile.TemporaryDirectory() as d:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                rl.train_rl(recipe, os.path.join(d, "run"))
            return RunDir(os.path.join(d, "run")).read_metrics()
    finally:
        setattr(owner, name, real)
        loop.eval_and_record = real_eval
