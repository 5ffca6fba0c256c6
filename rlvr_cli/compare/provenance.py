"""Where a compared run came from: the base model's weights (a hash) and the code revision.

Two runs are only comparable to the digit when they started from the same weights and ran the same
code. Per run, from what its directory holds:

- ``base_weights``: run.json's ``base_weights`` when the trainer recorded one; otherwise
  ``sha256:<hex>`` of ``checkpoints/step_0/model.safetensors`` when the run kept a step-0 checkpoint;
  otherwise the eval files' ``weights`` field (``rlvr eval`` records carry it); else None (unknown).
- ``git_commit``: run.json's ``git_commit`` (the trainer records it); None when absent.
- ``code``: run.json's fingerprint ``code``, the digest of the package's source. Commits that differ only
  outside the package (a write-up, a benchmark committed while a sweep ran) run the same code: the
  summary then names every commit and the one package digest instead of calling the revisions different.
- ``model``: the recipe's ``model.name`` (a name, not a fingerprint: a model of that name can change
  between revisions, which is why the hash matters).
- ``task_data``, ``numerics``, ``torch``: from run.json's ``fingerprint`` (:mod:`rlvr_cli.train.fingerprint`):
  the rows the task served, the CPU kernels' kind and the torch version. Runs alike in the base weights
  and the data but not in these agree up to the last bits of the arithmetic, not to the digit; a run
  whose ``fingerprint_changes`` is not empty was resumed under other conditions (``changed``).
"""

from __future__ import annotations

import hashlib

from rlvr_cli import run_files
from rlvr_cli.compare.run import Run

CHUNK = 1 << 20


def run_provenance(run: Run) -> dict:
    """{"base_weights", "git_commit", "model"} of one run (module rule)."""
    info = run_files.read_status(run.path)
    weights = info.get("base_weights") if isinstance(info.get("base_weights"), str) else None
    if weights is None:
        f = run_files.checkpoint_path(run.path, 0) / "model.safetensors"
        if f.is_file():
            weights = "sha256:" + _sha256(f)
    if weights is None:
        found = {ev.get("weights") for ev in run.evals.values() if isinstance(ev.get("weights"), str)}
        weights = found.pop() if len(found) == 1 else None
    commit = info.get("git_commit")
    model = run.recipe.get("model", {}).get("name") if isinstance(run.recipe.get("model"), dict) else None
    fp = info.get("fingerprint") if isinstance(info.get("fingerprint"), dict) else {}
    changes = info.get("fingerprint_changes")
    out = {"base_weights": weights, "git_commit": commit if isinstance(commit, str) else None,
           "model": model if isinstance(model, str) else None}
    out.update({key: fp.get(key) if isinstance(fp.get(key), str) else None for key in (*CONDITIONS, "code")})
    out["changed"] = bool(changes) if isinstance(changes, list) else False
    return out


CONDITIONS = ("task_data", "numerics", "torch", "reward_code", "environment_code")
"""The fingerprint fields besides the base weights and the code that `rlvr compare` reports."""
FIELDS = ("base_weights", "git_commit", "model", "code", *CONDITIONS)


def summarize(per_run: dict[str, dict]) -> dict:
    """The distinct values over all runs of each field (None = unknown for some run), and the runs resumed
    under other conditions (``changed``)."""
    out = {key: sorted({p.get(key) for p in per_run.values()}, key=lambda x: (x is None, str(x))) for key in FIELDS}
    out["changed"] = sorted(path for path, p in per_run.items() if p.get("changed"))
    return out


def sentence(prov: dict) -> str:
    """The summary.md line: base weights and code revision, or that they are unknown / differ."""
    def part(values, what, short=None):
        known = [v for v in values if v is not None]
        unknown = " (unknown for some runs)" if None in values else ""
        if not known:
            return f"{what}: not recorded"
        shown = [short(v) if short else v for v in known]
        head = f"{what}: {shown[0]}" if len(shown) == 1 else f"{what} DIFFER between runs: {', '.join(shown)}"
        return head + unknown

    parts = [part(prov["model"], "Base model"), part(prov["base_weights"], "base weights"),
             _revision(prov, part)]
    for key, what in (("task_data", "task data"), ("numerics", "CPU numerics"), ("torch", "torch"),
                      ("reward_code", "reward code"), ("environment_code", "environment code")):
        if key in ("reward_code", "environment_code") and not any(prov.get(key) or ()):
            continue  # no run had a function reward term (a user's environment): nothing to say
        if key in prov:  # summaries written before fingerprints lack them
            parts.append(part(prov[key], what))
    text = "; ".join(parts) + "."
    if prov.get("changed"):
        text += f" Resumed under other conditions (run.json fingerprint_changes): {', '.join(prov['changed'])}."
    return text


def _revision(prov: dict, part) -> str:
    """The code revision; several commits whose runs all recorded one package digest are one code."""
    commits, code = prov["git_commit"], prov.get("code") or [None]
    if len(commits) > 1 and None not in commits and len(code) == 1 and code[0] is not None:
        return (f"code revision: {', '.join(c[:12] for c in commits)} (commits that differ only outside the "
                f"package: the same package code {code[0][:len('blake2b:') + 16]} in every run)")
    return part(commits, "code revision", lambda c: c[:12])


def _sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()
