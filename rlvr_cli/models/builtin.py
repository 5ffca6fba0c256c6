"""The built-in models, built on first use and cached.

- ``builtin:tiny-init``: the tiny GPT-2 (:mod:`.tiny`) with the character tokenizer, untrained (seed 0).
- ``builtin:tiny``: ``tiny-init`` warm-started by SFT on noisy `arithmetic` traces (recipe ``base_sft``),
  so that the base model is imperfect but often right: the starting point of every RL recipe.
- ``builtin:tiny-countdown``: the same for `countdown` (recipe ``base_sft_countdown``).
- ``builtin:tiny-length``: the base of the length-inflation experiment (recipe ``base_sft_length``):
  arithmetic traces whose filler `wait,` goes with a deliberate error far more often than with
  correct work, placed after the work (so it cannot cause the error).

The cache key is a hash of the fully resolved warm-start recipe and of :data:`BUILD_VERSION`, so
editing the recipe (or the trace generator, with a version bump) rebuilds the model; builds are
guarded by a file lock so parallel runs build it once. Cache root: ``$RLVR_CACHE`` or ``~/.cache/rlvr``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from contextlib import contextmanager
from pathlib import Path

from rlvr_cli.errors import UserError

BUILD_VERSION = 2
"""Bump when the task generators or the architecture change in a way the recipe does not show."""

WARM_START_RECIPES = {"tiny": "base_sft", "tiny-countdown": "base_sft_countdown", "tiny-length": "base_sft_length"}


def cache_root() -> Path:
    return Path(os.environ.get("RLVR_CACHE") or Path.home() / ".cache" / "rlvr")


@contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _tiny_init_dir() -> Path:
    target = cache_root() / "builtin" / f"tiny-init-v{BUILD_VERSION}"
    if (target / "config.json").is_file():
        return target
    with _locked(cache_root() / "builtin" / ".tiny-init.lock"):
        if (target / "config.json").is_file():
            return target
        from rlvr_cli.models.tiny import build_tiny_model
        from rlvr_cli.models.tokenizer import build_char_tokenizer

        tok = build_char_tokenizer()
        model = build_tiny_model(tok, seed=0)
        tmp = target.with_name(target.name + f".tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        os.replace(tmp, target)
    return target


def warm_start_key(recipe_yaml: str) -> str:
    return hashlib.sha256(f"v{BUILD_VERSION}\n{recipe_yaml}".encode()).hexdigest()[:12]


def builtin_model_dir(ref: str) -> Path:
    """Directory of a built-in model, building it first if needed (with a progress bar)."""
    name = ref.split(":", 1)[1]
    if name == "tiny-init":
        return _tiny_init_dir()
    if name not in WARM_START_RECIPES:
        known = ", ".join(f"builtin:{n}" for n in ["tiny-init", *WARM_START_RECIPES])
        raise UserError(f"{ref}: unknown built-in model (known: {known})")
    from rlvr_cli.recipe.load import dump_recipe, load_recipe

    recipe = load_recipe(WARM_START_RECIPES[name])
    key = warm_start_key(dump_recipe(recipe))
    target = cache_root() / "builtin" / f"{name}-{key}"
    if (target / "built.json").is_file():
        return target
    with _locked(cache_root() / "builtin" / f".{name}.lock"):
        if (target / "built.json").is_file():
            return target
        _build_warm_start(name, recipe, target)
    return target


def _build_warm_start(name: str, recipe, target: Path) -> None:
    import time

    from rlvr_cli.cli.common import console
    from rlvr_cli.train.sft import train_sft

    console.print(
        f"[bold]Building builtin:{name}[/bold] once: a warm start by SFT (recipe {WARM_START_RECIPES[name]}, "
        f"{recipe.steps} steps); it is cached in {target.parent}",
        highlight=False,
    )
    work = target.with_name(target.name + f".build-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    t0 = time.perf_counter()
    run_dir = train_sft(recipe, work / "run")
    seconds = time.perf_counter() - t0
    final = run_dir / "checkpoints" / f"step_{recipe.steps}"
    if not (final / "config.json").is_file():
        raise RuntimeError(f"warm start of builtin:{name} left no final checkpoint in {final}")
    model_dir = work / "model"
    shutil.copytree(final, model_dir, ignore=shutil.ignore_patterns("trainer_state.pt"))
    evals = sorted((run_dir / "eval").glob("step_*.json"), key=lambda p: int(p.stem.split("_")[1]))
    last_eval = json.loads(evals[-1].read_text()) if evals else {}
    info = {
        "name": f"builtin:{name}",
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
        f"builtin:{name} ready in {seconds:.0f}s: pass@1 {pk.get('1', float('nan')):.3f}, "
        f"pass@{max(pk, key=int) if pk else '?'} {pk[max(pk, key=int)] if pk else float('nan'):.3f}",
        highlight=False,
    )
