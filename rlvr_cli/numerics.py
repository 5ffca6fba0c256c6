"""CPU numerics that do not depend on the CPU kind: the same bits on every x86-64 machine.

PyTorch picks its CPU kernels by what the processor offers: ATen's vectorised kernels (softmax, GELU,
layer norm, reductions), MKL's matrix products and oneDNN each have an AVX2 and an AVX-512 path, and the
two sum in different orders, so their last bits differ. One step of training hides that; hundreds do not
(the 900-step warm start of ``builtin:tiny`` came out as other weights with and without AVX-512, and so
did every run after it). :func:`pin_portable_numerics` asks all three libraries for their AVX2 paths,
which nearly every x86-64 processor in use has, so a run is the same to the bit on a machine with
AVX-512 and on one without (same torch build, same thread count).

It must run before torch is imported: ATen reads ``ATEN_CPU_CAPABILITY`` once, at import, and MKL and
oneDNN read theirs on first use. ``rlvr_cli/__init__.py`` calls it, so every `rlvr` command, the sweep's
runs, the tests (tests/conftest.py imports rlvr_cli first) and any script that imports rlvr_cli before
torch get it. A variable the user set is kept; ``RLVR_CPU_NUMERICS=native`` turns the pinning off (each
CPU's fastest kernels; runs then reproduce only on the same CPU kind). Other architectures (aarch64)
and GPUs are left alone. :func:`numerics_kind` says what a process actually runs with, for the run's
fingerprint (docs/reproducibility.md).
"""

from __future__ import annotations

import os
import platform
import sys

PORTABLE_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "MKL_CBWR": "AVX2",
                "ONEDNN_MAX_CPU_ISA": "AVX2"}
"""The variables that select ATen's, MKL's and oneDNN's AVX2 kernels (each library's documented switch);
``MKL_CBWR`` is MKL's conditional numerical reproducibility mode, the same results on Intel and AMD
processors that run its AVX2 code."""
SWITCH = "RLVR_CPU_NUMERICS"
"""`portable` (default) or `native`."""
MODES = ("portable", "native")


def switch_problem() -> str | None:
    """The one-line complaint about an :data:`SWITCH` value that is neither mode (case and spaces aside;
    empty is the default), or None. A typo must not quietly run the default: the CLI refuses it (exit 2)."""
    value = os.environ.get(SWITCH, "")
    if value.strip().lower() in ("", *MODES):
        return None
    return f"{SWITCH}={value!r}: unknown value (valid: {', '.join(MODES)})"


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


def _x86_64() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


def pin_portable_numerics() -> bool:
    """Set :data:`PORTABLE_ENV` (where unset) on an x86-64 CPU with AVX2 and FMA, unless
    ``RLVR_CPU_NUMERICS=native``; returns whether it did. A no-op once torch is imported (too late)."""
    if os.environ.get(SWITCH, "portable").strip().lower() == "native" or "torch" in sys.modules:
        return False
    if not _x86_64() or not {"avx2", "fma"} <= (cpu_flags() or set()):
        return False
    for key, value in PORTABLE_ENV.items():
        os.environ.setdefault(key, value)
    return True


def numerics_kind() -> str:
    """What decides the last bits of this process's CPU arithmetic, e.g.
    ``x86_64/AVX2/mkl=AVX2/mkl_cbwr=AVX2/onednn=AVX2`` (architecture, ATen's kernel level, and the MKL and
    oneDNN settings when set): two runs with the same string, torch version and thread count compute the
    same bits."""
    import torch

    parts = [platform.machine().lower() or "unknown", torch.backends.cpu.get_cpu_capability()]
    for key, name in (("MKL_ENABLE_INSTRUCTIONS", "mkl"), ("MKL_CBWR", "mkl_cbwr"), ("ONEDNN_MAX_CPU_ISA", "onednn")):
        if os.environ.get(key):
            parts.append(f"{name}={os.environ[key]}")
    return "/".join(parts)
