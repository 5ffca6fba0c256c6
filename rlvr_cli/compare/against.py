"""Every arm against the control: the paired per-prompt statistics and the fitted learning curves.

The glue between the variants ``rlvr compare`` reads and the statistics of :mod:`.paired` and
:mod:`.curves` (no statistic is computed here). For each arm other than the control:

- the eval step compared is the largest step every run of both arms evaluated (the "budget");
- the two arms' per-prompt results there are paired by prompt (and by training seed when both arms
  have exactly the same seeds); arms evaluated on different prompts or n are refused, with the reason;
- pass@1, pass@k and pass^k (k: the largest k of both arms' pass@k tables) differences other - control
  by the primary test of :mod:`.crossed` (prompts and training seeds as crossed variance components):
  p Holm-adjusted over the m arms per metric, a t interval simultaneous over them (Bonferroni:
  confidence 1 - ALPHA/m), the minimum detectable effect at level ALPHA/m and 80% power, and the seeds
  and prompts that would halve it; the verdict (:func:`.paired.verdict`) is pass@1's;
- secondary, descriptive: how many paired seeds lean each way, the seeded bootstrap interval of pass@1,
  an exact McNemar test on per-prompt greedy (else majority) correctness, and the verdict the rule
  before issue 47 would give (``legacy_verdict``: the calibration study measures both);
- each arm's learning curve (held-out pass@1 against steps, one fit per seed) and
  :func:`.curves.compare_fits` against the control's.

A problem with one arm (no eval files, no per-prompt results, a NaN count, different prompts) becomes
that arm's ``refused`` reason; the other arms are still compared. Results are JSON-ready dicts
(summary.json's ``against_control``, schema in :mod:`.summary`).
"""

from __future__ import annotations

import math
from pathlib import Path

from rlvr_cli.compare import crossed, curves, paired, plan
from rlvr_cli.compare.variants import Variant
from rlvr_cli.errors import UserError


def resolve_control(variants: list[Variant], control: str | None) -> Variant:
    """The control variant: by label, or the variant of a given run directory; the first by default."""
    if control is None:
        return variants[0]
    for v in variants:
        if v.label == control:
            return v
    want = Path(control).resolve()
    for v in variants:
        if any(r.path.resolve() == want for r in v.runs):
            return v
    labels = ", ".join(repr(v.label) for v in variants)
    raise UserError(f"--control {control}: not a variant label nor one of the runs' directories (variants: {labels})")


def compare_to_control(variants: list[Variant], control: Variant, n_resamples: int = paired.N_RESAMPLES,
                       seed: int = paired.BOOTSTRAP_SEED, fingerprints: dict[str, str | None] | None = None,
                       plan_target: float | None = None) -> dict:
    """{"control", "n_resamples", "seed", "confidence", "alpha", "power", "arms": {label: ARM},
    "curves": {label: CURVE}}.

    ``fingerprints`` maps a run path to its base-weights hash: arms whose runs started from other
    weights than the control's get no verdict (the comparison is not like for like)."""
    others = [v for v in variants if v is not control]
    m = max(1, len(others))
    confidence = 1 - paired.ALPHA / m
    fits = {v.label: _fit(v) for v in variants}
    arms: dict[str, dict] = {}
    tests: dict[str, tuple] = {}
    for v in others:
        arms[v.label], tests[v.label] = _against(control, v, n_resamples, seed, confidence, m)
        cmp = curves.compare_fits(fits[control.label][1], fits[v.label][1])
        arms[v.label]["curve_vs_control"] = {"ceiling": cmp.ceiling, "efficiency": cmp.efficiency,
                                             "p_ceiling": cmp.p_ceiling, "p_midpoint": cmp.p_midpoint,
                                             "summary": cmp.summary}
    labels = _holm_family(arms, tests)
    for lbl in labels:
        different = _different_base(control, next(v for v in others if v.label == lbl), fingerprints or {})
        if different:
            arms[lbl]["verdict_withheld"] = different
            arms[lbl]["verdict"] = "withheld"
    if plan_target is not None:
        for lbl in labels:
            v = next(x for x in others if x.label == lbl)
            runs = list(control.runs) + list(v.runs)
            step = arms[lbl]["step"]
            arms[lbl]["plan"] = plan.plan_arm(
                arms[lbl]["pass@1"], plan_target, [r.seconds for r in runs],
                [r.evals[step].get("sample_s") for r in runs if step in r.evals
                 and isinstance(r.evals[step].get("sample_s"), (int, float))],
                max(len(r.evals) for r in runs))
    return {"control": control.label, "n_resamples": n_resamples, "seed": seed, "confidence": confidence,
            "alpha": paired.ALPHA, "power": crossed.POWER, "arms": arms,
            "curves": {lbl: f[0] for lbl, f in fits.items()}}


