"""summary.json (for scripts) and summary.md (for people), the second rendered from the first.

Final numbers of a run: training metrics (accuracy, len_mean, kl_mean, entropy) are the median of
the last FINAL_STEPS logged steps (one noisy step does not decide them); pass@1 and pass@k come from
the run's last eval file, at the largest k of that file. A variant reports each number across its
seeds as {mean, std (ddof=1, null with one seed), min, max, n, nonfinite}. JSON is strict: a NaN or
infinite value is written as null (``nonfinite`` counts them; the diagnosis says what happened).

summary.json, schema_version 3 (issue 47: each arm's pass@1 / pass@k / pass^k are TESTs of the crossed
paired test with their MDE; the bootstrap interval moved to ``bootstrap``). Version 2 was version 1 plus ``control``, ``against_control``, ``provenance`` and
each variant's ``against_control`` / ``curve`` and each run's ``provenance``: readers of 1 keep working)::

    {"schema_version": 3, "created": ISO time, "out_dir": str,
     "settings": {"smooth": int, "band": "minmax"|"std", "label_by": str|null, "control": str,
                  "resamples": int, "final_steps": int},
     "control": label, "against_control": {"control", "n_resamples", "seed", "confidence", "alpha",
                                           "arms": {label: ARM}, "curves": {label: CURVE}},
     "against_base": {"n_resamples", "seed", "confidence", "alpha", "power"} | null,
     "provenance": {"base_weights"|"git_commit"|"model"|"task_data"|"numerics"|"torch": [distinct values,
                    null = unknown], "changed": [run paths resumed under other conditions]},
     "axes": [dotted recipe keys that differ between variants],
     "variants": [{"label": str, "axes": {key: value}, "runs": [path], "seeds": [int|null],
                   "last_steps": [int], "k": int|null, "against_control": ARM|null, "curve": CURVE,
                   "against_base": ARM|null (the last common eval step against the runs' step 0; added
                                   within version 3, absent in older files),
                   "final": {"accuracy"|"pass@1"|"pass@k"|"distinct_correct"|"len_mean"|"kl_mean"|"entropy"
                             |LENGTH_FINALS|"filler|wrong"|"filler|right": SPREAD},
                   "base": {"pass@1"|"pass@k"|"filler|wrong"|"filler|right": SPREAD},
                   "diagnosis": {MODE: {"detected": n, "possible": n, "none": n, "n/a": n,
                                        "onset_steps": [int]}}}],
     "runs": [{"path": str, "name": str, "variant": label, "seed": int|null, "status": str,
               "last_step": int, "eval_steps": [int], "warnings": [str],
               "provenance": {"base_weights"|"git_commit"|"model"|"task_data"|"numerics"|"torch": str|null,
                              "changed": bool},
               "final": {"accuracy", "len_mean", "kl_mean", "entropy", LENGTH_FINALS, "pass@1", "pass@k",
                         "distinct_correct", "filler|wrong", "filler|right": number|null,
                         "k": int|null, "eval_step": int|null},
               "diagnosis": {MODE: {"status": "detected"|"possible"|"none"|"n/a",
                                    "onset_step": int|null, "message": str, "evidence": {name: number|null}}}}],
     "skipped": [{"path": str, "reason": str}], "warnings": [str],
     "rules": {MODE: rule text}, "thresholds": {CONSTANT: number}, "figures": [file name]}

    SPREAD = {"mean", "std", "min", "max": number|null, "n": int, "nonfinite": int}
    ARM = {"step": int|null (the eval step compared), "binary": "greedy"|"majority"|null,
           "paired_seeds": bool|null, "k": int|null, "prompts": int, "n": int,
           "pass@1"|"pass@k"|"pass^k": TEST|null, "seed_consistency": {"seeds", "higher", "lower",
           "per_seed"}|null, "bootstrap": BOOT|null, "mcnemar": {"only_control", "only_other", "p", "p_holm",
           "per_seed"}|null, "verdict": "better"|"worse"|"not distinguishable at this budget"|"withheld"|null,
           "legacy_verdict": the rule before issue 47 (same words), "plan": {"target", "mde_now", "seeds_per_arm",
           "prompts", "cpu_seconds_seeds", "cpu_seconds_prompts", "note"} (with --plan only; compare/plan.py),
           "refused": str|null, "curve_vs_control": {"ceiling", "efficiency", "p_ceiling", "p_midpoint",
           "summary"}}
    TEST = {"mean", "low", "high", "confidence", "se", "df", "p", "p_holm", "design", "reason", "mde", "power",
            "alpha_per_arm", "seeds_to_halve_mde", "prompts_to_halve_mde", "prompts", "seeds", "components"}
            (rlvr_cli/compare/crossed.py; low/high/se/df/p/mde null where the design gives no test)
    BOOT = {"mean", "low", "high", "confidence", "n_resamples", "seed", "resampled"}
    CURVE = {"a"|"c_mid"|"b": [estimate, low|null, high|null]|null, "r0", "seeds_fitted", "compute",
             "notes": [str], "refused": str|null}
    MODE = "kl_explosion" | "entropy_collapse" | "length_inflation"
"""

