"""Group runs into variants (same recipe up to the seed) and label each by the axes that differ.

Grouping rule: two runs are seeds of one variant when their flattened recipes (dotted keys, e.g.
``loss.clip.eps_high``) agree on every *identifying* key. A key is identifying unless it is in
:data:`NEVER_IDENTIFYING` or under a prefix of :data:`NEVER_IDENTIFYING_PREFIXES` (names, seed, where
and how fast it ran, checkpointing, when and at which k evaluation happened: none changes what is
trained or what an evaluation measures). A key that some runs lack and the rest hold as null is a section
added to the schema since the older runs were written (off by default): it does not split them. Two special
cases:

- ``steps`` identifies a variant only when ``optim.schedule`` is not ``constant``: with a decaying
  schedule the number of steps shapes the learning-rate curve; otherwise a longer run is the same
  variant run further.
- Under ``eval`` only the keys that change what pass@k measures identify a variant (n,
  num_prompts, temperature, top_p, max_new_tokens, seed); ``every``, ``at_start``, ``pass_at_k`` and
  ``maj_at_k`` only choose which points are reported.

Label rule: the axes are the identifying keys whose values are not the same in every variant; a
variant's label is ``axis=value`` for each, in recipe order, joined by ``, ``. An axis is shown by its
last two path components (``clip.eps_high``) when that is unambiguous. ``kl.beta`` is left out of the
label of a variant whose ``kl.placement`` is ``none`` (the schema forces beta to 0 there).
``--label-by changed`` (one-axis-at-a-time ablations against a control) shows in each label only the
axes where the variant's value differs from the most common value among the variants (the first
variant's on a tie); a variant with none is labelled by its recipe name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rlvr_cli.compare.run import Run
from rlvr_cli.errors import UserError

NEVER_IDENTIFYING = {
    "name",
    "description",
    "seed",
    "output_dir",
    "device",
    "threads",
    "reward.workers",  # verifier processes: speed only
    "optim.micro_batches",  # gradient accumulation: memory only (tested to leave the gradient unchanged)
    "eval.every",
    "eval.at_start",
    "eval.pass_at_k",
    "eval.maj_at_k",
}
NEVER_IDENTIFYING_PREFIXES = ("checkpoint.", "trackers.")


@dataclass
class Variant:
    """Runs that differ only in seed. ``axes`` holds this variant's value of each differing axis."""

    key: tuple
    runs: list[Run]
    label: str = ""
    axes: dict[str, object] = field(default_factory=dict)

    @property
    def seeds(self) -> list[int | None]:
        return [r.seed for r in self.runs]


def flatten(recipe: dict, prefix: str = "") -> dict[str, object]:
    """{"loss": {"clip": {"eps_high": 0.28}}} -> {"loss.clip.eps_high": 0.28}; lists stay leaves."""
    out: dict[str, object] = {}
    for k, v in recipe.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def identifying_items(flat: dict[str, object]) -> dict[str, object]:
    """The keys of a flattened recipe that decide which variant a run belongs to (module rule)."""
    out = {}
    for k, v in flat.items():
        if k in NEVER_IDENTIFYING or k.startswith(NEVER_IDENTIFYING_PREFIXES):
            continue
        if k == "steps" and flat.get("optim.schedule", "constant") == "constant":
            continue
        out[k] = v
    return out


def group_variants(runs: list[Run], label_by: str | None = None) -> list[Variant]:
    """Group ``runs`` by identical identifying keys (first-seen order) and label each group."""
    groups: dict[tuple, Variant] = {}
    idents = [identifying_items(flatten(run.recipe)) for run in runs]
    _added_later(idents)
    for run, ident in zip(runs, idents):
        key = tuple(sorted((k, format_value(v)) for k, v in ident.items()))
        groups.setdefault(key, Variant(key=key, runs=[])).runs.append(run)
    variants = list(groups.values())
    for v in variants:
        v.runs.sort(key=lambda r: (r.seed is None, r.seed if r.seed is not None else 0, str(r.path)))
    _label(variants, label_by)
    return variants


def _added_later(idents: list[dict]) -> None:
    """Fill in, as null, a key some runs lack entirely when every run that holds it as a value holds null: a
    recipe section added to the schema after those runs were written (off by default), so absent and null
    are one choice, not two variants (a run that sets the section's fields is still its own)."""
    keys = {k for i in idents for k in i}
    lacks = lambda i, k: k not in i and not any(x.startswith(k + ".") for x in i)  # noqa: E731
    for k in keys:
        if any(lacks(i, k) for i in idents) and all(i[k] is None for i in idents if k in i):
            for i in idents:
                if lacks(i, k):
                    i[k] = None


