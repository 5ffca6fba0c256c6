"""The built-in models, built on first use and cached.

- ``builtin:tiny-init``: the tiny GPT-2 (:mod:`.tiny`) with the character tokenizer, untrained (seed 0).
- ``builtin:tiny``: ``tiny-init`` warm-started by SFT on noisy `arithmetic` traces (recipe ``base_sft``),
  so that the base model is imperfect but often right: the starting point of every RL recipe.
- ``builtin:tiny-countdown``: the same for `countdown` (recipe ``base_sft_countdown``).
- ``builtin:tiny-length``: the base of the length-inflation experiment (recipe ``base_sft_length``):
  arithmetic traces whose filler `wait,` goes with a deliberate error far more often than with
  correct work, placed after the work (so it cannot cause the error).
- ``builtin:tiny-check``: the base of the length-inflation experiment of issue 32 (recipe
  ``base_sft_check``): `answer_check` traces that state the sum at once, then check it by column work
  and ramble after a failed check; ``tiny-check4`` (4 digits, terse check), ``tiny-check-marked`` and
  ``tiny-check4-marked`` (the check marks each column that disagrees with the answer) are the other
  candidates measured for it.

The cache key is a hash of the fully resolved warm-start recipe and of :data:`BUILD_VERSION`, so
editing the recipe (or the trace generator, with a version bump) rebuilds the model; builds are
guarded by a file lock so parallel runs build it once. Cache root: ``$RLVR_CACHE`` or ``~/.cache/rlvr``.
This module only names and finds the cached directories; the warm start itself is trained by
:mod:`rlvr_cli.warm_start`, above both this package and the trainer.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
from contextlib import contextmanager
from pathlib import Path

from rlvr_cli.errors import UserError

BUILD_VERSION = 2
"""Bump when the task generators or the architecture change in a way the recipe does not show."""

WARM_START_RECIPES = {
    "tiny": "base_sft",
    "tiny-countdown": "base_sft_countdown",
    "tiny-length": "base_sft_length",
    "tiny-check": "base_sft_check",
    "tiny-check4": "base_sft_check4",
    "tiny-check-marked": "base_sft_check_marked",
    "tiny-check4-marked": "base_sft_check4_marked",
}


def cache_root() -> Path:
    return Path(os.environ.get("RLVR_CACHE") or Path.home() / ".cache" / "rlvr")


def is_builtin_model(ref: str) -> bool:
    """Whether a MODEL reference is a built-in model: `builtin:*` or its cached directory."""
    if ref.startswith("builtin:"):
        return True
    try:
        return Path(ref).expanduser().resolve().is_relative_to((cache_root() / "builtin").resolve())
    except (OSError, ValueError):
        return False


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


def warm_start_target(ref: str):
    """(warm-start recipe, cache directory) of a warm-started built-in model such as ``builtin:tiny``."""
    name = ref.split(":", 1)[1]
    if name not in WARM_START_RECIPES:
        known = ", ".join(f"builtin:{n}" for n in ["tiny-init", *WARM_START_RECIPES])
        raise UserError(f"{ref}: unknown built-in model (known: {known})")
    from rlvr_cli.recipe.load import dump_recipe, load_recipe

    recipe = load_recipe(WARM_START_RECIPES[name])
    return recipe, cache_root() / "builtin" / f"{name}-{warm_start_key(dump_recipe(recipe))}"


def warm_start_lock(ref: str):
    return _locked(cache_root() / "builtin" / f".{ref.split(':', 1)[1]}.lock")


def builtin_model_dir(ref: str) -> Path:
    """Directory of a built-in model. ``tiny-init`` is made on first use; a warm-started one must have
    been built (by :func:`rlvr_cli.warm_start.ensure_built`, which every command calls): resolving a
    name never trains anything."""
    if ref.split(":", 1)[1] == "tiny-init":
        return _tiny_init_dir()
    _, target = warm_start_target(ref)
    if not (target / "built.json").is_file():
        raise UserError(
            f"{ref}: not built yet in {target.parent}; any `rlvr` command that uses it builds it once "
            f"(e.g. `rlvr sample {ref} --n 1 --num-prompts 1`), or call rlvr_cli.warm_start.ensure_built({ref!r})"
        )
    return target