from __future__ import annotations

import datetime as _dt
import inspect
import math
from dataclasses import dataclass, field

from rlvr_cli.compare import diagnose as dg
from rlvr_cli.compare import provenance as pv
from rlvr_cli.compare.run import Run, Skipped
from rlvr_cli.compare.series import spread, tail_level
from rlvr_cli.compare.variants import Variant, differing_axes, format_value

FINAL_STEPS = 10
"""Training metrics are reported as the median of the last 10 logged steps."""
TRAIN_FINALS = ("accuracy", "len_mean", "kl_mean", "entropy")
TABLE_COLUMNS = ("accuracy", "pass@1", "pass@k", "distinct_correct", "len_mean", "kl_mean", "entropy")
LENGTH_FINALS = ("len_correct", "len_incorrect", "truncated_frac", "gw_incorrect_share", "gw_incorrect_short_share",
                 "gw_incorrect_long_share", "gw_len_corr_incorrect")
"""Further training finals for the length experiment (summary.json only; None for runs that did not log them)."""
VERBOSITY = {"filler|wrong": "filler_given_incorrect", "filler|right": "filler_given_correct"}
"""Conditional verbosity from the eval files (rlvr_cli/evaluation/core.py): P(filler | own answer wrong / right);
summary.md shows base -> final columns when some run's eval files carry them."""
RULES = {
    "kl_explosion": dg.kl_explosion,
    "entropy_collapse": dg.entropy_collapse,
    "length_inflation": dg.length_inflation,
}
THRESHOLDS = (
    "DIAG_SMOOTH_STEPS",
    "START_STEPS",
    "PERSIST_STEPS",
    "KL_RISE_FACTOR",
    "KL_ONSET_FACTOR",
    "KL_MEAN_FLOOR",
    "KL_NONFINITE_STEPS",
    "ENTROPY_COLLAPSE_FRACTION",
    "PASSK_TOLERANCE",
    "LEN_GROWTH_FACTOR",
    "LEN_MIN_GROWTH_TOKENS",
    "LEN_ONSET_FACTOR",
    "ACC_MIN_GAIN",
    "LEN_CORRECT_MIN_GROWTH",
)


def run_finals(run: Run, k: int | None = None) -> dict:
    """A run's final numbers (module rule); pass@k at ``k`` or at the largest k of its last eval."""
    out: dict = {}
    for key in TRAIN_FINALS + LENGTH_FINALS:
        s = run.series(key)
        out[key] = tail_level(s, FINAL_STEPS, run.nonfinite[key]) if s is not None else None
    later = [st for st in run.evals if st > 0]
    last = run.evals[max(later)]["pass_at_k"] if later else None
    out["eval_step"] = max(later) if later else None
    out["pass@1"] = last.get(1) if last else None
    out["k"] = (k if k is not None else max(last)) if last else None
    out["pass@k"] = last.get(out["k"]) if last else None
    out["distinct_correct"] = run.evals[max(later)].get("distinct_correct") if later else None
    for name, key in VERBOSITY.items():
        out[name] = run.evals[max(later)].get(key) if later else None
    return out


def variant_k(v: Variant) -> int | None:
    """The largest k present in the last eval of every run of the variant that has one."""
    tables = [set(r.evals[max(r.evals)]["pass_at_k"]) for r in v.runs if any(st > 0 for st in r.evals)]
    common = set.intersection(*tables) if tables else set()
    return max(common) if common else None


@dataclass(frozen=True)
class AgainstControl:
    """What the comparison measured against its control arm: ``result`` is
    :func:`rlvr_cli.compare.against.compare_to_control`'s result, ``provenance`` each run's base weights
    and code revision, keyed by run path."""

    result: dict | None = None
    provenance: dict[str, dict] = field(default_factory=dict)
    base: dict | None = None
    """:func:`rlvr_cli.compare.against.compare_to_base`'s result: each variant against its base model."""


