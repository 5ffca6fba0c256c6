"""rlvr_cli/models/precision.py: bf16 is slow on a CPU known to lack its units, and only there."""

from __future__ import annotations

import rlvr_cli.models.precision as precision


def _slow(monkeypatch, flags, cuda=False):
    precision.slow_bf16_on_cpu.cache_clear()
    monkeypatch.setattr(precision, "cpu_flags", lambda: flags)
    monkeypatch.setattr(precision.torch.cuda, "is_available", lambda: cuda)
    try:
        return precision.slow_bf16_on_cpu()
    finally:
        precision.slow_bf16_on_cpu.cache_clear()


def test_slow_only_where_the_flags_are_known_and_lack_bf16(monkeypatch):
    assert _slow(monkeypatch, {"avx2", "fma"}) is True
    assert _slow(monkeypatch, {"avx2", "avx512_bf16"}) is False
    assert _slow(monkeypatch, {"amx_bf16"}) is False
    assert _slow(monkeypatch, None) is False  # unknown: no claim
    assert _slow(monkeypatch, {"avx2"}, cuda=True) is False  # training runs on the GPU
