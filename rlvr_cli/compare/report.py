"""`compare_runs`: read runs, group them into variants, diagnose, draw, and write the summary."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rlvr_cli.compare import paired
from rlvr_cli.compare.against import compare_to_base, compare_to_control, resolve_control
from rlvr_cli.compare.diagnose import Verdict, diagnose
from rlvr_cli.compare.load import Skipped, load_runs
from rlvr_cli.compare.plot import make_figure, save_figure
from rlvr_cli.compare.provenance import run_provenance
from rlvr_cli.compare.summary import AgainstControl, build_summary, render_markdown
from rlvr_cli.compare.variants import Variant, differing_axes, flatten, group_variants, short_names
from rlvr_cli.errors import UserError
from rlvr_cli.io import atomic_write_json, atomic_write_text, display_path

MEASUREMENT_KEYS = (
    "eval.n",
    "eval.num_prompts",
    "eval.temperature",
    "eval.top_p",
    "eval.max_new_tokens",
    "eval.seed",
    "task.name",
    "task.num_eval",
    "task.split_seed",
)
"""Recipe keys that change what pass@k measures; when they differ between variants, say so."""
BANDS = ("minmax", "std")


@dataclass
class CompareResult:
    variants: list[Variant]
    verdicts: dict[str, dict[str, Verdict]]
    skipped: list[Skipped]
    summary: dict
    files: list[Path]


def compare_runs(
    paths: list[str], out_dir: str | Path, smooth: int = 5, band: str = "minmax", label_by: str | None = None,
    control: str | None = None, n_resamples: int = paired.N_RESAMPLES, plan_target: float | None = None,
) -> CompareResult:
    """Compare the runs under ``paths``; write compare.png/.svg, summary.json and summary.md to ``out_dir``.

    ``control`` (a variant label, or one of its run directories; default the first variant) is what
    every other variant is tested against (:mod:`rlvr_cli.compare.against`, ``n_resamples`` bootstrap
    resamples). A run that cannot be read is skipped with its reason; when none can, :class:`UserError`
    names each argument and why (the CLI exits 2)."""
    if n_resamples < 1:
        raise UserError(f"--resamples {n_resamples}: expected a positive number of bootstrap resamples")
    if plan_target is not None and not 0 < plan_target < 1:
        raise UserError(f"--plan {plan_target:g}: expected a target difference between 0 and 1 (e.g. 0.05)")
    if band not in BANDS:
        raise UserError(f"--band {band}: expected one of {', '.join(BANDS)}")
    if smooth < 0:
        raise UserError(f"--smooth {smooth}: expected 0 (off) or a window of steps >= 1")
    runs, skipped = load_runs([display_path(p) for p in paths])  # records name runs relative to the checkout
    if not runs:
        problems = [f"{s.path}: {s.reason}" for s in skipped] or ["no run directories given"]
        raise UserError(["rlvr compare: no readable run"] + problems)
    variants = group_variants(runs, label_by)
    base = resolve_control(variants, control)
    verdicts = {str(r.path): diagnose(r) for v in variants for r in v.runs}
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: exists and is not a directory")
    provenance = {str(r.path): run_provenance(r) for v in variants for r in v.runs}
    against = compare_to_control(variants, base, n_resamples,
                                 fingerprints={p: x["base_weights"] for p, x in provenance.items()},
                                 plan_target=plan_target)
    fig = make_figure(variants, smooth=smooth, band=band, against=against)
    try:
        files = save_figure(fig, out)
    except OSError as e:
        raise UserError(f"--out {out}: cannot write the figure ({e.strerror or e})") from None
    summary = build_summary(
        variants,
        verdicts,
        skipped,
        settings={"smooth": smooth, "band": band, "label_by": label_by, "control": base.label,
                  "resamples": n_resamples},
        warnings=comparability_warnings(variants),
        figures=[f.name for f in files],
        out_dir=display_path(out),
        control=AgainstControl(against, provenance, compare_to_base(variants, n_resamples)),
    )
    atomic_write_json(out / "summary.json", summary)
    atomic_write_text(out / "summary.md", render_markdown(summary))
    return CompareResult(variants, verdicts, skipped, summary, files + [out / "summary.json", out / "summary.md"])


def comparability_warnings(variants: list[Variant]) -> list[str]:
    """Differences that make the comparison unequal: evaluation settings, RL next to SFT, base models."""
    warnings = []
    axes = differing_axes(variants)
    measured = [k for k in axes if k in MEASUREMENT_KEYS]
    if measured:
        names = ", ".join(short_names(axes)[k] for k in measured)
        warnings.append(f"pass@k is measured differently across variants ({names}): compare those numbers with care")
    algorithms = {str(v.runs[0].recipe.get("algorithm", "rl")) for v in variants}
    if len(algorithms) > 1:
        warnings.append(
            "RL and SFT runs are compared together: SFT runs log no RL metrics and appear only where data exists"
        )
    for v in variants:
        seeds = [sd for sd in v.seeds if sd is not None]
        if len(seeds) != len(set(seeds)):
            warnings.append(f"variant '{v.label}' has several runs with the same seed: its band is not a seed spread")
    models = {str(flatten(v.runs[0].recipe).get("model.name")) for v in variants}
    if len(models) > 1:
        warnings.append(
            f"variants start from different models ({', '.join(sorted(models))}): each has its own base curve"
        )
    return warnings