def compare_to_base(variants: list[Variant], n_resamples: int = paired.N_RESAMPLES,
                    seed: int = paired.BOOTSTRAP_SEED) -> dict:
    """Each variant against the base model it started from: its runs' last common eval step against their
    own step 0 (eval/step_0.json), paired by prompt and by run (each run's base and final on its seed),
    with the same primary test, MDE, Holm family (over the variants) and secondary lines as an arm against
    the control. It answers "did training change pass@1?" where :func:`compare_to_control` answers "did
    the switch?". {"n_resamples", "seed", "confidence", "alpha", "power", "arms": {label: ARM}}; an ARM's
    ``step`` is the final step compared, ``refused`` says why there is none (no step-0 evaluation)."""
    m = max(1, len(variants))
    confidence = 1 - paired.ALPHA / m
    arms: dict[str, dict] = {}
    tests: dict[str, tuple | None] = {}
    for v in variants:
        runs = [r for r in v.runs if r.evals]
        steps = set.intersection(*({s for s in r.evals if s > 0} for r in runs)) if runs else set()
        if not runs or not all(0 in r.evals for r in runs):
            arms[v.label], tests[v.label] = _empty(), None
            arms[v.label]["refused"] = "no step-0 evaluation (eval/step_0.json) in every run: no base to pair with"
        elif not steps:
            arms[v.label], tests[v.label] = _empty(), None
            arms[v.label]["refused"] = "no eval step after 0 that every run evaluated"
        else:
            seeds = [r.seed for r in runs]
            arms[v.label], tests[v.label] = _tested(("base", seeds, [r.evals[0] for r in runs]),
                                                    (v.label, seeds, [r.evals[max(steps)] for r in runs]),
                                                    max(steps), n_resamples, seed, confidence, m)
    _holm_family(arms, tests)
    return {"n_resamples": n_resamples, "seed": seed, "confidence": confidence, "alpha": paired.ALPHA,
            "power": crossed.POWER, "arms": arms}


def compare_records(control: tuple[str, list[dict]], others: list[tuple[str, list[dict]]],
                    seeds: list[int | None] | None = None, n_resamples: int = paired.N_RESAMPLES,
                    seed: int = paired.BOOTSTRAP_SEED) -> dict:
    """Arms given as eval records rather than runs: each (label, one record per training seed, in the
    order of ``seeds``, None: one unnamed seed), each other arm against ``control`` with the primary
    test, MDE, Holm family and secondary lines of :func:`compare_to_control` (no learning curves).
    For results made by pipelines of `rlvr eval` / stage runs, not by a sweep (results/r1,
    results/inference_compute). An ARM's ``step`` is the records' step when every record of both arms
    has the same one, else None. {"control", "confidence", "alpha", "power", "arms": {label: ARM}}."""
    seeds = list(seeds) if seeds is not None else [None] * len(control[1])
    m = max(1, len(others))
    confidence = 1 - paired.ALPHA / m
    arms: dict[str, dict] = {}
    tests: dict[str, tuple | None] = {}
    for label, records in others:
        steps = {rec.get("step") for rec in [*control[1], *records]}
        step = steps.pop() if len(steps) == 1 else None  # stages of a pipeline: each arm its own step
        arms[label], tests[label] = _tested((control[0], seeds, list(control[1])), (label, seeds, list(records)),
                                            step, n_resamples, seed, confidence, m)
    _holm_family(arms, tests)
    return {"control": control[0], "n_resamples": n_resamples, "seed": seed, "confidence": confidence,
            "alpha": paired.ALPHA, "power": crossed.POWER, "arms": arms}


