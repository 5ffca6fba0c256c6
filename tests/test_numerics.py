"""Portable CPU numerics: rlvr pins ATen, MKL and oneDNN to their AVX2 kernels before torch loads."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from rlvr_cli.numerics import PORTABLE_ENV, cpu_flags, numerics_kind

X86_AVX2 = platform.machine().lower() in ("x86_64", "amd64") and {"avx2", "fma"} <= (cpu_flags() or set())


def _capability(code: str, **env) -> str:
    base = {k: v for k, v in os.environ.items() if k not in PORTABLE_ENV and k != "RLVR_CPU_NUMERICS"}
    out = subprocess.run([sys.executable, "-c", code + "; print(torch.backends.cpu.get_cpu_capability())"],
                         env={**base, **env}, capture_output=True, text=True, timeout=120, check=True)
    return out.stdout.split()[-1]


@pytest.mark.skipif(not X86_AVX2, reason="the pinning applies to x86-64 CPUs with AVX2")
def test_importing_rlvr_pins_the_avx2_kernels_unless_told_otherwise():
    assert _capability("import rlvr_cli, torch") == "AVX2"
    assert _capability("import rlvr_cli, torch", ATEN_CPU_CAPABILITY="default") == "DEFAULT"  # the user's own wins
    native = _capability("import torch")
    assert _capability("import rlvr_cli, torch", RLVR_CPU_NUMERICS="native") == native
    assert _capability("import torch, rlvr_cli") == native  # too late once torch is loaded: nothing pretends


def test_the_numerics_kind_names_what_this_process_runs():
    import torch

    kind = numerics_kind()
    assert kind.split("/")[0] == platform.machine().lower()
    assert kind.split("/")[1] == torch.backends.cpu.get_cpu_capability()
    if X86_AVX2 and os.environ.get("RLVR_CPU_NUMERICS", "portable") != "native":
        assert kind == "x86_64/AVX2/mkl=AVX2/mkl_cbwr=AVX2/onednn=AVX2"
