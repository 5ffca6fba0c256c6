"""The policy under N processes: the DDP / FSDP2 wrap, whole-parameter views and checkpoints, and the
pairing of the update's passes across ranks (docs/design.md §3, "Scaling out").

In one process every helper here is a no-op or returns its input, so the trainer reads the same with
and without distribution. The collectives themselves (all-reduce, gather, share) are in
:mod:`rlvr_cli.dist`, below every layer that needs them.

Pass pairing (:func:`micro_batch_passes`): DDP all-reduces the gradients in one backward per
minibatch and FSDP2 all-gathers the parameters in every forward, so a rank with fewer micro-batches
than another runs forward (and backward) passes of weight zero until the ranks' collectives pair up.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from rlvr_cli import dist
from rlvr_cli.errors import UserError
from rlvr_cli.recipe.distributed import distributed_problem
from rlvr_cli.train.packing import pack, response_logits


def check_settings(recipe, size: int | None = None) -> None:
    """Exit-2 errors for distributed settings that cannot give the one-process numbers, before anything is
    written (the list: :func:`rlvr_cli.recipe.distributed.distributed_problem`, which `rlvr sweep` checks too)."""
    size = dist.world_size_from_env() if size is None else size
    problem = distributed_problem(recipe, size)
    if problem is not None:
        raise UserError(problem)


def run_info(recipe) -> dict:
    """What run.json records about the processes of a run (nothing in one process)."""
    size = dist.world()[1]
    if size <= 1:
        return {}
    return {"distributed": {"world_size": size, **recipe.distributed.model_dump(mode="json")}}


def wrap_model(model, spec, device):
    """The module the update's forwards go through: DDP under N processes (gradients averaged on the
    last micro-batch's backward), ``model`` itself in one process. FSDP2 shards ``model`` in place."""
    size = dist.world()[1]
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
                dist.collective("FSDP unshard", m.unshard)
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
    return dist.collective("get_model_state_dict", lambda: get_model_state_dict(model, options=opts))


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
    sd = dist.collective("get_optimizer_state_dict", lambda: get_optimizer_state_dict(model, optimizer, options=opts))
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
    dist.collective("set_optimizer_state_dict",
                    lambda: set_optimizer_state_dict(model, optimizer, optim_state_dict=sd, options=opts))


# --- the update's passes --------------------------------------------------------------------------------
def micro_batch_passes(session, backprop: list, forward_only: list, backward: bool) -> Iterator[tuple]:
    """Yield ``(rows, backward)`` for each micro-batch of one minibatch this rank forwards: first the
    ``forward_only`` ones (their loss is exactly zero: statistics only), then the ``backprop`` ones
    (with a backward when ``backward``; each inside its DDP gradient-sync context).

    Between the yields it runs the passes of weight zero that pair this rank's collectives with the
    other ranks': as many forwards as the busiest rank under FSDP2, at least one backward under DDP;
    and with ``backward``, a rank whose rows all have a zero loss still backpropagates once, so its
    step is taken with zero gradients (AdamW's moments move the weights, as they did when those rows
    were backpropagated).
    """
    for k in range(_micro_slots(session, len(forward_only), forward_only=True)):
        if k < len(forward_only):
            yield forward_only[k], False
        else:
            _zero_pass(session, backward=False)
    slots = max(_micro_slots(session, len(backprop)), int(backward))
    for k in range(slots):
        with session.sync_grads(last=k == slots - 1):
            if k < len(backprop):
                yield backprop[k], backward
            else:
                _zero_pass(session, backward)


def _micro_slots(session, mine: int, forward_only: bool = False) -> int:
    """Micro-batch passes this rank runs in a minibatch: its own, or as many as the busiest rank (FSDP2),
    or at least one with a backward (DDP: its backward is where gradients are averaged)."""
    if session.sharded:
        return int(dist.all_reduce_max(mine))
    return max(mine, 1) if dist.world()[1] > 1 and not forward_only else mine


def _zero_pass(session, backward: bool) -> None:
    """A forward (and backward) of weight zero through the update's model, for a rank short of rows."""
    pad = session.tokenizer.pad_token_id
    with session.amp(), torch.set_grad_enabled(backward):
        logits = response_logits(session.train_model, pack([[pad]], [[pad]], pad, session.device))
    if backward:
        (logits.sum() * 0.0).backward()
