"""The few collectives the trainer needs, as no-ops in one process (docs/design.md §3, "Scaling out").

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
    tdist.init_process_group(backend=backend, timeout=_dt.timedelta(seconds=spec.timeout_s))
    return device


def shutdown() -> None:
    if is_initialized():
        import torch.distributed as tdist

        tdist.destroy_process_group()


def _collective_failed(name: str, e: BaseException) -> RunFailed:
    rank, size = world()
    first = str(e).splitlines()[0][:300] if str(e) else ""
    return RunFailed(
        f"rank {rank} of {size}: the collective {name} failed ({type(e).__name__}: {first}); "
        "another rank died or did not answer within distributed.timeout_s; continue with --resume"
    )


def _collective(name: str, fn):
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
    _collective(f"all_reduce({op})", lambda: tdist.all_reduce(t, op=ops[op]))
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
    _collective("all_gather_object", lambda: tdist.all_gather_object(out, obj))
    return out


def gather_concat(items: list) -> list:
    """Concatenate every rank's list in rank order (the global order of contiguous shares)."""
    return [x for part in gather_objects(items) for x in part]


def barrier() -> None:
    if is_initialized():
        import torch.distributed as tdist

        _collective("barrier", tdist.barrier)


def broadcast_object(obj):
    """Rank 0's ``obj`` on every rank."""
    if not is_initialized():
        return obj
    import torch.distributed as tdist

    box = [obj]
    _collective("broadcast_object_list", lambda: tdist.broadcast_object_list(box, src=0))
    return box[0]


def world_size_from_env() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def check_settings(recipe, size: int | None = None) -> None:
    """Exit-2 errors for distributed settings that cannot give the one-process numbers, before anything is written."""
    size = world_size_from_env() if size is None else size
    if size <= 1:
        return
    if recipe.algorithm != "rl":
        raise UserError(f"distributed: {size} processes: only `algorithm: rl` runs distributed; run SFT on one process")
    p = recipe.rollout.prompts_per_step
    if size > p:
        raise UserError(
            f"rollout.prompts_per_step ({p}) is smaller than the {size} processes: a group never straddles "
            "ranks, so every rank needs at least one prompt; use at most that many processes (--nproc)"
        )
    lo = recipe.loss
    for field, value in (("loss.top_entropy_quantile", lo.top_entropy_quantile), ("loss.cov_penalty", lo.cov_penalty)):
        if value is not None:  # their token choice needs the whole minibatch's quantile / covariance on one rank
            raise UserError(f"{field}: chooses tokens from statistics of the whole minibatch, which {size} processes "
                            "do not gather yet; run it on one process")


def run_info(recipe) -> dict:
    """What run.json records about the processes of a run (nothing in one process)."""
    size = world()[1]
    if size <= 1:
        return {}
    return {"distributed": {"world_size": size, **recipe.distributed.model_dump(mode="json")}}


def wrap_model(model, spec, device):
    """The module the update's forwards go through: DDP under N processes (gradients averaged on the
    last micro-batch's backward), ``model`` itself in one process. FSDP2 shards ``model`` in place."""
    size = world()[1]
    if size <= 1:
        return model
    if spec.strategy == "fsdp2":
        return shard_fsdp2(model)
    import warnings

    from torch.nn.parallel import DistributedDataParallel as DDP

    ids = [device.index] if getattr(device, "type", "cpu") == "cuda" else None
    with warnings.catch_warnings():  # newer torch renames it; every rank loads the same buffers anyway
        warnings.filterwarnings("ignore", message=".*broadcast_buffers")
        return DDP(model, device_ids=ids, broadcast_buffers=False)


def decoder_blocks(model) -> list:
    """The repeated decoder blocks of a transformers causal LM (its ``_no_split_modules`` classes)."""
    names = set(getattr(model, "_no_split_modules", None) or [])
    return [m for m in model.modules() if type(m).__name__ in names]


def shard_fsdp2(model):
    from torch.distributed.fsdp import fully_shard

    blocks = decoder_blocks(model)
    if not blocks:
        raise UserError(
            f"distributed.strategy: fsdp2 finds no decoder-block class in {type(model).__name__} "
            "(its _no_split_modules is empty); use ddp"
        )
    for block in blocks:
        fully_shard(block)
    fully_shard(model)
    return model


