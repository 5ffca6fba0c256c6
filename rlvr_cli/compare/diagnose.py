"""The three GRPO failure modes, each a documented rule on the logged metrics of one run.

Every rule reads the per-step metrics (and, for entropy collapse, the eval files), works on a
centred rolling median over DIAG_SMOOTH_STEPS logged steps (one or two noisy steps cannot trigger a
verdict), measures a start level as the median of the first few steps, and returns a
:class:`Verdict`: ``detected``, ``possible`` (the metric half of the rule holds but the data to
confirm it is missing), ``none``, or ``n/a`` (the metric was not logged or the run is too short),
with the step where it began and the numbers behind it. Thresholds are the named constants below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from rlvr_cli.compare.run import Run
from rlvr_cli.compare.series import finite, first_sustained, rolling_median, start_level, stretch_start

DIAG_SMOOTH_STEPS = 5
"""Window (logged steps) of the centred rolling median that every rule looks at."""
START_STEPS = 5
"""The start level of a metric is the median of its first START_STEPS finite values."""
PERSIST_STEPS = 5
"""A condition counts once it holds for PERSIST_STEPS consecutive logged steps (or until the last)."""

KL_RISE_FACTOR = 100.0
"""KL explosion: smoothed KL reaches 100x (two orders of magnitude above) its reference level."""
KL_ONSET_FACTOR = 10.0
"""The explosion began where the run-up first passed 10x the reference level."""
KL_MEAN_FLOOR = 1e-2
"""Reference level of kl_mean is at least 0.01 nats/token (KL starts at ~0: without a floor any
healthy drift from the reference would be "orders of magnitude"). So kl_mean must reach >= 1 nat/token."""
KL_NONFINITE_STEPS = 2
"""Non-finite KL counts when logged at 2 consecutive steps (or at the last logged step): one skipped
update with an overflowed estimate is not an explosion, a run that stays non-finite (or stops) is."""

ENTROPY_COLLAPSE_FRACTION = 0.5
"""Entropy collapse: smoothed entropy at or below half of its start level."""
PASSK_TOLERANCE = 0.02
"""pass@k differences within 0.02 (absolute) count as no change."""

LEN_GROWTH_FACTOR = 1.5
"""Length inflation: smoothed length of incorrect responses at least 1.5x its start level ..."""
LEN_MIN_GROWTH_TOKENS = 4.0
"""... and at least 4 tokens longer (short responses make ratios noisy)."""
LEN_ONSET_FACTOR = 1.1
"""The inflation began where the run-up first passed 1.1x the start level."""
ACC_MIN_GAIN = 0.05
"""Growth is excused only when accuracy rose by more than this while the length grew (end level - level
at the onset) ..."""
LEN_CORRECT_MIN_GROWTH = 1.1
"""... and the correct responses grew along: their end level >= 1.1x their level at the onset (longer
useful work lengthens the responses that are right, not only the wrong ones)."""

MODES = ("kl_explosion", "entropy_collapse", "length_inflation")
TITLES = {
    "kl_explosion": "KL explosion",
    "entropy_collapse": "entropy collapse",
    "length_inflation": "length inflation",
}


@dataclass
class Verdict:
    mode: str
    status: str  # detected | possible | none | n/a
    message: str
    onset_step: int | None = None
    evidence: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "status": self.status,
            "onset_step": self.onset_step,
            "message": self.message,
            "evidence": {k: _json_number(v) for k, v in self.evidence.items()},
        }


def diagnose(run: Run) -> dict[str, Verdict]:
    """All three rules on one run, keyed by mode."""
    return {
        "kl_explosion": kl_explosion(run),
        "entropy_collapse": entropy_collapse(run),
        "length_inflation": length_inflation(run),
    }


# --- KL explosion ----------------------------------------------------------------------------------
def kl_explosion(run: Run) -> Verdict:
    """KL explosion: with reference = max(lowest of the first START_STEPS (5) values of kl_mean,
    KL_MEAN_FLOOR = 0.01), the rule fires at the first step where the smoothed kl_mean reaches
    KL_RISE_FACTOR (100) x reference (so at least 1 nat per token), or where NaN/Infinity is logged at
    KL_NONFINITE_STEPS (2) consecutive steps (or at the last step). It began at the first step of the
    unbroken run-up before that where the smoothed value was >= KL_ONSET_FACTOR (10) x reference (or
    was non-finite). kl_max is reported beside it but does not decide: a max over thousands of tokens
    reaches 10+ nats on a single rare token as soon as a policy sharpens (seen in healthy and
    entropy-collapsing runs), which is drift of one token, not of the policy."""
    found, evidence = [], {}
    kl_max = run.series("kl_max")
    if kl_max is not None and kl_max.notna().any():
        evidence["kl_max_peak"] = float(rolling_median(kl_max, DIAG_SMOOTH_STEPS).max())
    for key, floor in (("kl_mean", KL_MEAN_FLOOR),):
        s = run.series(key)
        if s is None:
            continue
        bad = run.nonfinite[key]
        # Min, not median: KL is 0 at step 1 (policy = reference) and an explosion can start at step 2.
        head = finite(s).iloc[:START_STEPS]
        start = float(head.min()) if len(head) else float("nan")
        ref = max(start, floor) if math.isfinite(start) else floor
        sm = rolling_median(s, DIAG_SMOOTH_STEPS).reindex(s.index)
        near = (sm >= KL_ONSET_FACTOR * ref) | bad
        rise = first_sustained(sm >= KL_RISE_FACTOR * ref, 1)
        blowup = first_sustained(bad, KL_NONFINITE_STEPS)
        trigger = min((t for t in (rise, blowup) if t is not None), default=None)
        how = "turned non-finite" if trigger is not None and trigger == blowup and trigger != rise else "rose"
        evidence[f"{key}_start"] = start
        evidence[f"{key}_reference"] = ref
        evidence[f"{key}_peak"] = float(sm.max()) if sm.notna().any() else float("nan")
        if bad.any():
            evidence[f"{key}_first_nonfinite_step"] = int(bad[bad].index[0])
        if trigger is not None:
            onset = stretch_start(near, trigger)
            evidence[f"{key}_trigger_step"] = trigger
            found.append((onset, trigger, key, start, ref, sm, how))
    if not evidence:
        return Verdict("kl_explosion", "n/a", "kl_max/kl_mean not logged (KL not tracked, or an SFT run)")
    reward = run.series("reward_mean")
    if reward is not None:
        evidence["reward_start"] = start_level(reward, START_STEPS)
        evidence["reward_end"] = (
            float(rolling_median(reward, DIAG_SMOOTH_STEPS).iloc[-1]) if reward.notna().any() else float("nan")
        )
    if not found:
        peaks = ", ".join(
            f"{k} peak {_g(evidence[k + '_peak'])} < {_g(KL_RISE_FACTOR * evidence[k + '_reference'])}"
            for k in ("kl_mean",)
            if k + "_peak" in evidence and k + "_reference" in evidence
        )
        if "kl_max_peak" in evidence:
            peaks += f" (kl_max peak {_g(evidence['kl_max_peak'])})"
        return Verdict("kl_explosion", "none", f"no explosion: {peaks}", evidence=evidence)
    onset, trigger, key, start, ref, sm, how = min(found, key=lambda f: (f[0], f[1]))
    if how == "rose":
        parts = [
            (
                f"{key} {_g(start)} at start -> {_g(sm[trigger])} at step {trigger} "
                f"(>= {KL_RISE_FACTOR:g}x reference {_g(ref)}), peak {_g(evidence[key + '_peak'])}"
            )
        ]
    else:
        peak = _g(evidence[key + "_peak"])
        parts = [f"{key} {_g(start)} at start turned non-finite at step {trigger}, finite peak {peak}"]
    if "kl_max_peak" in evidence:
        parts.append(f"kl_max peak {_g(evidence['kl_max_peak'])}")
    first_bad = [evidence[k] for k in ("kl_max_first_nonfinite_step", "kl_mean_first_nonfinite_step") if k in evidence]
    if first_bad and how == "rose":
        parts.append(f"first non-finite value at step {min(first_bad)}")
    if "reward_start" in evidence:
        parts.append(f"reward {_g(evidence['reward_start'])} -> {_g(evidence['reward_end'])}")
    evidence["trigger_step"] = trigger
    return Verdict("kl_explosion", "detected", f"from step {onset}: " + "; ".join(parts), onset, evidence)


# --- entropy collapse ------------------------------------------------------------------------------
def entropy_collapse(run: Run) -> Verdict:
    """Entropy collapse: the smoothed entropy falls to <= ENTROPY_COLLAPSE_FRACTION (0.5) x its
    start level and stays there for PERSIST_STEPS (5) logged steps; onset = the first such step. It is
    *detected* when, at the largest k evaluated both at step 0 (the base) and at the last eval,
    pass@k has stopped rising (its best value at evals from the onset on is <= its value at the last
    eval before the onset + PASSK_TOLERANCE, that value being below 1 - PASSK_TOLERANCE so there was
    room to rise) or ended below the base (last < base - PASSK_TOLERANCE).
    Without a base eval and an eval from the onset on it is only *possible*."""
    s = run.series("entropy")
    if s is None or s.notna().sum() <= START_STEPS:
        return Verdict("entropy_collapse", "n/a", "entropy not logged or too few steps")
    start = start_level(s, START_STEPS)
    sm = rolling_median(s, DIAG_SMOOTH_STEPS)
    evidence = {
        "entropy_start": start,
        "entropy_end": float(sm.iloc[-1]),
        "entropy_min": float(sm.min()),
        "entropy_end_fraction": float(sm.iloc[-1] / start) if start > 0 else float("nan"),
    }
    if not start > 0:
        return Verdict("entropy_collapse", "n/a", f"entropy start level {_g(start)} is not positive", evidence=evidence)
    onset = first_sustained(sm <= ENTROPY_COLLAPSE_FRACTION * start, PERSIST_STEPS)
    fell = f"entropy {_g(start)} -> {_g(evidence['entropy_end'])} ({evidence['entropy_end_fraction']:.0%} of start)"
    if onset is None:
        return Verdict(
            "entropy_collapse", "none", f"{fell}; threshold {ENTROPY_COLLAPSE_FRACTION:.0%}", evidence=evidence
        )
    evidence["entropy_at_onset"] = float(sm.loc[onset])
    passk = _passk_at_largest_k(run)
    if passk is None:
        return Verdict(
            "entropy_collapse",
            "possible",
            f"from step {onset}: {fell}; no base and later eval to check pass@k",
            onset,
            evidence,
        )
    k, by_step = passk
    base, last_step = by_step[0], max(by_step)
    before_step = max(st for st in by_step if st < onset)
    after = {st: v for st, v in by_step.items() if st >= onset}
    evidence.update(
        {
            "k": k,
            "passk_base": base,
            "passk_last": by_step[last_step],
            "passk_last_step": last_step,
            "passk_before_onset": by_step[before_step],
            "passk_before_onset_step": before_step,
        }
    )
    if not after:
        return Verdict(
            "entropy_collapse",
            "possible",
            f"from step {onset}: {fell}; no eval from step {onset} on to check pass@{k}",
            onset,
            evidence,
        )
    best_after = max(after.values())
    evidence["passk_best_after_onset"] = best_after
    below_base = by_step[last_step] < base - PASSK_TOLERANCE
    # "Stopped rising" needs room to rise: at pass@k ~ 1 a flat curve says nothing about narrowing.
    room = by_step[before_step] < 1.0 - PASSK_TOLERANCE
    stalled = room and best_after <= by_step[before_step] + PASSK_TOLERANCE
    trend = (
        f"pass@{k} base {_g(base)}, step {before_step} {_g(by_step[before_step])}, "
        f"best after onset {_g(best_after)}, last (step {last_step}) {_g(by_step[last_step])}"
    )
    if below_base or stalled:
        why = "fell below the base" if below_base else "stopped rising"
        return Verdict(
            "entropy_collapse", "detected", f"from step {onset}: {fell}; pass@{k} {why}: {trend}", onset, evidence
        )
    return Verdict(
        "entropy_collapse", "none", f"{fell} from step {onset}, but pass@{k} kept rising: {trend}", None, evidence
    )


def _passk_at_largest_k(run: Run) -> tuple[int, dict[int, float]] | None:
    """(k, {eval step: pass@k}) for the largest k in both the base (step 0) and the last eval."""
    if 0 not in run.evals or len(run.evals) < 2:
        return None
    last = run.evals[max(run.evals)]["pass_at_k"]
    common = set(run.evals[0]["pass_at_k"]) & set(last)
    if not common:
        return None
    k = max(common)
    return k, {st: e["pass_at_k"][k] for st, e in sorted(run.evals.items()) if k in e["pass_at_k"]}


# --- length inflation ------------------------------------------------------------------------------
def length_inflation(run: Run) -> Verdict:
    """Length inflation: the smoothed len_incorrect reaches >= LEN_GROWTH_FACTOR (1.5) x its start level
    and >= start + LEN_MIN_GROWTH_TOKENS (4), stays there for PERSIST_STEPS (5) logged steps and is still
    there at the end (a rise that fell back is not the state the run ended in), and the growth is not
    longer useful work. It is excused as useful work only when, *over the same stretch*,
    accuracy rose (the median of its last START_STEPS (5) values > its level at the onset, the median of
    the START_STEPS values up to the onset, + ACC_MIN_GAIN (0.05)) **and** the correct responses grew
    along (their end level >= LEN_CORRECT_MIN_GROWTH (1.1) x their level at the onset; without
    len_correct, accuracy alone decides). It began at the first step of the unbroken run-up where the
    smoothed len_incorrect was >= LEN_ONSET_FACTOR (1.1) x start. Without accuracy it is only *possible*.

    This is the signature of GRPO's 1/|o| (Dr. GRPO, arXiv 2503.20783, §3.1: incorrect responses keep
    lengthening while correct ones do not; results/README.md, length section): a wrong response is
    pushed down less per token the longer it is and a right one is pushed up more the shorter it is, so
    wrong responses lengthen and right ones do not, whatever accuracy does meanwhile. Accuracy that rises
    while the right responses lengthen too is longer useful work, not inflation."""
    s = run.series("len_incorrect")
    if s is None or s.notna().sum() <= START_STEPS:
        return Verdict("length_inflation", "n/a", "len_incorrect not logged or too few steps with incorrect responses")
    start = start_level(s, START_STEPS)
    sm = rolling_median(s, DIAG_SMOOTH_STEPS)
    evidence = {
        "len_incorrect_start": start,
        "len_incorrect_end": float(sm.iloc[-1]),
        "len_incorrect_max": float(sm.max()),
    }
    grew = f"incorrect length {_g(start)} -> {_g(evidence['len_incorrect_end'])}"
    correct = run.series("len_correct")
    if correct is not None and correct.notna().any():
        evidence["len_correct_start"] = start_level(correct, START_STEPS)
        evidence["len_correct_end"] = float(rolling_median(correct, DIAG_SMOOTH_STEPS).iloc[-1])
        grew += f" (correct {_g(evidence['len_correct_start'])} -> {_g(evidence['len_correct_end'])})"
    threshold = max(LEN_GROWTH_FACTOR * start, start + LEN_MIN_GROWTH_TOKENS)
    trigger = first_sustained(sm >= threshold, PERSIST_STEPS)
    if trigger is None:
        return Verdict("length_inflation", "none", f"{grew}; threshold {_g(threshold)}", evidence=evidence)
    onset = stretch_start(sm >= LEN_ONSET_FACTOR * start, trigger)
    evidence.update({"trigger_step": trigger, "len_incorrect_at_trigger": float(sm.loc[trigger])})
    if not evidence["len_incorrect_end"] >= threshold:
        peak_step = int(sm.idxmax())
        return Verdict("length_inflation", "none",
                       f"{grew}: it rose past {_g(threshold)} from step {trigger} (peak {_g(evidence['len_incorrect_max'])} "
                       f"at step {peak_step}) but ended below it", evidence=evidence)
    raw_acc = run.series("accuracy")
    acc = finite(raw_acc) if raw_acc is not None else None
    if acc is None or len(acc) == 0:
        return Verdict(
            "length_inflation", "possible", f"from step {onset}: {grew}; accuracy not logged", onset, evidence
        )
    acc_onset, acc_end = _onset_and_end(acc, onset)
    evidence.update({"accuracy_start": start_level(acc, START_STEPS), "accuracy_at_onset": acc_onset, "accuracy_end": acc_end})
    acc_text = f"accuracy {_g(acc_onset)} at the onset (step {onset}), {_g(acc_end)} at the end"
    if not acc_end > acc_onset + ACC_MIN_GAIN:
        return Verdict("length_inflation", "detected", f"from step {onset}: {grew} while {acc_text}", onset, evidence)
    right = finite(correct) if correct is not None else None
    if right is None or len(right) == 0:
        return Verdict(
            "length_inflation", "none", f"{grew} from step {onset}, but accuracy rose: {acc_text}", None, evidence
        )
    right_onset, right_end = _onset_and_end(right, onset)
    evidence.update({"len_correct_at_onset": right_onset, "len_correct_at_end": right_end})
    right_text = f"correct length {_g(right_onset)} at the onset, {_g(right_end)} at the end"
    if right_end >= LEN_CORRECT_MIN_GROWTH * right_onset:
        return Verdict("length_inflation", "none",
                       f"{grew} from step {onset}, but accuracy rose and the correct responses lengthened too: "
                       f"{acc_text}; {right_text}", None, evidence)
    return Verdict("length_inflation", "detected",
                   f"from step {onset}: {grew}; accuracy rose ({acc_text}) but only the incorrect responses "
                   f"lengthened ({right_text})", onset, evidence)


def _onset_and_end(s, onset: int) -> tuple[float, float]:
    """A metric's level at ``onset`` (median of its START_STEPS values up to it, or of its first ones when
    fewer precede it) and at the end (median of its last START_STEPS values)."""
    upto = s.loc[:onset]
    at_onset = float((upto.iloc[-START_STEPS:] if len(upto) >= START_STEPS else s.iloc[:START_STEPS]).median())
    return at_onset, float(s.iloc[-START_STEPS:].median())


# --- formatting ------------------------------------------------------------------------------------
def _g(x: float) -> str:
    """Numbers for messages: 3 significant digits, 'nan'/'inf' spelled out."""
    if x is None:
        return "null"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    return f"{float(x):.3g}"


def _json_number(v):
    """Strict JSON: non-finite floats become null (the message says what happened)."""
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(v) else None
    if isinstance(v, np.integer):
        return int(v)
    return v
