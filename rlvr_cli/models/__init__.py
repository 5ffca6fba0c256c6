"""Model references and loading (docs/design.md §6).

A MODEL is one of:
- ``builtin:tiny`` / ``builtin:tiny-countdown``: the tiny GPT-2 warm-started on a built-in task by its
  SFT recipe (``recipes/base_sft*.yaml``), built once by :mod:`rlvr_cli.warm_start` (every command
  calls it before loading) and cached (see :mod:`.builtin`); resolving a name never trains;
- ``builtin:tiny-init``: the same architecture, untrained (seeded), for tests and as the warm start's start;
- ``smollm2-135m-instruct``: SmolLM2-135M-Instruct, a real instruct model (Llama, 135M parameters, chat
  template) shipped as a GGUF file in the package of the extra ``real``, converted once into a cached
  Hugging Face folder (see :mod:`.gguf`); any other ``.gguf`` file path is converted the same way;
- a run directory (its latest complete checkpoint), or a checkpoint directory (has ``config.json``);
- a Hugging Face model id or local path, loaded with ``AutoModelForCausalLM.from_pretrained``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from rlvr_cli.errors import RunFailed, UserError
from rlvr_cli.models.quiet import quiet_transformers  # noqa: F401 - also this package's name for it
from rlvr_cli.run_files import STEP_DIR, is_run_dir, list_checkpoints  # noqa: F401 - list_checkpoints: also this module's name for it


@dataclass
class ResolvedModel:
    ref: str
    """The reference as given."""
    path: str
    """What ``from_pretrained`` loads: a local directory or a hub id."""
    kind: str
    """builtin | gguf | run | checkpoint | path | hub"""
    step: int | None = None
    """Training step of a checkpoint, when known."""


def resolve_model_ref(ref: str) -> ResolvedModel:
    """Turn a MODEL reference into something ``from_pretrained`` can load (a warm start must be built)."""
    if ref.startswith("builtin:"):
        from rlvr_cli.models.builtin import builtin_model_dir

        return ResolvedModel(ref, str(builtin_model_dir(ref)), "builtin")
    from rlvr_cli.models.gguf import is_gguf_ref, resolve_gguf_ref

    if is_gguf_ref(ref):
        return ResolvedModel(ref, str(resolve_gguf_ref(ref)), "gguf")
    p = Path(ref).expanduser()
    if p.exists():
        if not p.is_dir():
            raise UserError(f"{ref}: a model must be a directory (run, checkpoint or model), not a file")
        if is_run_dir(p):
            cks = list_checkpoints(p)
            if not cks:
                raise UserError(f"{ref}: run directory has no complete checkpoint yet")
            step, d = cks[-1]
            return ResolvedModel(ref, str(d), "run", step)
        if (p / "config.json").is_file():
            m = STEP_DIR.match(p.name)
            return ResolvedModel(ref, str(p), "checkpoint" if m else "path", int(m.group(1)) if m else None)
        raise UserError(f"{ref}: directory holds no model (no config.json) and is not a run directory")
    if re.fullmatch(r"[\w.-]+(/[\w.-]+)?", ref):
        return ResolvedModel(ref, ref, "hub")
    raise UserError(f"{ref}: no such directory, and not a Hugging Face model id")


def resolve_device(device: str = "auto", flag: str = "device") -> torch.device:
    """The torch device for ``auto``, ``cpu``, ``cuda``, ``cuda:N`` or ``mps``; UserError naming ``flag``
    for a string torch does not know or a device this machine does not have."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError, TypeError):
        raise UserError(f"{flag} {device}: unknown device (choose auto, cpu, cuda, cuda:N or mps)") from None
    if dev.type not in ("cpu", "cuda", "mps"):
        raise UserError(f"{flag} {device}: unsupported device type {dev.type} (choose auto, cpu, cuda, cuda:N or mps)")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"{flag}: {device} requested but no CUDA device is available")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise UserError(f"{flag} {device}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    if dev.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise UserError(f"{flag}: mps requested but no MPS (Apple GPU) device is available")
    return dev


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
"""The one map from a dtype's name in a recipe (``model.dtype``, ``model.autocast``,
``rollout.sample_autocast``) to torch's; a recipe's ``none`` is no autocast (:func:`dtype_named`)."""


def dtype_named(name: str) -> torch.dtype | None:
    """The torch dtype a recipe names (:data:`DTYPES`); None for ``none`` (no autocast)."""
    return None if name == "none" else DTYPES[name]


def weights_and_autocast(dtype: str, device: torch.device) -> tuple[torch.dtype, torch.dtype | None]:
    """(weight dtype, autocast dtype) for a recipe's ``model.dtype`` on a device.

    ``auto``: float32 weights everywhere, with bfloat16 autocast on CUDA (mixed precision keeps the
    optimiser in float32). An explicit dtype casts the weights and uses no autocast.
    """
    if dtype == "auto":
        return torch.float32, (torch.bfloat16 if device.type == "cuda" else None)
    return DTYPES[dtype], None


def sampling_autocast(sample_autocast: str, trainer: torch.dtype | None) -> torch.dtype | None:
    """The autocast dtype of the sampling pass: ``rollout.sample_autocast`` when set (a deliberate
    sampler/trainer mismatch, as a bf16 inference engine beside a float32 trainer), else the trainer's."""
    return trainer if sample_autocast == "none" else DTYPES[sample_autocast]


def trainer_autocast(dtype: str, autocast: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype of the trainer's passes (sampling, log-probs, update): ``model.autocast`` when
    set, else what ``model.dtype`` implies on ``device`` (:func:`weights_and_autocast`)."""
    return weights_and_autocast(dtype, device)[1] if autocast == "auto" else dtype_named(autocast)


TOKENIZER_FILES = (("tokenizer.json",), ("vocab.json", "merges.txt"), ("tokenizer.model",), ("spiece.model",),
                   ("sentencepiece.bpe.model",), ("vocab.txt",), ("tiktoken.model",))
"""Files any one of which (or pair) lets ``AutoTokenizer`` build a real vocabulary."""


def _tokenizer_files_problem(path: str) -> str | None:
    """For a local model directory without a tokenizer: what is missing and what is there."""
    p = Path(path)
    if not p.is_dir() or any(all((p / f).is_file() for f in group) for group in TOKENIZER_FILES):
        return None
    if any(f.suffix == ".tiktoken" for f in p.iterdir()):
        return None
    wanted = ", or ".join(" + ".join(group) for group in TOKENIZER_FILES)
    present = ", ".join(sorted(f.name for f in p.iterdir() if f.is_file())) or "nothing"
    return f"{path}: no tokenizer files (need {wanted}); the directory holds {present}. Copy the tokenizer the model was trained with into it (tokenizer.save_pretrained)"


def load_tokenizer(path: str):
    from transformers import AutoTokenizer

    problem = _tokenizer_files_problem(path)
    if problem:
        raise UserError(problem)
    try:
        tok = AutoTokenizer.from_pretrained(path)
    except Exception as e:  # noqa: BLE001 - surfaced to the user with the path
        raise UserError(f"{path}: cannot load tokenizer: {type(e).__name__}: {e}") from None
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    if tok.eos_token_id is None:
        raise UserError(f"{path}: tokenizer has no EOS token; responses could never finish")
    if len(tok) < 2:
        raise UserError(f"{path}: the tokenizer has a vocabulary of {len(tok)} token(s); its files are incomplete")
    return tok


MAX_ADAPTER_CHAIN = 8
"""LoRA checkpoints whose base is itself a LoRA checkpoint, at most this many deep."""


def load_model(ref: str, device: str | torch.device = "cpu", dtype: str = "auto", _adapters: tuple[str, ...] = ()):
    """Load (model, tokenizer, ResolvedModel) for a MODEL reference, in eval mode, on ``device``.

    A LoRA checkpoint loads its base (``adapter_config.json``'s ``base_model_name_or_path``) first;
    ``_adapters`` holds the checkpoints on the way there, so a base that leads back to one of them (a
    checkpoint naming itself, or a cycle) is a UserError, not an endless recursion."""
    from transformers import AutoModelForCausalLM

    quiet_transformers()
    resolved = resolve_model_ref(ref)
    dev = device if isinstance(device, torch.device) else resolve_device(device)
    wdtype, _ = weights_and_autocast(dtype, dev)
    from rlvr_cli.models.adapter import ADAPTER_CONFIG, adapter_base, is_adapter_dir, merged

    here = os.path.realpath(resolved.path)
    if here in _adapters or len(_adapters) >= MAX_ADAPTER_CHAIN:
        chain = " -> ".join([*_adapters, here])
        why = "leads back to a checkpoint on the way" if here in _adapters else f"is more than {MAX_ADAPTER_CHAIN} adapters deep"
        raise UserError(f"{Path(_adapters[-1]) / ADAPTER_CONFIG}: base_model_name_or_path {ref!r} {why} ({chain}); "
                        "a LoRA checkpoint's base must be the model it was trained from")
    if is_adapter_dir(resolved.path):  # a LoRA run's checkpoint: its base with the adapter merged in
        base, _, _ = load_model(adapter_base(resolved.path), dev, dtype, (*_adapters, here))
        model = merged(base, resolved.path)
        model.eval()
        return model, load_tokenizer(resolved.path), resolved
    try:
        model = AutoModelForCausalLM.from_pretrained(resolved.path, dtype=wdtype)
    except TypeError:  # older transformers call it torch_dtype
        model = AutoModelForCausalLM.from_pretrained(resolved.path, torch_dtype=wdtype)
    except OSError as e:
        raise UserError(f"{ref}: cannot load model from {resolved.path}: {e}") from None
    except RunFailed:  # the run was stopped meanwhile (SIGTERM under torchrun): not the model's fault
        raise
    except Exception as e:  # noqa: BLE001
        raise UserError(f"{ref}: cannot load model from {resolved.path}: {type(e).__name__}: {e}") from None
    tok = load_tokenizer(resolved.path)
    model.to(dev)
    model.eval()
    return model, tok, resolved