class terminated_as_failure:
    """Turn SIGTERM (torchrun stopping the other workers when one fails) into a failed run, not a silent death.

    Inside it, SIGTERM raises :class:`RunFailed`, so the run loop marks the run failed before exiting.
    No-op in one process.
    """

    def __enter__(self):
        import signal

        self._old = None
        if launched_by_torchrun():
            def stop(signum, frame):
                import sys

                if sys.exc_info()[1] is not None:  # already failing (a collective broke): let it finish writing
                    return
                rank, size = world()
                raise RunFailed(f"rank {rank} of {size}: stopped by torchrun (SIGTERM) after another rank failed; "
                                "continue with --resume")

            self._old = signal.signal(signal.SIGTERM, stop)
        return self

    def __exit__(self, *exc):
        import signal

        if self._old is not None:
            signal.signal(signal.SIGTERM, self._old)
        if exc[0] is None:
            shutdown()
        return False


def is_fsdp(model) -> bool:
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # pragma: no cover - torch without FSDP2
        return False
    return isinstance(model, FSDPModule)


class full_params:
    """Inside it, an FSDP2 model holds its whole parameters (all-gathered once) and its forwards issue no
    collective, so ranks may run different numbers of them (sampling, no-grad log-probs, eval).
    No-op for any other model. Costs one full copy of the parameters while it lasts, as DDP always does."""

    def __init__(self, model):
        self.model = model
        self.on = is_fsdp(model)

    def _modules(self):
        from torch.distributed.fsdp import FSDPModule

        return [m for m in self.model.modules() if isinstance(m, FSDPModule)]

    def __enter__(self):
        if self.on:
            self.model.set_reshard_after_forward(False)
            for m in self._modules():
                _collective("FSDP unshard", m.unshard)
        return self.model

    def __exit__(self, *exc):
        if self.on:
            for m in self._modules():
                m.reshard()
            self.model.set_reshard_after_forward(True)
        return False


def full_state_dict(model, rank0_only: bool = True) -> dict:
    """The model's whole state dict (on CPU): gathered from the shards under FSDP2 (every rank must call
    it; with ``rank0_only`` the others get an empty dict), the module's own otherwise."""
    if not is_fsdp(model):
        return model.state_dict()
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    opts = StateDictOptions(full_state_dict=True, cpu_offload=rank0_only)
    return _collective("get_model_state_dict", lambda: get_model_state_dict(model, options=opts))


def without_tied_aliases(model, state: dict) -> dict:
    """``state`` less the second names of shared (tied) parameters, as save_pretrained writes a model."""
    own = {n for n, _ in model.named_parameters()} | {n for n, _ in model.named_buffers()}
    return {k: v for k, v in state.items() if k in own}


def _param_names(model) -> list[str]:
    """The optimiser's parameters in its order (build_optimizer: the trainable ones, in model order)."""
    return [n for n, p in model.named_parameters() if p.requires_grad]


def optimizer_state(model, optimizer) -> dict:
    """The optimiser state in torch's one-process layout (parameters by index), whatever the strategy,
    so a checkpoint resumes on any number of processes. Every rank must call it under FSDP2."""
    if not is_fsdp(model):
        return optimizer.state_dict()
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
    sd = _collective("get_optimizer_state_dict", lambda: get_optimizer_state_dict(model, optimizer, options=opts))
    if not sd:
        return {}
    index = {n: i for i, n in enumerate(_param_names(model))}
    return {
        "state": {index[n]: v for n, v in sd["state"].items()},
        "param_groups": [{**g, "params": [index[n] for n in g["params"]]} for g in sd["param_groups"]],
    }


def load_optimizer_state(model, optimizer, state: dict) -> None:
    """Load a one-process-layout optimiser state (:func:`optimizer_state`) into ``optimizer``."""
    if not is_fsdp(model):
        optimizer.load_state_dict(state)
        return
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    names = _param_names(model)
    sd = {
        "state": {names[i]: v for i, v in state["state"].items()},
        "param_groups": [{**g, "params": [names[i] for i in g["params"]]} for g in state["param_groups"]],
    }
    opts = StateDictOptions(full_state_dict=True)
    _collective("set_optimizer_state_dict",
                lambda: set_optimizer_state_dict(model, optimizer, optim_state_dict=sd, options=opts))
