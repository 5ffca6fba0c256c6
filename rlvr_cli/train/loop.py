"""The run skeleton RL and SFT share: status, eval at start, progress, eval and checkpoint cadence,
and one optimiser update with non-finite skipping.

A trainer supplies only its step (``step_fn(step) -> metrics row``) and a few hooks; everything a run
does around its steps is here, so the two algorithms cannot drift apart.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from rlvr_cli import dist
from rlvr_cli.errors import RunFailed
from rlvr_cli.train.evalhook import eval_and_record
from rlvr_cli.train.fingerprint import record_fingerprint
from rlvr_cli.train.optim import grad_norm_and_clip
from rlvr_cli.train.progress import step_progress
from rlvr_cli.train.session import Session


@dataclass
class RunHooks:
    """What a trainer adds around its steps (each optional)."""

    after_eval: Callable[[int], None] | None = None
    """Called with the step after its evaluation (e.g. write the step's samples)."""
    after_step: Callable[[int], None] | None = None
    """Called with the step after its metrics and evaluation, before its checkpoint (e.g. a ProRL reset)."""
    checkpoint_extra: Callable[[], dict] | None = None
    """Extra trainer state saved with each checkpoint."""


def run_steps(
    session: Session,
    task,
    scorer,
    label: str,
    step_fn: Callable[[int], dict],
    status: Callable[[dict], str],
    hooks: RunHooks | None = None,
) -> Path:
    """Run steps start_step+1 .. recipe.steps and return the run directory.

    First the run's fingerprint (:mod:`.fingerprint`). Per step: ``step_fn`` -> metrics line; on the eval cadence an evaluation, then ``hooks.after_eval``;
    ``hooks.after_step``; on the checkpoint cadence a checkpoint with ``hooks.checkpoint_extra()``. The
    run's status ends as finished, failed (with the error) or interrupted; the scorer is always closed.
    """
    run, recipe = session.run, session.recipe
    hooks = hooks or RunHooks()
    after_eval, after_step, checkpoint_extra = hooks.after_eval, hooks.after_step, hooks.checkpoint_extra
    try:
        record_fingerprint(session, task)
        if session.start_step == 0 and recipe.eval.at_start:
            eval_and_record(session, task, scorer, 0)
        progress = step_progress(label, show=run.writer)
        with progress:
            bar = progress.add_task(label, total=recipe.steps, completed=session.start_step, status="")
            for step in range(session.start_step + 1, recipe.steps + 1):
                row = step_fn(step)
                run.append_metrics(row)
                if session.should_eval(step):
                    eval_and_record(session, task, scorer, step)
                    if after_eval:
                        after_eval(step)
                if after_step:
                    after_step(step)
                if session.should_checkpoint(step):
                    session.save(step, checkpoint_extra() if checkpoint_extra else None)
                progress.update(bar, completed=step, status=status(row))
        run.write_status("finished", error=None)
    except RunFailed as e:
        run.write_status("failed", error=str(e))
        raise
    except KeyboardInterrupt:
        run.write_status("interrupted", error="interrupted by the user; continue with --resume")
        raise
    except BaseException as e:
        failed = dist.collective_failure(e)  # another rank died or hung inside DDP/FSDP2's own collectives
        if failed is not None:
            run.write_status("failed", error=str(failed))
            raise failed from None
        run.write_status("failed", error=f"{type(e).__name__}: {e}")
        raise
    finally:
        scorer.close()
    return run.root


def schedule_step(session: Session) -> None:
    """Advance the lr schedule by one update slot (a skipped or empty update uses up its slot too)."""
    with warnings.catch_warnings():  # torch warns when the scheduler steps without an optimiser step
        warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step")
        session.scheduler.step()


def apply_update(session: Session, loss: float, step: int) -> tuple[float, bool]:
    """Clip and apply the accumulated gradient unless the loss or its norm is not finite.

    Returns (pre-clip grad norm, applied). A non-finite update is dropped (gradients zeroed) and
    counted in ``session.state["skipped_in_row"]``; ``optim.max_skipped_in_row`` in a row fail the run.
    """
    o = session.recipe.optim
    gnorm = grad_norm_and_clip(session.model.parameters(), o.grad_clip)
    applied = math.isfinite(loss) and math.isfinite(gnorm)
    if applied:
        session.optimizer.step()
        session.state["skipped_in_row"] = 0
        bad = first_nonfinite_parameter(session.model)
        if bad is not None:  # raised before this step's metrics, eval or checkpoint: the last checkpoint stays finite
            raise RunFailed(
                f"step {step}: the weights became non-finite after the optimiser step (first: {bad}; loss {loss}, "
                f"grad norm {gnorm}); no checkpoint of this step was written (earlier ones hold finite weights). "
                "Lower optim.lr or optim.weight_decay, then start again or continue with --resume"
            )
    else:
        session.optimizer.zero_grad(set_to_none=True)
        skips = int(session.state.get("skipped_in_row", 0)) + 1
        session.state["skipped_in_row"] = skips
        if skips >= o.max_skipped_in_row:
            raise RunFailed(
                f"{skips} non-finite updates in a row (step {step}: loss {loss}, grad norm {gnorm}); "
                "lower optim.lr, tighten the clip or add KL"
            )
    schedule_step(session)
    return gnorm, applied


def first_nonfinite_parameter(model) -> str | None:
    """The name of the first parameter holding a NaN or an inf (on any rank), else None.

    One host sync per step: a finite-flag per tensor, stacked (a sum or a norm could overflow on
    finite weights). Sharded (FSDP2) parameters are checked by their local shard, and the verdict is
    shared by a max over ranks, so every rank fails together instead of one waiting on the others.
    """
    params = list(model.named_parameters())
    if not params:
        return None
    with torch.no_grad():
        local = [p.to_local() if hasattr(p, "to_local") else p for _, p in params]
        finite = torch.stack([torch.isfinite(t).all() for t in local])
        bad_here = not bool(finite.all())
        if dist.is_initialized() and dist.world()[1] > 1:
            if dist.all_reduce_max(float(bad_here)) == 0.0:
                return None
        elif not bad_here:
            return None
        first = int((~finite).nonzero()[0]) if bad_here else None
    return params[first][0] if first is not None else "a parameter sharded on another rank"