def build_summary(
    variants: list[Variant],
    verdicts: dict[str, dict[str, dg.Verdict]],
    skipped: list[Skipped],
    settings: dict,
    warnings: list[str],
    figures: list[str],
    out_dir: str,
    control: AgainstControl | None = None,
) -> dict:
    """The summary.json object (schema in the module docstring); ``verdicts`` are keyed by run path."""
    out_variants, out_runs = [], []
    control = control or AgainstControl()
    against, provenance, axes = control.result, control.provenance, differing_axes(variants)
    for v in variants:
        k = variant_k(v)
        finals = [run_finals(r, k) for r in v.runs]
        bases = [r.evals[0]["pass_at_k"] for r in v.runs if 0 in r.evals]
        out_variants.append(
            {
                "label": v.label,
                "axes": {a: _plain(x) for a, x in v.axes.items()},
                "runs": [str(r.path) for r in v.runs],
                "seeds": v.seeds,
                "last_steps": [r.last_step for r in v.runs],
                "k": k,
                "final": {c: spread([f[c] for f in finals]) for c in TABLE_COLUMNS + LENGTH_FINALS + tuple(VERBOSITY)},
                "base": {"pass@1": spread([b.get(1) for b in bases]), "pass@k": spread([b.get(k) for b in bases]),
                         **{name: spread([r.evals[0].get(key) for r in v.runs if 0 in r.evals])
                            for name, key in VERBOSITY.items()}},
                "diagnosis": {m: _count(verdicts[str(r.path)][m] for r in v.runs) for m in dg.MODES},
                "against_control": (against or {}).get("arms", {}).get(v.label),
                "against_base": (control.base or {}).get("arms", {}).get(v.label),
                "curve": (against or {}).get("curves", {}).get(v.label),
            }
        )
        for r, f in zip(v.runs, finals):
            out_runs.append(
                {
                    "path": str(r.path),
                    "name": r.name,
                    "variant": v.label,
                    "seed": r.seed,
                    "status": r.status,
                    "last_step": r.last_step,
                    "eval_steps": sorted(r.evals),
                    "warnings": list(r.warnings),
                    "final": {key: _num(x) for key, x in f.items()},
                    "diagnosis": {m: verdicts[str(r.path)][m].to_json() for m in dg.MODES},
                    "provenance": provenance.get(str(r.path)),
                }
            )
    arms = (against or {}).get("arms", {})
    warnings = list(warnings) + [f"against the control, {lbl}: {a['refused']}" for lbl, a in arms.items() if a["refused"]]
    warnings += [a["verdict_withheld"] for a in arms.values() if a.get("verdict_withheld")]
    return {
        "schema_version": 3,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "out_dir": out_dir,
        "settings": {**settings, "final_steps": FINAL_STEPS},
        "axes": axes,
        "variants": out_variants,
        "runs": out_runs,
        "skipped": [{"path": s.path, "reason": s.reason} for s in skipped],
        "warnings": warnings,
        "rules": {m: inspect.getdoc(fn) for m, fn in RULES.items()},
        "thresholds": {name: getattr(dg, name) for name in THRESHOLDS},
        "figures": figures,
        "control": (against or {}).get("control"),
        "against_control": against,
        "against_base": {k: x for k, x in control.base.items() if k != "arms"} if control.base else None,
        "provenance": pv.summarize({p: x for p, x in provenance.items() if x}) if provenance else None,
    }