def _holm_family(arms: dict[str, dict], tests: dict) -> list[str]:
    """Holm over the arms tested (one family per metric, and McNemar's), then each arm's verdict (pass@1's)
    and the old rule's; the labels of the arms tested."""
    labels = [lbl for lbl in arms if arms[lbl]["refused"] is None]
    for metric in METRICS:
        adjusted = paired.holm([tests[lbl][0][metric].p_value for lbl in labels])
        for lbl, p_holm in zip(labels, adjusted):
            arms[lbl][metric]["p_holm"] = p_holm
    mc_holm = paired.holm([tests[lbl][1].p_value if tests[lbl][1] is not None else None for lbl in labels])
    for lbl, p_mc in zip(labels, mc_holm):
        arm = arms[lbl]
        if arm["mcnemar"] is not None:
            arm["mcnemar"]["p_holm"] = p_mc
        arm["verdict"] = paired.verdict(tests[lbl][0]["pass@1"], arm["pass@1"]["p_holm"])
        arm["legacy_verdict"] = paired.legacy_verdict(tests[lbl][2], tests[lbl][1], p_mc)
    return labels


METRICS = ("pass@1", "pass@k", "pass^k")
"""The per-prompt scores tested; the verdict is pass@1's (the primary test), the others are reported."""


def _empty() -> dict:
    return {"step": None, "binary": None, "paired_seeds": None, "k": None, "pass@1": None, "pass@k": None,
            "pass^k": None, "seed_consistency": None, "bootstrap": None, "mcnemar": None, "verdict": None,
            "legacy_verdict": None, "refused": None}


def _against(control: Variant, other: Variant, n_resamples: int, seed: int, confidence: float,
             m: int) -> tuple[dict, tuple | None]:
    step, why = _budget(control, other)
    if step is None:
        out = _empty()
        out["refused"] = why
        return out, None
    return _tested(*[(v.label, [r.seed for r in v.runs if r.evals], [r.evals[step] for r in v.runs if r.evals])
                     for v in (control, other)], step, n_resamples, seed, confidence, m)


def _tested(control: tuple[str, list, list[dict]], other: tuple[str, list, list[dict]], step: int,
            n_resamples: int, seed: int, confidence: float, m: int) -> tuple[dict, tuple | None]:
    """One comparison of two arms' eval records, each (label, seeds, records), at ``step`` (see the module
    docstring); the ARM dict and (tests, McNemar, bootstrap) for the family's Holm step, None when refused."""
    out = _empty()
    out["step"] = step
    crec, orec = control[2], other[2]
    greedy = all(isinstance(rec.get("per_prompt_greedy"), list) for rec in crec + orec)
    key = "per_prompt_greedy" if greedy else "per_prompt_majority"
    try:
        a = paired.arm_from_records(control[0], control[1], crec, key)
        b = paired.arm_from_records(other[0], other[1], orec, key)
        pairing = paired.pair_arms(a, b)
        k = max(set.intersection(*(set(rec["pass_at_k"]) for rec in crec + orec)) & set(range(1, a.n + 1)),
                default=1)
        tests, scores = {}, {}
        for name, metric, kk in (("pass@1", "pass@k", 1), ("pass@k", "pass@k", k), ("pass^k", "pass^k", k)):
            scores[name] = (paired.per_prompt_scores(pairing.control, metric, kk),
                            paired.per_prompt_scores(pairing.other, metric, kk))
            tests[name] = crossed.crossed_test(*scores[name], paired_seeds=pairing.paired_seeds,
                                               n=a.n if name == "pass@1" else None)
        boot = paired.paired_difference(*scores["pass@1"], paired_seeds=pairing.paired_seeds,
                                        n_resamples=n_resamples, seed=seed, confidence=confidence)
    except UserError as e:
        out["refused"] = f"not paired: {e}"
        return out, None
    test = paired.paired_mcnemar(pairing)
    alpha = paired.ALPHA / m
    out.update({"binary": "greedy" if greedy else "majority", "paired_seeds": pairing.paired_seeds, "k": k,
                "prompts": len(pairing.control.prompt_ids), "n": pairing.control.n,
                **{name: crossed_json(t, confidence, alpha) for name, t in tests.items()},
                "seed_consistency": (paired.seed_consistency(*scores["pass@1"]) if pairing.paired_seeds else None),
                "bootstrap": _boot_json(boot)})
    if test is not None:
        out["mcnemar"] = {"only_control": test.only_control, "only_other": test.only_other, "p": test.p_value,
                          "p_holm": None, "per_seed": list(test.per_seed)}
    else:
        out["mcnemar_missing"] = ("no per-prompt binary correctness in some record" if a.binary is None or b.binary is None
                                  else "several training seeds that are not the same in both arms: no single pair per prompt")
    return out, (tests, test, boot)


