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
- ``builtin:tiny-calc``: the base of the tools experiments (recipe ``base_sft_calc``): `calc` traces
  that call the calculator in half of the samples and answer directly in the rest (docs/tools.md).

**Shipped weights.** A warm start is hundreds of optimiser steps, and the last bits of a CPU's kernels
(with or without AVX-512, another torch) turn into other weights by its end, so every number after it
would depend on the machine. The bases that results/ and the tests use (those ``weights/manifest.json`` lists:
:func:`shipped_manifest`, :func:`is_shipped`) are therefore package data: ``weights/NAME.safetensors``, the very bits
every machine loads, with their fingerprint (blake2b over the state dict, as run.json's
``base_weights``). Using one writes it once into the cache as a model directory (config and tokenizer
from code, the file's sha256 checked), which takes about a second. The cached copy is not trusted: once
per process (and again if a file changes) its weights are hashed against the shipped sha256 and its other
files against the sha256s recorded when it was written; a copy with flipped bytes, or a file truncated or
deleted, is written again from the package, with a note, never used. Their recipes stay: `rlvr models
rebuild NAME` trains one again and says whether this machine's build equals the shipped bits (and
``--write`` ships a new build after a recipe change). The other warm starts are built on first use,
keyed by a hash of their recipe and :data:`BUILD_VERSION`, under a file lock so parallel runs build
once. Cache root: ``$RLVR_CACHE`` or ``~/.cache/rlvr``. This module only names, materialises and finds
the cached directories; training is :mod:`rlvr_cli.warm_start`'s, above this package and the trainer.
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

WARM_START_RECIPES = {
    "tiny": "base_sft",
    "tiny-countdown": "base_sft_countdown",
    "tiny-length": "base_sft_length",
    "tiny-check": "base_sft_check",
    "tiny-check4": "base_sft_check4",
    "tiny-check-marked": "base_sft_check_marked",
    "tiny-check4-marked": "base_sft_check4_marked",
    "tiny-calc": "base_sft_calc",
}


WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
"""The shipped bases (package data): NAME.safetensors and manifest.json."""


def shipped_manifest() -> dict[str, dict]:
    """{name: entry} of the shipped bases: file, weights (blake2b fingerprint), sha256 (of the file),
    recipe, recipe_key, steps, the numerics and torch they were built with, pass@k at the end."""
    try:
        return json.loads((WEIGHTS_DIR / "manifest.json").read_text(encoding="utf-8"))["models"]
    except (OSError, ValueError, KeyError) as e:  # a broken install, not a user's input
        raise RuntimeError(f"{WEIGHTS_DIR / 'manifest.json'}: the shipped built-in models' manifest is unreadable ({e})") from e


def is_shipped(ref: str) -> bool:
    return ref.startswith("builtin:") and ref.split(":", 1)[1] in shipped_manifest()


def cache_root() -> Path:
    """``$RLVR_CACHE`` or ``~/.cache/rlvr``; a UserError naming the variable when that path, or the first
    of its parents that exists, is not a directory (a file there would fail every write far later)."""
    named = os.environ.get("RLVR_CACHE")
    root = Path(named or Path.home() / ".cache" / "rlvr")
    problem = cache_root_problem(root)
    if problem:
        raise UserError(f"RLVR_CACHE={named}: {problem}; set RLVR_CACHE to a directory" if named
                        else f"{root}: rlvr's default cache {problem}; set RLVR_CACHE to a directory")
    return root


def cache_root_problem(root: Path) -> str | None:
    """What is wrong with ``root`` as the cache directory (a file, or below a file), or None."""
    path = root.expanduser()
    try:
        while not path.exists() and not path.is_symlink() and path != path.parent:
            path = path.parent
        if path.is_dir():
            return None
    except OSError as e:
        return f"cannot be inspected ({e.strerror or type(e).__name__})"
    if path.is_symlink() and not path.exists():
        return f"{path} is a broken symbolic link" if path != root.expanduser() else "is a broken symbolic link"
    return "is a file, not a directory" if path == root.expanduser() else f"is below {path}, which is not a directory"


def is_builtin_model(ref: str) -> bool:
    """Whether a MODEL reference is a built-in model: `builtin:*` or its cached directory."""
    if ref.startswith("builtin:"):
        return True
    try:
        return Path(ref).expanduser().resolve().is_relative_to((cache_root() / "builtin").resolve())
    except (OSError, ValueError, UserError):  # no usable cache: nothing is in it
        return False


@contextmanager
def _locked(path: Path):
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        f = open(path, "w")
    except OSError as e:
        raise UserError(f"{path.parent}: cannot write rlvr's cache there ({e.strerror or type(e).__name__}); "
                        "set RLVR_CACHE to a writable directory") from None
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


_VERIFIED: dict[Path, tuple] = {}
"""Cached shipped bases this process has hashed, with the (inode, size, mtime) of each file then: a
copy is hashed once per process, and again only if one of its files changed."""


def _file_sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _stamp(target: Path) -> tuple | None:
    try:
        return tuple(sorted((p.name, p.stat().st_ino, p.stat().st_size, p.stat().st_mtime_ns)
                            for p in target.iterdir()))
    except OSError:
        return None