def render_markdown(summary: dict) -> str:
    """summary.md: the variant table, the per-run diagnoses, the rules, skipped runs and warnings."""
    lines = ["# rlvr compare", ""]
    n_runs = len(summary["runs"])
    axes = ", ".join(f"`{a}`" for a in summary["axes"]) or "none (one variant)"
    lines += [f"{n_runs} run(s) in {len(summary['variants'])} variant(s). Axes that differ: {axes}.", ""]
    lines += [f"![comparison]({f})" for f in summary["figures"] if f.endswith(".png")] + [""]
    lines += _variant_table(summary)
    if summary.get("provenance"):
        lines += ["", "Provenance: " + pv.sentence(summary["provenance"])]
    if summary.get("against_control") and len(summary["variants"]) > 1:
        lines += ["", *against_section(summary["against_control"])]
    if summary.get("against_base"):
        lines += ["", *base_section(summary)]
    lines += ["", "## Diagnosis", ""]
    for v in summary["variants"]:
        lines.append(f"### {v['label']}")
        lines.append("")
        for r in (r for r in summary["runs"] if r["variant"] == v["label"]):
            lines.append(f"- `{r['path']}` (seed {r['seed']}, {r['status']}, last step {r['last_step']})")
            for m in dg.MODES:
                d = r["diagnosis"][m]
                lines.append(f"  - {dg.TITLES[m]}: **{d['status']}** - {d['message']}")
        lines.append("")
    lines += ["## Rules", ""]
    for m, text in summary["rules"].items():
        text = " ".join(text.split())
        title = dg.TITLES[m]
        text = text[len(title) + 2 :] if text.lower().startswith(title.lower() + ": ") else text
        lines += [f"- **{title}**: {text}", ""]
    lines.append("Thresholds: " + ", ".join(f"{k} = {v:g}" for k, v in summary["thresholds"].items()) + ".")
    lines.append("")
    notes = [f"- `{r['path']}`: {w}" for r in summary["runs"] for w in r["warnings"]]
    if summary["skipped"]:
        lines += ["## Skipped runs", ""] + [f"- `{s['path']}`: {s['reason']}" for s in summary["skipped"]] + [""]
    if summary["warnings"] or notes:
        lines += ["## Warnings", ""] + [f"- {w}" for w in summary["warnings"]] + notes + [""]
    return "\n".join(lines)


def _variant_table(summary: dict) -> list[str]:
    ks = {v["k"] for v in summary["variants"] if v["k"] is not None}
    passk = f"pass@{ks.pop()}" if len(ks) == 1 else "pass@k (largest k)"
    head = [
        "variant",
        "seeds",
        "last step",
        "accuracy",
        "pass@1",
        passk,
        "distinct correct",
        "length",
        "KL",
        "entropy",
        "base pass@1 / pass@k",
    ]
    verbose = any(v["base"].get(n, {}).get("n") or v["final"].get(n, {}).get("n") for v in summary["variants"] for n in VERBOSITY)
    if verbose:
        head += ["P(" + n.replace("|", "\\|") + ") base -> final" for n in VERBOSITY]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for v in summary["variants"]:
        f = v["final"]
        kcell = cell(f["pass@k"]) + (f" (k={v['k']})" if passk.endswith("(largest k)") and v["k"] else "")
        base = f"{cell(v['base']['pass@1'])} / {cell(v['base']['pass@k'])}"
        rows.append(
            "| "
            + " | ".join(
                [
                    v["label"].replace("|", "\\|"),
                    str(len(v["runs"])),
                    _steps(v["last_steps"]),
                    cell(f["accuracy"]),
                    cell(f["pass@1"]),
                    kcell,
                    cell(f["distinct_correct"]),
                    cell(f["len_mean"]),
                    cell(f["kl_mean"]),
                    cell(f["entropy"]),
                    base,
                ]
                + ([f"{cell(v['base'][n])} -> {cell(f[n])}" for n in VERBOSITY] if verbose else [])
            )
            + " |"
        )
    note = (
        "Cells: mean ± std across seeds [min, max]. Training metrics (accuracy, length, KL, entropy) are "
        f"the median of each run's last {FINAL_STEPS} logged steps; pass@k and distinct correct (distinct "
        "correct responses per prompt) are from each run's last eval file; "
        "base is eval/step_0.json."
        + (" P(filler|wrong) / P(filler|right): share of the eval samples with filler among the wrong / right "
           "ones, in eval/step_0.json and in the last eval file." if verbose else "")
    )
    return rows + ["", note]


def cell(sp: dict) -> str:
    """A SPREAD as `mean ± std [min, max]` (just the value for one seed), `-` when absent; all four
    numbers with one format chosen by the magnitude of the largest, so they line up."""
    bad = f" (+{sp['nonfinite']} non-finite)" if sp.get("nonfinite") else ""
    if not sp["n"]:
        return "non-finite" if sp.get("nonfinite") else "-"
    scale = max(abs(sp["min"]), abs(sp["max"]))
    spec = ".1f" if scale >= 10 else ".3f" if scale >= 0.01 or scale == 0 else ".2e"
    if sp["n"] == 1:
        return format(sp["mean"], spec) + bad
    return (f"{sp['mean']:{spec}} ± {sp['std']:{spec}} [{sp['min']:{spec}}, {sp['max']:{spec}}]") + bad


