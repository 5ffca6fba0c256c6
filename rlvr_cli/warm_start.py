"""Build the warm-started built-in models (`builtin:tiny`, `builtin:tiny-countdown`, ...) by SFT.

This module sits above both :mod:`rlvr_cli.models` (which resolves a model name to a cached directory
and never trains) and :mod:`rlvr_cli.train` (whose SFT trainer does the build), so the layers only
point down. The commands call :func:`ensure_built` for the models they are about to load: a shipped
base (:func:`rlvr_cli.models.builtin.is_shipped`) is only written out of the package; another warm start
is trained once per recipe version, under a file lock, so parallel runs build it once.
:func:`rebuild` trains a shipped base again from its recipe, for `rlvr models rebuild`.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from rlvr_cli import run_files
from rlvr_cli.console import console
from rlvr_cli.errors import UserError
from rlvr_cli.models.builtin import (
    WARM_START_RECIPES, builtin_model_dir, is_shipped, shipped_manifest, warm_start_lock, warm_start_target,
)


def ensure_built(*refs: str | None) -> None:
    """Make every built-in model among ``refs`` ready to load: a shipped one is written out of the package,
    another warm start is trained if not cached yet (other references: no-op)."""
    for ref in refs:
        if ref and is_shipped(ref):
            builtin_model_dir(ref)
        elif ref and ref.startswith("builtin:") and ref.split(":", 1)[1] in WARM_START_RECIPES:
            recipe, target = warm_start_target(ref)
            if (target / "built.json").is_file():
                continue
            with warm_start_lock(ref):
                if not (target / "built.json").is_file():
                    _build(ref, recipe, target)


def _build(ref: str, recipe, target: Path) -> None:
    from rlvr_cli.train.sft import train_sft

    name = ref.split(":", 1)[1]
    if name == "tiny-init":
        _build_init(target)
        return
    console.print(
        f"[bold]Building {ref}[/bold] once: a warm start by SFT (recipe {WARM_START_RECIPES[name]}, "
        f"{recipe.steps} steps); it is cached in {target.parent}",
        highlight=False,
    )
    work = target.with_name(target.name + f".build-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    t0 = time.perf_counter()
    run_dir = train_sft(recipe, work / "run")
    seconds = time.perf_counter() - t0
    final = run_files.checkpoint_path(run_dir, recipe.steps)
    if not (final / "config.json").is_file():
        raise RuntimeError(f"warm start of {ref} left no final checkpoint in {final}")
    model_dir = work / "model"
    shutil.copytree(final, model_dir, ignore=shutil.ignore_patterns("trainer_state.pt"))
    evals = run_files.eval_files(run_dir)
    last_eval = json.loads(evals[-1][1].read_text()) if evals else {}
    info = {
        "name": ref,
        "recipe": WARM_START_RECIPES[name],
        "steps": recipe.steps,
        "build_seconds": round(seconds, 1),
        "pass_at_k": last_eval.get("pass_at_k"),
        "len_mean": last_eval.get("len_mean"),
    }
    (model_dir / "built.json").write_text(json.dumps(info, indent=2) + "\n")
    shutil.rmtree(target, ignore_errors=True)
    os.replace(model_dir, target)
    shutil.rmtree(work, ignore_errors=True)
    pk = info["pass_at_k"] or {}
    console.print(
        f"{ref} ready in {seconds:.0f}s: pass@1 {pk.get('1', float('nan')):.3f}, "
        f"pass@{max(pk, key=int) if pk else '?'} {pk[max(pk, key=int)] if pk else float('nan'):.3f}",
        highlight=False,
    )


def _build_init(target: Path) -> None:
    """``builtin:tiny-init``: the tiny GPT-2 freshly initialised from seed 0, with the character tokenizer."""
    from rlvr_cli.models.tiny import build_tiny_model
    from rlvr_cli.models.tokenizer import build_char_tokenizer

    tok = build_char_tokenizer()
    model = build_tiny_model(tok, seed=0)
    tmp = target.with_name(target.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    (tmp / "built.json").write_text(json.dumps({"name": "builtin:tiny-init", "recipe": None, "steps": 0}) + "\n")
    shutil.rmtree(target, ignore_errors=True)
    os.replace(tmp, target)


def rebuild(name: str, work: Path) -> Path:
    """Train the shipped base ``name`` again from its recipe (``tiny-init``: initialise it) into ``work``,
    from the shipped weights of the model its recipe starts from; returns the model directory."""
    if name not in shipped_manifest():
        raise UserError(f"builtin:{name}: not a shipped built-in model (shipped: {', '.join(shipped_manifest())})")
    target = work / name
    if name == "tiny-init":
        _build_init(target)
    else:
        recipe, _ = warm_start_target(f"builtin:{name}")
        _build(f"builtin:{name}", recipe, target)
    return target


def _load_weights(model_dir: Path):
    from transformers import AutoModelForCausalLM

    from rlvr_cli.models import quiet_transformers

    quiet_transformers()
    return AutoModelForCausalLM.from_pretrained(model_dir)


def compare_with_shipped(name: str, model_dir: Path) -> tuple[bool, str, float]:
    """(equal bit for bit, ``blake2b:`` fingerprint of ``model_dir``'s weights, max |difference|) against
    the shipped base ``name``."""
    from rlvr_cli.fingerprints import weights_fingerprint

    built = _load_weights(model_dir)
    fingerprint = weights_fingerprint(built)
    shipped = _load_weights(builtin_model_dir(f"builtin:{name}")).state_dict()
    max_diff = max(float((t - shipped[k]).abs().max()) if t.shape == shipped[k].shape else float("inf")
                   for k, t in built.state_dict().items())
    return fingerprint == shipped_manifest()[name]["weights"], fingerprint, max_diff


def ship(name: str, model_dir: Path) -> dict:
    """Make ``model_dir``'s weights the shipped base ``name``: copy them into the package and write its
    manifest entry (fingerprint, sha256, recipe and key, the numerics and torch it was built with)."""
    import hashlib

    import torch

    from rlvr_cli.fingerprints import weights_fingerprint
    from rlvr_cli.models.builtin import WEIGHTS_DIR, recipe_key
    from rlvr_cli.numerics import numerics_kind
    from rlvr_cli.recipe.load import load_recipe
    from rlvr_cli.io import atomic_write_json

    source = model_dir / "model.safetensors"
    info = json.loads((model_dir / "built.json").read_text()) if (model_dir / "built.json").is_file() else {}
    recipe_name = WARM_START_RECIPES.get(name)
    entry = {
        "file": f"{name}.safetensors",
        "weights": weights_fingerprint(_load_weights(model_dir)),
        "sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
        "recipe": recipe_name,
        "recipe_key": recipe_key(load_recipe(recipe_name)) if recipe_name else None,
        "steps": info.get("steps", 0),
        "built_with": {"numerics": numerics_kind(), "torch": torch.__version__, "threads": torch.get_num_threads()},
        "pass_at_k": info.get("pass_at_k"),
        "len_mean": info.get("len_mean"),
    }
    WEIGHTS_DIR.mkdir(parents=True, exist_ok=True)
    tmp = WEIGHTS_DIR / f".{name}.safetensors.tmp"
    shutil.copyfile(source, tmp)
    os.replace(tmp, WEIGHTS_DIR / entry["file"])
    path = WEIGHTS_DIR / "manifest.json"
    manifest = json.loads(path.read_text()) if path.is_file() else {"format": 1, "models": {}}
    manifest["models"][name] = entry
    atomic_write_json(path, manifest)
    return entry