def _cached_copy_problem(entry: dict, target: Path) -> str | None:
    """Why the cached copy ``target`` of a shipped base is not the shipped one, or None when it is:
    ``model.safetensors`` against the manifest's sha256 (the package, not the cache, is the authority),
    every other file against the sha256 that ``built.json`` recorded when the copy was written, and
    ``built.json`` itself against the manifest entry."""
    try:
        built = json.loads((target / "built.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return "built.json is missing"
    except (OSError, ValueError) as e:
        return f"built.json is unreadable ({type(e).__name__})"
    if not isinstance(built, dict) or built.get("sha256") != entry["sha256"] or built.get("weights") != entry["weights"]:
        return "built.json names other weights than the shipped manifest"
    files = built.get("files")
    if not isinstance(files, dict) or not files:
        return "built.json records no file digests (written by an older rlvr)"
    for file, want in {**files, "model.safetensors": entry["sha256"]}.items():
        if not isinstance(file, str) or Path(file).name != file or file in ("", ".", ".."):
            return f"built.json records a file {file!r} outside the copy"
        got = _file_sha256(target / file)
        if got is None:
            return f"{file} is missing or unreadable"
        if got != want:
            return f"{file} has sha256 {got[:12]}..., not {want[:12]}..."
    return None


def shipped_model_dir(name: str) -> Path:
    """The cache directory of the shipped base ``name``, written from the package data on first use and
    written again whenever the cached copy does not hash to what was shipped (:func:`_cached_copy_problem`)."""
    from rlvr_cli.console import console

    entry = shipped_manifest()[name]
    target = cache_root() / "builtin" / f"{name}-{entry['weights'].split(':', 1)[1][:12]}"
    stamp = _stamp(target)
    if stamp is not None and _VERIFIED.get(target) == stamp:
        return target
    problem = _cached_copy_problem(entry, target) if target.exists() else "absent"
    if problem is not None:
        with _locked(cache_root() / "builtin" / f".{name}.lock"):
            problem = _cached_copy_problem(entry, target) if target.exists() else "absent"
            if problem is not None:
                if problem != "absent":
                    console.print(f"note: builtin:{name}: the cached copy in {target} is not the shipped one "
                                  f"({problem}); writing it again from the package", highlight=False, soft_wrap=True)
                _materialise(name, entry, target)
    _VERIFIED[target] = _stamp(target)
    return target


def _materialise(name: str, entry: dict, target: Path) -> None:
    from rlvr_cli.models.tiny import tiny_config
    from rlvr_cli.models.tokenizer import build_char_tokenizer

    source = WEIGHTS_DIR / entry["file"]
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    if digest != entry["sha256"]:
        raise RuntimeError(f"{source}: sha256 {digest[:16]}... is not the manifest's {entry['sha256'][:16]}...: "
                           "the shipped weights are damaged; reinstall rlvr")
    tmp = target.with_name(target.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tok = build_char_tokenizer()
    config = tiny_config(tok)
    config.architectures = ["GPT2LMHeadModel"]
    config.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    shutil.copyfile(source, tmp / "model.safetensors")
    files = {p.name: _file_sha256(p) for p in sorted(tmp.iterdir()) if p.is_file() and p.name != "model.safetensors"}
    (tmp / "built.json").write_text(json.dumps({"name": f"builtin:{name}", "shipped": True, **entry, "files": files},
                                               indent=2) + "\n")
    shutil.rmtree(target, ignore_errors=True)
    os.replace(tmp, target)


def recipe_key(recipe) -> str:
    """A warm start's cache key: the recipe's fields that differ from the defaults (so a field added to
    the schema later does not change it) and :data:`BUILD_VERSION`."""
    fields = json.dumps(recipe.model_dump(mode="json", exclude_defaults=True), sort_keys=True)
    return hashlib.sha256(f"v{BUILD_VERSION}\n{fields}".encode()).hexdigest()[:12]


def warm_start_target(ref: str):
    """(warm-start recipe, cache directory) of a warm-started built-in model such as ``builtin:tiny``."""
    name = ref.split(":", 1)[1]
    if name not in WARM_START_RECIPES:
        known = ", ".join(f"builtin:{n}" for n in dict.fromkeys([*shipped_manifest(), *WARM_START_RECIPES]))
        raise UserError(f"{ref}: unknown built-in model (known: {known})")
    from rlvr_cli.recipe.load import load_recipe

    recipe = load_recipe(WARM_START_RECIPES[name])
    return recipe, cache_root() / "builtin" / f"{name}-{recipe_key(recipe)}"


def needs_training(ref: str | None) -> bool:
    """Whether using ``ref`` would first train a warm start: a built-in name that is neither shipped nor built."""
    if not ref or not ref.startswith("builtin:") or is_shipped(ref):
        return False
    name = ref.split(":", 1)[1]
    return name in WARM_START_RECIPES and not (warm_start_target(ref)[1] / "built.json").is_file()


def warm_start_lock(ref: str):
    return _locked(cache_root() / "builtin" / f".{ref.split(':', 1)[1]}.lock")


def builtin_model_dir(ref: str) -> Path:
    """Directory of a built-in model. A shipped one is written from the package data on first use; any
    other warm start must have been built (by :func:`rlvr_cli.warm_start.ensure_built`, which every
    command calls): resolving a name never trains anything."""
    if is_shipped(ref):
        return shipped_model_dir(ref.split(":", 1)[1])
    _, target = warm_start_target(ref)
    if not (target / "built.json").is_file():
        raise UserError(
            f"{ref}: not built yet in {target.parent}; any `rlvr` command that uses it builds it once "
            f"(e.g. `rlvr sample {ref} --n 1 --num-prompts 1`), or call rlvr_cli.warm_start.ensure_built({ref!r})"
        )
    return target
