"""Checkpoints of LoRA runs (``model.lora``): the adapter alone, beside the base model's config.

A LoRA checkpoint directory holds peft's ``adapter_model.safetensors`` + ``adapter_config.json``, the
base model's ``config.json`` (so it is a checkpoint like any other to the run-directory code), the
tokenizer and ``trainer_state.pt`` (the adapter's optimiser state) -- megabytes instead of the whole
model and its AdamW moments. ``adapter_config.json``'s ``base_model_name_or_path`` is the MODEL
reference of the base (``smollm2-135m-instruct``, ``builtin:tiny``, an absolute path), resolved again
when the checkpoint is loaded.
"""

from __future__ import annotations

import json
from pathlib import Path

from rlvr_cli.errors import UserError

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"


def is_adapter_dir(path: str | Path) -> bool:
    return (Path(path) / ADAPTER_CONFIG).is_file()


def base_ref(ref: str) -> str:
    """The reference stored for a base model: absolute when it is a local path, as given otherwise."""
    p = Path(ref).expanduser()
    return str(p.resolve()) if not ref.startswith("builtin:") and p.exists() else ref


def adapter_base(path: str | Path) -> str:
    """The base MODEL reference of an adapter checkpoint; UserError when its adapter_config.json is unreadable."""
    f = Path(path) / ADAPTER_CONFIG
    try:
        base = json.loads(f.read_text(encoding="utf-8")).get("base_model_name_or_path")
    except (OSError, ValueError, AttributeError) as e:
        raise UserError(f"{f}: cannot read the adapter's config ({e})") from None
    if not isinstance(base, str) or not base:
        raise UserError(f"{f}: base_model_name_or_path names no base model")
    return base


class AdapterCheckpoint:
    """What ``RunDir.save_checkpoint`` saves for a peft policy: the adapter, and the base's config.json."""

    def __init__(self, peft_model, base: str):
        self.model, self.base = peft_model, base_ref(base)

    def save_pretrained(self, path, **kwargs) -> None:
        for config in self.model.peft_config.values():
            config.base_model_name_or_path = self.base
        # said here, not left to peft's "auto": that reads the base's config.json from base_model_name_or_path,
        # which for `builtin:tiny` or `smollm2-135m-instruct` is no path, so peft asks the Hub (and warns) on
        # every checkpoint; rlvr never resizes the vocabulary, so the embeddings are saved only when adapted
        self.model.save_pretrained(path, safe_serialization=True, save_embedding_layers=embeddings_adapted(self.model))
        self.model.get_base_model().config.save_pretrained(path)
        card = Path(path) / "README.md"  # peft's model card: not part of a checkpoint
        card.unlink(missing_ok=True)


def embeddings_adapted(peft_model) -> bool:
    """Whether any LoRA layer of ``peft_model`` wraps an embedding (then peft saves the embeddings)."""
    import torch

    return any(isinstance(getattr(m, "base_layer", None), torch.nn.Embedding) for m in peft_model.modules())


def load_adapter_state(peft_model, path: str | Path) -> None:
    """Put the adapter weights saved in checkpoint ``path`` into ``peft_model`` (same LoRA settings)."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    f = Path(path) / ADAPTER_WEIGHTS
    try:
        state = load_file(str(f), device=str(next(peft_model.parameters()).device))
    except (OSError, ValueError, RuntimeError) as e:
        raise UserError(f"{f}: cannot read the adapter weights ({e})") from None
    result = set_peft_model_state_dict(peft_model, state)
    missing = [k for k in getattr(result, "unexpected_keys", []) if "lora_" in k]
    if missing:
        raise UserError(f"{f}: adapter weights do not fit the recipe's model.lora ({missing[0]} ...)")


def merged(base_model, path: str | Path):
    """``base_model`` with the adapter of checkpoint ``path`` merged into its weights (for evaluation and
    sampling: no adapter overhead in the decode loop)."""
    try:
        from peft import PeftModel
    except ImportError:
        raise UserError(f'{path}: a LoRA checkpoint needs the package peft: pip install -e ".[real]"') from None
    from rlvr_cli.models.quiet import quiet_peft

    try:
        with quiet_peft():
            return PeftModel.from_pretrained(base_model, str(path)).merge_and_unload()
    except (OSError, ValueError, RuntimeError, KeyError) as e:
        raise UserError(f"{path}: cannot load the LoRA adapter: {type(e).__name__}: {e}") from None
