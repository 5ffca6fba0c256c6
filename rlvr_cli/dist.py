"""The few collectives the trainer and the evaluation need, as no-ops in one process (docs/design.md §3,
"Scaling out"). The model's DDP / FSDP2 wrap and the torchrun launch are the trainer's:
:mod:`rlvr_cli.train.parallel`, :mod:`rlvr_cli.train.launch`.

A run under ``torchrun`` (``WORLD_SIZE`` > 1 in the environment) joins one process group
(:func:`init_from_env`); without it :func:`world` is ``(0, 1)`` and every helper returns its input,
so the trainer reads the same with and without distribution. A collective that fails (a peer died,
or did not answer within ``distributed.timeout_s``) raises :class:`~rlvr_cli.errors.RunFailed`
naming this rank, so the run is marked failed and its process exits non-zero.

Work split: the P prompts of a step are split into contiguous shares of whole groups
(:func:`share`); every rank draws the same P prompts, samples only its share, and the groups are
gathered in global order (:func:`gather_objects`), so every rank sees the same groups as one
process does.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from collections.abc import Sequence

import torch

from rlvr_cli.errors import RunFailed, UserError


def is_initialized() -> bool:
    import torch.distributed as tdist

    return tdist.is_available() and tdist.is_initialized()


def world() -> tuple[int, int]:
    """(rank, world size); (0, 1) when no process group is initialised."""
    if not is_initialized():
        return 0, 1
    import torch.distributed as tdist

    return tdist.get_rank(), tdist.get_world_size()


def is_main() -> bool:
    """True on the rank that writes files (rank 0, or the only process)."""
    return world()[0] == 0


def launched_by_torchrun() -> bool:
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def init_from_env(spec, device_setting: str) -> str:
    """Join the process group torchrun describes; returns the device to use (``cuda:LOCAL_RANK`` on CUDA).

    ``spec`` is the recipe's ``distributed`` section. No-op (returns ``device_setting``) in one process.
    """
    if not launched_by_torchrun() or is_initialized():
        return device_setting
    import torch.distributed as tdist

    cuda = device_setting in ("auto", "cuda") and torch.cuda.is_available()
    backend = spec.backend if spec.backend != "auto" else ("nccl" if cuda else "gloo")
    if backend == "nccl" and not cuda:
        raise UserError("distributed.backend: nccl needs CUDA devices; use gloo (or auto) on the CPU")
    device = device_setting
    if cuda:
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    # Joining blocks inside torch's C++ rendezvous, where a Python SIGTERM handler never runs: if another
    # rank already failed (a locked run directory), torchrun's SIGTERM would wait out its 30 s grace for
    # SIGKILL. Nothing is written before the group exists, so until then SIGTERM simply ends this rank.
    import signal
    import threading

    main = threading.current_thread() is threading.main_thread()
    handler = signal.signal(signal.SIGTERM, signal.SIG_DFL) if main else None
    try:
        tdist.init_process_group(backend=backend, timeout=_dt.timedelta(seconds=spec.timeout_s))
    finally:
        if main:
            signal.signal(signal.SIGTERM, handler)
    return device


def shutdown() -> None:
    if is_initialized():
        import torch.distributed as tdist

        tdist.destroy_process_group()


_SOURCE_PREFIX = re.compile(r"^\[[^\]]*\.(?:cc|cpp|h|hpp):\d+\]\s*")
_BOILERPLATE = (". This is typically caused by", " This is typically caused by", ". Check the logs")


def backend_message(e: BaseException) -> str:
    """The first line of a gloo/nccl error without its C++ source location and its advice to read other
    logs: ``Read error [127.0.0.1]:7851: Connection reset by peer``."""
    first = str(e).splitlines()[0] if str(e) else ""
    first = _SOURCE_PREFIX.sub("", first.strip())
    for cut in _BOILERPLATE:
        if cut in first:
            first = first[:first.index(cut)]
    return first[:300]


def _collective_failed(name: str, e: BaseException) -> RunFailed:
    rank, size = world()
    first = backend_message(e)
    return RunFailed(
        f"rank {rank} of {size}: the collective {name} failed ({type(e).__name__}: {first}); "
        "another rank died or did not answer within distributed.timeout_s; continue with --resume"
    )


def collective(name: str, fn):
    """``fn()``, a collective: a failure of it raises the RunFailed naming this rank."""
    try:
        return fn()
    except RunFailed:
        raise
    except Exception as e:  # noqa: BLE001 - gloo/nccl raise RuntimeError subclasses that differ by version
        raise _collective_failed(name, e) from None


_BACKEND_SIGNS = ("gloo", "nccl", "timed out", "application timeout", "pair closure", "connection closed",
                  "connection reset", "read error", "broken pipe")


def collective_failure(e: BaseException) -> RunFailed | None:
    """The RunFailed naming this rank for an error a collective raised *inside* torch (DDP's gradient
    all-reduce in backward, FSDP2's all-gathers) when another rank died or hung; None for anything else
    (and always in one process)."""
    if world()[1] <= 1 or not isinstance(e, RuntimeError):
        return None
    import torch.distributed as tdist

    dist_error = getattr(tdist, "DistError", None)
    if (dist_error is not None and isinstance(e, dist_error)) or any(w in str(e).lower() for w in _BACKEND_SIGNS):
        return _collective_failed("inside DDP/FSDP2 (forward, backward or parameter gathering)", e)
    return None


def share(n: int, rank: int | None = None, size: int | None = None) -> range:
    """The contiguous share of ``n`` items (groups) of ``rank``: sizes differ by at most one, low ranks first."""
    if rank is None or size is None:
        rank, size = world()
    base, extra = divmod(n, size)
    lo = rank * base + min(rank, extra)
    return range(lo, lo + base + (rank < extra))


def all_reduce(values: Sequence[float], op: str = "sum") -> list[float]:
    """Element-wise sum / max / min of a list of floats over ranks (float64)."""
    if not is_initialized():
        return [float(v) for v in values]
    import torch.distributed as tdist

    t = torch.tensor([float(v) for v in values], dtype=torch.float64)
    ops = {"sum": tdist.ReduceOp.SUM, "max": tdist.ReduceOp.MAX, "min": tdist.ReduceOp.MIN}
    collective(f"all_reduce({op})", lambda: tdist.all_reduce(t, op=ops[op]))
    return t.tolist()


def all_reduce_sum(value: float) -> float:
    return all_reduce([value], "sum")[0]


def all_reduce_max(value: float) -> float:
    return all_reduce([value], "max")[0]


def gather_objects(obj) -> list:
    """Every rank's ``obj`` in rank order, on every rank (``[obj]`` in one process)."""
    if not is_initialized():
        return [obj]
    import torch.distributed as tdist

    out = [None] * world()[1]
    collective("all_gather_object", lambda: tdist.all_gather_object(out, obj))
    return out


def gather_concat(items: list) -> list:
    """Concatenate every rank's list in rank order (the global order of contiguous shares)."""
    return [x for part in gather_objects(items) for x in part]


def barrier() -> None:
    if is_initialized():
        import torch.distributed as tdist

        collective("barrier", tdist.barrier)


def world_size_from_env() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))
