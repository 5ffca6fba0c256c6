"""The initial model's evaluation, computed once: a cache keyed by everything the eval record depends on.

Every run of an ablation starts by evaluating the same base model on the same prompts with the same
keyed sampling seed (step 0), so the 27 runs of a 9-arm, 3-seed sweep compute one record 27 times.
The record is a deterministic function of (docs/design.md §4, ``evaluation/core.py``):

- the weights (every tensor of the state dict: name, dtype, shape and bytes) and the architecture
  (the model class and its config), the tokenizer (its serialised vocabulary, special ids and chat
  template) and the autocast dtype;
- the held-out prompts as the model sees them (each problem's id, text, gold answer and token ids),
  the task's settings (they decide the filler words and the verifier) and the parts of the reward
  spec the true verifier reads (everything except ``terms``, ``workers`` and ``worker_memory_mb``:
  the eval scores with the task's true verifier, whatever the training reward);
- the eval settings ``evaluate_policy`` receives (``eval.*`` except ``every`` and ``at_start``), the
  device type, the torch thread count and the CPU numerics (kernels may split reductions differently:
  :mod:`rlvr_cli.numerics`), the versions of
  the libraries the sampler and the verifiers run on (:data:`rlvr_cli.fingerprints.LIBRARIES`) and the source of this package
  (a change to the sampler or a verifier is a new key).

``initial_eval_key`` hashes all of that (blake2b; each part's digest from :mod:`rlvr_cli.fingerprints`); the record is stored under
``$RLVR_CACHE/evals/<key>.json`` (atomically; two runs racing write the same bytes) and copied into a
later run's ``eval/step_0.json`` with ``reused: true``. Only one process: under N processes each rank
samples a share, and the record is not cached. ``RLVR_EVAL_CACHE=0`` turns the cache off.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import torch

from rlvr_cli.fingerprints import library_versions, package_source_digest, tokenizer_digest, weights_digest
from rlvr_cli.io import atomic_write_json
from rlvr_cli.numerics import numerics_kind

KEY_VERSION = 1
"""Bump when the record gains a dependency the key does not hash."""


def enabled() -> bool:
    return os.environ.get("RLVR_EVAL_CACHE", "1").strip().lower() not in ("0", "false", "no", "off")


def cache_dir() -> Path:
    from rlvr_cli.models.builtin import cache_root

    return cache_root() / "evals"


def initial_eval_key(model, tokenizer, task, task_spec, reward_spec, settings: dict, autocast_dtype,
                     device: torch.device) -> str:
    """The cache key of the record ``evaluate_policy(model, tokenizer, task, scorer, EvalSettings(**settings))``
    computes, the scorer built from ``reward_spec`` (of which only what the true verifier reads counts)."""
    from rlvr_cli.tasks import encode_prompt

    problems = task.eval_problems()[: settings["num_prompts"]]
    reward = reward_spec.model_dump(mode="json", exclude={"terms", "workers", "worker_memory_mb"})
    config = getattr(model, "config", None)
    parts = {
        "version": KEY_VERSION,
        "weights": weights_digest(model),
        "model_class": type(model).__name__,
        "config": config.to_json_string(use_diff=False) if config is not None else None,
        "tokenizer": tokenizer_digest(tokenizer),
        "autocast": str(autocast_dtype),
        "prompts": [[p.id, p.prompt, p.reference, encode_prompt(tokenizer, task, p)] for p in problems],
        "task": [task.name, task.answer_marker, task.verifier, task_spec.model_dump(mode="json")],
        "reward": reward,
        "settings": settings,
        "device": device.type,
        "threads": torch.get_num_threads(),
        "numerics": numerics_kind() if device.type == "cpu" else None,  # the CPU kernels' last bits
        "libraries": library_versions(),
        "source": package_source_digest(),
    }
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.blake2b(blob, digest_size=16).hexdigest()


def load(key: str) -> dict | None:
    """The stored ``evaluate_policy`` record, or None (absent or damaged: then it is recomputed and rewritten)."""
    try:
        stored = json.loads((cache_dir() / f"{key}.json").read_text())
    except (OSError, ValueError):
        return None
    ok = isinstance(stored, dict) and stored.get("key") == key and isinstance(stored.get("result"), dict)
    return stored["result"] if ok else None


def store(key: str, result: dict) -> None:
    """Keep ``result`` (an ``evaluate_policy`` record) for later runs; a full disk only loses the saving."""
    try:
        atomic_write_json(cache_dir() / f"{key}.json", {"key": key, "result": result})
    except OSError:
        pass