def _count(verdicts) -> dict:
    out = {"detected": 0, "possible": 0, "none": 0, "n/a": 0, "onset_steps": []}
    for vd in verdicts:
        out[vd.status] += 1
        if vd.status in ("detected", "possible") and vd.onset_step is not None:
            out["onset_steps"].append(vd.onset_step)
    return out


def _steps(steps: list[int]) -> str:
    return str(steps[0]) if len(set(steps)) == 1 else f"{min(steps)}-{max(steps)}"


def _num(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _plain(x):
    """Recipe values as JSON: scalars as they are, anything else as the label text."""
    return x if x is None or isinstance(x, (bool, int, float, str)) else format_value(x)


# --- against the control ---------------------------------------------------------------------------
def against_section(ag: dict) -> list[str]:
    """summary.md's "Against the control" section: the rule once, then one sentence per arm."""
    arms = ag["arms"]
    m = len(arms)
    lines = [f"## Against the control (`{ag['control']}`)", ""]
    done = [a for a in arms.values() if a["refused"] is None]
    if done:
        a0 = done[0]
        seeds = " and by training seed" if any(a["paired_seeds"] for a in done) else ""
        lines += [
            f"Paired by prompt ({a0['prompts']} prompts, n = {a0['n']} samples each){seeds}. Differences are "
            "other - control at the last eval step both arms have (named per arm). The primary test is the "
            "paired difference of per-prompt scores with prompts and training seeds as crossed variance "
            "components (`rlvr_cli/compare/crossed.py`): a t test (paired seeds: df S - 1; else Satterthwaite's df), "
            f"{'Holm-adjusted over the ' + str(m) + ' arms, ' if m > 1 else ''}and its t interval "
            f"({100 * ag['confidence']:.4g}%{', simultaneous over the arms (Bonferroni)' if m > 1 else ''}). "
            f"An arm is \"better\" or \"worse\" when that p < {ag['alpha']:g} (`paired.py::verdict`). Each "
            f"arm states its MDE: the smallest |difference| these prompts, n and seeds detect with "
            f"{100 * ag.get('power', 0.8):.0f}% power at the per-arm level, and the seeds per arm that would "
            "halve it. Secondary, descriptive: how many seeds lean each way, a percentile bootstrap interval "
            f"({ag['n_resamples']} resamples), an exact McNemar test on per-prompt correctness, and the verdict "
            "of the rule before issue 47 (bootstrap interval AND McNemar: docs/statistics.md). "
            "Learning curves: held-out pass@1 against training steps, R = R0 + (A - R0) / (1 + (C_mid/C)^B) "
            "(ScaleRL, arXiv:2510.13786 eq. 1) fitted per seed; A (ceiling) and C_mid (midpoint) with t "
            "intervals over seeds, compared by Welch's t-test (`rlvr_cli/compare/curves.py`).",
            "",
        ]
    curves_ = ag["curves"]
    for label, a in arms.items():
        lines.append(f"- {arm_sentence(label, a, ag['control'], curves_.get(label), curves_.get(ag['control']))}")
    lines.append("")
    return lines


def base_section(summary: dict) -> list[str]:
    """summary.md's "Against the base model" section: each variant's last common eval step against its
    runs' step 0, by the same test (did training change pass@1 at all?)."""
    ag = summary["against_base"]
    m = len(summary["variants"])
    lines = ["## Against the base model (step 0)", "",
             "Each variant's last eval step that all its runs have, against the same runs' step-0 evaluation "
             "(the base model), paired by prompt and by run, with the primary test above"
             f"{', Holm-adjusted over the ' + str(m) + ' variants' if m > 1 else ''} "
             f"({100 * ag['confidence']:.4g}% intervals): training changed pass@1 or it did not, at the MDE stated. "
             "With one run per variant it is a statement about that run's checkpoint.", ""]
    for v in summary["variants"]:
        a = v.get("against_base")
        if a is not None:
            lines.append(f"- {arm_sentence(v['label'], a, 'its base', None, None, curve_line=False)}")
    lines.append("")
    return lines


def arm_sentence(label: str, a: dict, control: str, curve: dict | None, control_curve: dict | None,
                 curve_line: bool = True) -> str:
    """One arm against the control in words: the verdict, the numbers and the power behind it, the
    secondary lines, and the curve's reading."""
    if a["refused"] is not None:
        head = f"**{label}**: {a['refused'].rstrip('.')}."
    else:
        k = a["k"]
        p1 = a["pass@1"]
        nums = [f"pass@1 {_test(p1)}"]
        if k and k > 1:
            nums += [f"pass@{k} {_test(a['pass@k'])}", f"pass^{k} {_test(a['pass^k'])}"]
        word = a["verdict"]
        if word == "withheld":
            word = f"verdict withheld ({a['verdict_withheld']})"
        else:
            word = f"**{word}**" + (" than" if word in ("better", "worse") else " from")
        at = f" at step {a['step']}" if a["step"] is not None else ""  # records of `rlvr eval`: no training step
        head = f"**{label}**: {word} {control}{at}: {'; '.join(nums)}. {power_sentence(p1)}"
        extra = []
        sc = a.get("seed_consistency")
        if sc:
            extra.append(f"{sc['lower']} of {sc['seeds']} seeds lower, {sc['higher']} higher")
        mc = a["mcnemar"]
        if mc is not None:
            seeds_ = len(mc.get("per_seed") or ()) or 1
            what = "prompt x seed pairs" if seeds_ > 1 else "prompts"
            extra.append(f"McNemar ({a['binary']}): {mc['only_control']} {what} right only under {control}, "
                         f"{mc['only_other']} only under {label}")
        bt = a.get("bootstrap")
        if bt:
            extra.append(f"bootstrap {100 * bt['confidence']:.4g}% [{bt['low']:+.3f}, {bt['high']:+.3f}]")
        if a.get("legacy_verdict"):
            extra.append(f"old rule: {a['legacy_verdict']}")
        if extra:
            head += " Secondary: " + "; ".join(extra) + "."
    if not curve_line:
        return head
    return head + " " + curve_sentence(label, a.get("curve_vs_control"), curve, control, control_curve)


def power_sentence(t: dict) -> str:
    """"MDE 0.041 (80% power); 9 seeds per arm would halve it": never a verdict without its power."""
    if t.get("p") is None:
        return f"No test: {t.get('reason') or 'the design gives no variance estimate'}."
    mde = t.get("mde")
    text = f"MDE {mde:.3f} at {100 * t['power']:.0f}% power"
    s2 = t.get("seeds_to_halve_mde")
    p2 = t.get("prompts_to_halve_mde")
    more = []
    if s2:
        more.append(f"{s2} seeds per arm")
    if p2:
        more.append(f"{p2} prompts")
    if more:
        text += f"; {' or '.join(more)} would halve it"
    elif t.get("design") != "one seed":
        text += "; no count of seeds or prompts up to 4096 halves it"
    return text + "."


def _test(d: dict) -> str:
    if d is None:
        return "-"
    if d.get("p") is None:
        return f"{d['mean']:+.3f} (no test)"
    ph = d.get("p_holm")
    holm = f", Holm {ph:.3g}" if ph is not None and ph != d["p"] else ""
    return f"{d['mean']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}] (p {d['p']:.3g}{holm})"


def curve_sentence(label: str, cmp: dict | None, curve: dict | None, control: str, control_curve: dict | None) -> str:
    """Ceiling and midpoint of both curves and what differs: "faster" / "slower", "higher/lower ceiling"."""
    if curve is None or curve["refused"]:
        return f"Learning curve: not fitted ({curve['refused'] if curve else 'no curve'})."
    cc = control_curve or {}
    text = (f"Learning curve: ceiling {_iv(curve['a'])} against {control}'s {_iv(cc.get('a'))}, midpoint "
            f"{_iv(curve['c_mid'], '.3g')} against {_iv(cc.get('c_mid'), '.3g')} steps")
    words = []
    if cmp and cmp["ceiling"] in ("higher", "lower"):
        words.append(f"**{cmp['ceiling']} ceiling**")
    if cmp and cmp["efficiency"] in ("faster", "slower"):
        words.append(f"**{cmp['efficiency']}**")
    return text + ": " + (" and ".join(words) + f" ({cmp['summary']})" if words else (cmp or {}).get("summary", "not compared")) + "."


def _signed(d: dict) -> str:
    return f"{d['mean']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"


def _iv(x, spec: str = ".3f") -> str:
    if not x:
        return "-"
    est, lo, hi = x
    return format(est, spec) + (f" [{lo:{spec}}, {hi:{spec}}]" if lo is not None else "")
