"""AdamW with a warm-up and a decay schedule, stepped once per optimiser update."""

from __future__ import annotations

import math

import torch

from rlvr_cli.recipe.schema import OptimSpec


def lr_factor(update: int, total_updates: int, spec: OptimSpec) -> float:
    """Multiplier on the peak lr after ``update`` completed updates (0-based for the coming one).

    Linear warm-up from lr/warmup to lr over ``warmup_steps`` updates, then constant, linear decay or
    cosine decay to ``min_lr_ratio * lr`` at ``total_updates``.
    """
    if spec.warmup_steps and update < spec.warmup_steps:
        return (update + 1) / spec.warmup_steps
    if spec.schedule == "constant":
        return 1.0
    span = max(1, total_updates - spec.warmup_steps)
    progress = min(1.0, (update - spec.warmup_steps) / span)
    floor = spec.min_lr_ratio
    if spec.schedule == "linear":
        return floor + (1.0 - floor) * (1.0 - progress)
    return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def build_optimizer(params, spec: OptimSpec) -> torch.optim.AdamW:
    return torch.optim.AdamW(
        [p for p in params if p.requires_grad],
        lr=spec.lr,
        betas=tuple(spec.betas),
        eps=spec.adam_eps,
        weight_decay=spec.weight_decay,
    )


def build_scheduler(optimizer, spec: OptimSpec, total_updates: int) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda u: lr_factor(u, total_updates, spec))


def grad_norm_and_clip(params, max_norm: float | None) -> float:
    """Global L2 norm of the gradients (before clipping); clips in place when ``max_norm`` is set."""
    params = [p for p in params if p.grad is not None]
    if not params:
        return 0.0
    if hasattr(params[0].grad, "full_tensor"):  # sharded (FSDP2) gradients: the norm of the whole gradient
        norm = torch.nn.utils.clip_grad_norm_(params, math.inf if max_norm is None else max_norm)
        return float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)
    if max_norm is None:
        return float(torch.linalg.vector_norm(torch.stack([p.grad.detach().norm() for p in params])))
    return float(torch.nn.utils.clip_grad_norm_(params, max_norm))
