"""What makes a run's numbers, hashed: the one home of every digest rlvr records or keys a cache by.

- :func:`weights_digest`: blake2b over a model's state dict (each tensor's name, dtype, shape and raw
  bytes); as ``blake2b:<hex>`` (:func:`weights_fingerprint`) it is run.json's ``base_weights`` and the
  shipped manifest's ``weights``, bare it is part of the evaluation cache's key;
- :func:`tokenizer_digest`: the tokenizer's serialised vocabulary, chat template and special ids;
- :func:`package_source_digest`: every .py file of this package (path and bytes), run.json's ``code``;
  :func:`code_revision` the git commit it runs from (``git_commit``, ``code_revision``);
- :func:`data_fingerprint`: the rows a task serves (run.json's ``task_data``); a file-backed task hashes
  its own rows with :func:`dataset_rows_fingerprint`;
- :func:`reward_source_digest` and :func:`reward_code_digest`: the user's reward functions' source
  (``reward_functions``, ``reward_code``; which file a function lives in is ``rewards/function.py``'s);
- :func:`library_versions` (:data:`LIBRARIES`, the evaluation cache's key) and :func:`versions`
  (run.json's ``versions``).

Every value here is recorded in committed results/ and golden records, or names a cache entry: a change
to how one is computed changes them all, so tests/test_fingerprints.py pins the values on the shipped
``builtin:tiny`` and the built-in task. Who assembles them: ``train/fingerprint.py`` (run.json's
``fingerprint``), ``evaluation/cache.py`` (the initial evaluation's key), ``warm_start.py`` (the manifest).
"""

from __future__ import annotations

import hashlib
import json
import platform
import random
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from rlvr_cli import __version__

if TYPE_CHECKING:  # torch loads only where weights are hashed: a reward worker imports this module
    import torch

PACKAGE = Path(__file__).resolve().parent
"""The package whose source :func:`package_source_digest` hashes (this file's folder, rlvr_cli/)."""


def blake2b_text(text: str) -> str:
    """``blake2b:<32 hex>`` of a text's UTF-8 bytes (run.json's ``recipe``: the resolved recipe's YAML)."""
    return "blake2b:" + hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def weights_digest(model: torch.nn.Module) -> str:
    """blake2b over the state dict: each tensor's name, dtype, shape and raw bytes (32 hex, no prefix)."""
    import torch

    h = hashlib.blake2b(digest_size=16)
    for name, t in model.state_dict().items():
        t = t.detach().to("cpu").contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}\0".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def weights_fingerprint(model: torch.nn.Module) -> str:
    """``blake2b:<weights_digest>``: run.json's ``base_weights``, the shipped manifest's ``weights``."""
    return f"blake2b:{weights_digest(model)}"


def tokenizer_digest(tokenizer) -> str:
    """blake2b (32 hex) of the tokenizer's serialised vocabulary, chat template, special ids and class."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    vocab = backend.to_str() if backend is not None else json.dumps(sorted(tokenizer.get_vocab().items()))
    text = json.dumps([vocab, getattr(tokenizer, "chat_template", None), tokenizer.eos_token_id,
                       tokenizer.pad_token_id, tokenizer.bos_token_id, type(tokenizer).__name__])
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def source_digest(root: Path) -> str:
    """blake2b (32 hex) of every .py file under ``root``: its path relative to ``root`` and its bytes, in path order."""
    h = hashlib.blake2b(digest_size=16)
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


@lru_cache(maxsize=1)
def package_source_digest() -> str:
    """:func:`source_digest` of this package (computed once per process)."""
    return source_digest(PACKAGE)


def code_revision() -> str | None:
    """The commit of the checkout this package runs from (run.json's `git_commit`); None outside git."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, cwd=PACKAGE)
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


LIBRARIES = ("torch", "transformers", "tokenizers", "numpy", "sympy", "math-verify", "reasoning-gym")
"""What the sampler and the true verifiers run on: a new version of any is a new evaluation cache key."""


@lru_cache(maxsize=1)
def library_versions() -> dict[str, str | None]:
    """{distribution: installed version, or None} for each of :data:`LIBRARIES`."""
    from importlib import metadata

    out = {}
    for name in LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def versions() -> dict:
    """run.json's ``versions``: rlvr, torch, transformers and Python."""
    import torch
    import transformers

    return {
        "rlvr": __version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
    }


FINGERPRINT_TRAIN_DRAWS = 256
"""Training prompts a generated task's fingerprint hashes (drawn with ``random.Random(0)``)."""


def data_fingerprint(task) -> str:
    """``blake2b:<hex>`` of the rows a task serves, so that two runs can be shown to use the same data.

    A task with its own ``data_fingerprint()`` (a file-backed one hashes its rows) says it; otherwise the
    held-out problems and the first :data:`FINGERPRINT_TRAIN_DRAWS` training prompts of a fixed draw are
    hashed (id, prompt and gold answer each), which changes with the task's settings and its generator.
    """
    own = getattr(task, "data_fingerprint", None)
    if callable(own):
        return own()
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{task.name}\0{task.verifier}\0{task.answer_marker}\0".encode())
    rows = [*task.eval_problems(), *task.train_problems(random.Random(0), FINGERPRINT_TRAIN_DRAWS)]
    for p in rows:
        h.update(json.dumps([p.id, p.prompt, p.reference], ensure_ascii=False).encode("utf-8") + b"\n")
    return "blake2b:" + h.hexdigest()


def dataset_rows_fingerprint(train, held_out) -> str:
    """`blake2b:<hex>` of a file-backed task's rows: the training rows, then the held-out ones, each as
    (side, prompt or conversation, gold answer, the row's other columns) in the order given."""
    h = hashlib.blake2b(digest_size=16)
    for side, problems in (("train", train), ("eval", held_out)):
        for p in problems:
            row = [side, p.meta.get("messages") or p.prompt, p.reference, p.meta.get("columns") or {}]
            text = json.dumps(row, sort_keys=True, ensure_ascii=False, default=repr)
            h.update(text.encode("utf-8", "surrogatepass") + b"\n")
    return f"blake2b:{h.hexdigest()}"


def reward_source_digest(path: Path, name: str) -> str:
    """``blake2b:<32 hex>`` of a reward function's module file (its bytes) and the function's name."""
    h = hashlib.blake2b(path.read_bytes(), digest_size=16)
    h.update(b"\0" + name.encode("utf-8"))
    return "blake2b:" + h.hexdigest()


def reward_code_digest(digests: dict[str, str | None]) -> str:
    """One ``blake2b:`` digest over ``{ref: source digest}`` (run.json's ``reward_code``), in the order given."""
    return blake2b_text("\n".join(f"{ref}={d}" for ref, d in digests.items()))
