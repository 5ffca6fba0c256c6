"""What the CPU offers for reduced precision (its flags, read by :func:`rlvr_cli.numerics.cpu_flags`)."""

from __future__ import annotations

import functools

import torch

from rlvr_cli.numerics import cpu_flags

BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
"""CPU flags of native bfloat16 matrix arithmetic; without them torch emulates bf16 GEMMs in software."""


@functools.lru_cache(maxsize=1)
def slow_bf16_on_cpu() -> bool:
    """True when the training would run on this machine's CPU (no CUDA) and the CPU is known to lack
    native bf16 units; False when unknown."""
    if torch.cuda.is_available():
        return False
    flags = cpu_flags()
    return flags is not None and not any(f in flags for f in BF16_CPU_FLAGS)
