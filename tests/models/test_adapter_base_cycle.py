"""A LoRA checkpoint whose adapter_config.json names itself (or a checkpoint that names it back) as its
base recursed until Python gave up (issue 44): it exits 2 naming the adapter_config.json and the chain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlvr_cli.errors import UserError
from rlvr_cli.models import MAX_ADAPTER_CHAIN, load_model


def _adapter_checkpoint(path: Path, base: str) -> Path:
    """What the loader reads of a LoRA checkpoint before any weight: config.json and adapter_config.json."""
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    (path / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": base, "peft_type": "LORA"}))
    return path


def test_a_checkpoint_that_is_its_own_base_exits_2_through_the_cli(tmp_path, cli):
    ck = _adapter_checkpoint(tmp_path / "ck", str(tmp_path / "ck"))
    r = cli("eval", str(ck), "--task", "arithmetic", "--n", "1", "--num-prompts", "1")
    assert r.code == 2, r.stderr
    assert f"{ck}/adapter_config.json: base_model_name_or_path" in r.stderr and "leads back to a checkpoint" in r.stderr


def test_a_cycle_of_two_checkpoints_names_the_chain(tmp_path):
    a = _adapter_checkpoint(tmp_path / "a", str(tmp_path / "b"))
    _adapter_checkpoint(tmp_path / "b", str(tmp_path / "a"))
    with pytest.raises(UserError, match=rf"{tmp_path}/b/adapter_config.json: .* \({tmp_path}/a -> {tmp_path}/b -> {tmp_path}/a\)"):
        load_model(str(a))


def test_a_chain_longer_than_the_limit_exits_2(tmp_path):
    n = MAX_ADAPTER_CHAIN + 1
    for i in range(n):
        _adapter_checkpoint(tmp_path / f"c{i}", str(tmp_path / f"c{i + 1}"))
    with pytest.raises(UserError, match=rf"is more than {MAX_ADAPTER_CHAIN} adapters deep"):
        load_model(str(tmp_path / "c0"))
