"""What the CPU offers for reduced precision (read from /proc/cpuinfo on Linux)."""

from __future__ import annotations

import functools

import torch

BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
"""CPU flags of native bfloat16 matrix arithmetic; without them torch emulates bf16 GEMMs in software."""


def cpu_flags() -> set[str] | None:
    """The CPU's feature flags, or None where /proc/cpuinfo is not there to say (not Linux)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        return None
    return None


@functools.lru_cache(maxsize=1)
def slow_bf16_on_cpu() -> bool:
    """True when the training would run on this machine's CPU (no CUDA) and the CPU is known to lack
    native bf16 units; False when unknown."""
    if torch.cuda.is_available():
        return False
    flags = cpu_flags()
    return flags is not None and not any(f in flags for f in BF16_CPU_FLAGS)