def crossed_json(t: crossed.CrossedTest, confidence: float, alpha: float) -> dict:
    """A :class:`~rlvr_cli.compare.crossed.CrossedTest` as summary.json's TEST: the interval at
    ``confidence`` (simultaneous over the arms), the MDE at the per-arm level ``alpha`` and POWER, and
    the seeds (and prompts) per arm that would halve it (:func:`rlvr_cli.compare.crossed.seeds_for`)."""
    low, high = t.interval(confidence)
    mde = t.mde(alpha)
    comp = t.components
    half_seeds = half_prompts = None
    if mde is not None and mde > 0:
        s_now = max(t.seeds)
        half_seeds = crossed.seeds_for(comp, mde / 2, t.prompts, comp.n, alpha, start=s_now + 1)
        half_prompts = crossed.prompts_for(comp, mde / 2, t.seeds if comp.design == "unpaired seeds" else s_now,
                                           comp.n, alpha, start=t.prompts + 1)
    return {"mean": t.mean, "low": _num_or_none(low), "high": _num_or_none(high), "confidence": confidence,
            "se": _num_or_none(t.se), "df": _num_or_none(t.df), "p": t.p_value, "p_holm": None,
            "design": t.design, "reason": t.reason, "mde": mde, "power": crossed.POWER, "alpha_per_arm": alpha,
            "seeds_to_halve_mde": half_seeds, "prompts_to_halve_mde": half_prompts,
            "prompts": t.prompts, "seeds": list(t.seeds), "components": crossed.components_json(comp)}


def _boot_json(d: paired.Difference) -> dict:
    return {"mean": d.mean, "low": d.low, "high": d.high, "confidence": d.confidence, "n_resamples": d.n_resamples,
            "seed": d.seed, "resampled": d.resampled}


def _num_or_none(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def _budget(control: Variant, other: Variant) -> tuple[int | None, str]:
    """The largest eval step after 0 that every run with eval files of both arms has; the reason when none."""
    for v in (control, other):
        if not any(r.evals for r in v.runs):
            return None, f"arm {v.label}: no eval files: nothing to pair"
    steps = set.intersection(*({s for s in r.evals if s > 0} for v in (control, other) for r in v.runs if r.evals))
    if not steps:
        return None, f"arms {control.label} and {other.label}: no eval step after 0 that every run evaluated"
    return max(steps), ""


def _fit(v: Variant) -> tuple[dict, curves.ArmFit]:
    """The arm's learning curve: held-out pass@1 against training steps, one fit per seed, R_0 = step 0."""
    seeds = []
    for r in v.runs:
        later = sorted(s for s in r.evals if s > 0)
        r0 = r.evals[0]["pass_at_k"].get(1) if 0 in r.evals else None
        seeds.append(([float(s) for s in later], [_num(r.evals[s]["pass_at_k"].get(1)) for s in later],
                      r0 if r0 is not None else math.nan))
    fit = curves.fit_arm(v.label, seeds)
    iv = lambda x: None if x is None else [x.estimate, x.low, x.high]  # noqa: E731
    return {"a": iv(fit.a), "c_mid": iv(fit.c_mid), "b": iv(fit.b), "r0": fit.r0, "seeds_fitted": len(fit.seeds),
            "compute": "steps", "notes": list(fit.notes), "refused": fit.reason}, fit


def _num(x) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else math.nan


def _different_base(control: Variant, other: Variant, fingerprints: dict[str, str | None]) -> str | None:
    ours = {fingerprints.get(str(r.path)) for r in control.runs} - {None}
    theirs = {fingerprints.get(str(r.path)) for r in other.runs} - {None}
    if ours and theirs and ours != theirs:
        return (f"arm {other.label} started from other base weights ({', '.join(sorted(theirs))}) than "
                f"{control.label} ({', '.join(sorted(ours))}): not like for like")
    return None