def differing_axes(variants: list[Variant]) -> list[str]:
    """Identifying keys whose value is not the same in every variant (missing counts as a value)."""
    flats = [dict(v.key) for v in variants]
    order: list[str] = []
    for v in variants:  # recipe order of the first run that has the key
        for k in identifying_items(flatten(v.runs[0].recipe)):
            if k not in order:
                order.append(k)
    return [k for k in order if len({f.get(k, "<unset>") for f in flats}) > 1]


def short_names(keys: list[str]) -> dict[str, str]:
    """Show each key by its last two components when no other key shares them."""
    tails = {k: ".".join(k.split(".")[-2:]) for k in keys}
    counts: dict[str, int] = {}
    for t in tails.values():
        counts[t] = counts.get(t, 0) + 1
    return {k: (t if counts[t] == 1 else k) for k, t in tails.items()}


def format_value(v) -> str:
    """Recipe values as a reader would write them: null, true, 0.28, [task*1.0, random(p=0.5)*1.0]."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, dict):
        if "type" in v:
            params = ",".join(f"{k}={format_value(x)}" for k, x in v.items() if k not in ("type", "weight"))
            text = f"{v['type']}({params})" if params else str(v["type"])
            return f"{text}*{format_value(v['weight'])}" if "weight" in v else text
        return "{" + ",".join(f"{k}={format_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(format_value(x) for x in v) + "]"
    return str(v)


def nested_value(recipe: dict, key: str):
    """The value at a dotted key of the unflattened recipe (a whole section for a section's key)."""
    cur = recipe
    for part in key.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _label(variants: list[Variant], label_by: str | None) -> None:
    axes = differing_axes(variants)
    if label_by and label_by != "changed":
        axes = resolve_label_keys(label_by, variants)
    # A section that is null in one variant and set in another differs as a whole: name the section
    # (`overlong.soft_punish={buffer=16,factor=1}` vs `=null`), not each of its fields as `unset`.
    axes = [k for k in axes if not any(k.startswith(p + ".") for p in axes)]
    shown = short_names(axes)
    flats = []
    for v in variants:
        flat = flatten(v.runs[0].recipe)
        for k in axes:
            if k not in flat:
                flat[k] = nested_value(v.runs[0].recipe, k)
        v.axes = {k: flat.get(k) for k in axes}
        flats.append(flat)
    for v, flat in zip(variants, flats):
        if label_by in ("name", "dir"):
            v.label = _run_family_name(v, by=label_by)
            continue
        parts = [
            f"{shown[k]}={format_value(flat[k]) if k in flat else 'unset'}"
            for k in axes
            if not (k == "kl.beta" and flat.get("kl.placement") == "none" and "kl.placement" in axes)
            and not (label_by == "changed" and _shown_value(v, k) == _modal_value(variants, k))
        ]
        v.label = ", ".join(parts) if parts else _run_family_name(v, by="name")
    _dedupe_labels(variants)


def _shown_value(v: Variant, key: str) -> str:
    return format_value(v.axes.get(key))


def _modal_value(variants: list[Variant], key: str) -> str:
    """The most common value of ``key`` over the variants (the first variant's on a tie)."""
    values = [_shown_value(v, key) for v in variants]
    return max(dict.fromkeys(values), key=values.count)


def resolve_label_keys(label_by: str, variants: list[Variant]) -> list[str]:
    """``--label-by``: ``name`` / ``dir`` (no axes), or comma-separated recipe keys, each a full dotted
    path or a unique dotted suffix (``clip.eps_high`` for ``loss.clip.eps_high``)."""
    if label_by in ("name", "dir"):
        return []
    known: list[str] = []
    for v in variants:
        known.extend(k for k in flatten(v.runs[0].recipe) if k not in known)
    keys, problems = [], []
    for want in (w.strip() for w in label_by.split(",")):
        if not want:
            continue
        matches = [k for k in known if k == want] or [k for k in known if k.endswith("." + want)]
        if len(matches) == 1:
            keys.append(matches[0])
        elif not matches:
            problems.append(
                f"--label-by {want}: not a recipe key of these runs (e.g. kl.placement, loss.clip.eps_high)"
            )
        else:
            problems.append(f"--label-by {want}: ambiguous, matches {', '.join(matches)}")
    if problems:
        raise UserError(problems)
    return keys


def _run_family_name(v: Variant, by: str) -> str:
    """The recipe name (or directory name) of the variant's first run, without a trailing seed tag."""
    run = v.runs[0]
    text = str(run.recipe.get("name") or run.name) if by == "name" else run.name
    return re.sub(r"[_\-.](?:s|seed)?\d+$", "", text) or text


def _dedupe_labels(variants: list[Variant]) -> None:
    seen: dict[str, int] = {}
    for v in variants:
        n = seen.get(v.label, 0) + 1
        seen[v.label] = n
        if n > 1:
            v.label = f"{v.label} #{n}"
