"""Versions of the policy's weights: what a stale batch is sampled with (issue 41, docs/async.md).

Version v is the policy after the updates of step v (0: the weights the run starts from), so the
batch of step t sampled on-policy has version t-1. Only the tensors that train make a version: every
parameter of a full fine-tune, the adapter's of a LoRA policy (its base weights never change), so a
LoRA run keeps k small copies, not k models. Swapping a version into the policy and back copies
tensors of the same dtype, bit for bit: sampling with a swapped-in version computes exactly what the
policy of that version computed (the property an overlapped sampler is tested against).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch


def trainable_tensors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A detached copy of the parameters that train (``requires_grad``), by name: one policy version."""
    return {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}


def load_tensors(model: torch.nn.Module, tensors: dict[str, torch.Tensor]) -> None:
    """Copy ``tensors`` (a :func:`trainable_tensors` of the same model) into the model's parameters, in place."""
    params = dict(model.named_parameters())
    unknown = sorted(set(tensors) - set(params))
    if unknown:
        raise KeyError(f"policy version: parameters the model does not have: {unknown[:3]}")
    with torch.no_grad():
        for name, t in tensors.items():
            params[name].copy_(t)


@contextmanager
def weights_swapped(model: torch.nn.Module, tensors: dict[str, torch.Tensor]):
    """Inside the ``with``, ``model`` holds the version ``tensors``; after it, exactly its own weights again
    (the optimiser's parameter objects are the same ones throughout: only their values are copied)."""
    own = {name: p.detach().clone() for name, p in model.named_parameters() if name in tensors}
    load_tensors(model, tensors)
    try:
        yield model
    finally:
        load_tensors(model, own)
