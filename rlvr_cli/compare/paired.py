"""Paired comparisons of two arms on the same held-out prompts: difference, bootstrap CI, McNemar, verdict.

Every run is evaluated on the same prompts with the same keyed sampling seed (``evaluation/core.py``),
so the difficulty of a prompt, the largest source of variance in a pass@1, is shared by both arms and
cancels in the per-prompt difference. A paired test on those differences is far more sensitive than
mean ± std of final numbers over three training seeds, and it is what a careful comparison reports.

- :func:`arm_from_records`: one arm's per-prompt results at one eval step (from its eval records,
  one per training seed), checked; :func:`per_prompt_scores`: pass@k or pass^k per prompt from them.
- :func:`pair_arms`: the two arms aligned by prompt id, and by training seed where both have the same
  seeds; refuses (``UserError`` naming what differs) arms evaluated on different prompts or n.
- :func:`paired_difference`: mean per-prompt difference (other - control) with a seeded percentile
  bootstrap CI over prompts (and over seeds where there are several).
- :func:`mcnemar_exact`: exact two-sided McNemar p-value on per-prompt binary correctness (greedy or
  majority vote); :func:`paired_mcnemar` applies it to arms with seeds.
- :func:`holm`: Holm's step-down adjustment of the p-values of several arms against one control.
- :func:`verdict`: "better" / "worse" / "not distinguishable at this budget" from the primary test of
  :mod:`.crossed` (rule in its docstring); :func:`legacy_verdict` is the rule it replaced (bootstrap
  interval AND McNemar), kept for the calibration study; :func:`seed_consistency` counts the seeds that
  lean each way.

Pure functions on arrays and plain dicts: no file is read here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rlvr_cli.algo.passk import pass_at_k, pass_hat_k
from rlvr_cli.compare.crossed import CrossedTest
from rlvr_cli.errors import UserError

N_RESAMPLES = 10_000
"""Bootstrap resamples. Percentile bounds are tail quantiles and need thousands of resamples to settle;
with 10,000 they move by less than a tenth of the interval's width from one bootstrap seed to another
(checked in tests/compare/test_compare_paired.py)."""
BOOTSTRAP_SEED = 0
"""Seed of the bootstrap's random stream: the same inputs give the same interval."""
ALPHA = 0.05
"""Family-wise error rate of a verdict (Holm-adjusted p of the primary test below it; 1 - ALPHA/m intervals)."""
BATCH = 500
"""Resamples drawn at once (memory only: the draws, and so the interval, do not depend on it)."""
UNDECIDED = "not distinguishable at this budget"


@dataclass(frozen=True)
class ArmEval:
    """One arm's per-prompt results at one eval step: row s is training seed ``seeds[s]``."""

    name: str
    seeds: tuple[int | None, ...]
    prompt_ids: tuple[str, ...]
    n: int
    correct: np.ndarray
    """(seeds, prompts) int: c, the correct samples of n per prompt."""
    binary: np.ndarray | None
    """(seeds, prompts) bool: per-prompt greedy or majority correctness; None when a record lacks it."""


@dataclass(frozen=True)
class Pairing:
    """Two arms aligned column by column on the same prompts (the control's order)."""

    control: ArmEval
    other: ArmEval
    paired_seeds: bool
    """Rows are the same training seeds in the same order (both arms have exactly the same seeds)."""


@dataclass(frozen=True)
class Difference:
    """Mean per-prompt difference other - control with its bootstrap interval."""

    mean: float
    low: float
    high: float
    confidence: float
    n_resamples: int
    seed: int
    prompts: int
    seeds: tuple[int, int]
    """Rows (training seeds) of the control and the other arm."""
    paired_seeds: bool
    resampled: str
    """What the bootstrap resampled: "prompts", or "prompts and seeds"."""


@dataclass(frozen=True)
class McNemar:
    """Exact McNemar test on per-prompt binary correctness (counts summed over seeds)."""

    only_control: int
    """Prompts the control gets right and the other arm wrong (b)."""
    only_other: int
    """Prompts the other arm gets right and the control wrong (c)."""
    p_value: float
    per_seed: tuple[float, ...]
    """p of each paired seed (one entry without seeds); ``p_value`` is their maximum."""


# --- one arm -------------------------------------------------------------------------------------
def arm_from_records(name: str, seeds: Sequence[int | None], records: Sequence[dict],
                     binary_key: str = "per_prompt_majority") -> ArmEval:
    """An arm from its eval records at one step (one per training seed, each a ``step_N.json`` object).

    Reads ``n``, ``per_prompt`` [{"id", "correct"}] and ``binary_key`` (``per_prompt_majority`` or
    ``per_prompt_greedy``: a list of bools in ``per_prompt``'s order). Raises ``UserError`` naming the
    arm, the seed and the field for: no records, a record without per-prompt results, a count that is
    not an integer in [0, n] (NaN included), or seeds evaluated on different prompts or n. A prompt
    listed twice (a dataset with a repeated row) is two entries, paired by occurrence
    (:func:`occurrence_keys`). ``binary`` is None when any record lacks ``binary_key`` (records written before it).
    """
    if len(seeds) != len(records):
        raise ValueError("one seed per record")
    if not records:
        raise UserError(f"arm {name}: no eval records with per-prompt results: nothing to pair")
    rows, flags, ids0, n0 = [], [], None, None
    for s, rec in zip(seeds, records):
        where = f"arm {name} (seed {s})"
        n = rec.get("n") if isinstance(rec, dict) else None
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise UserError(f"{where}: eval record n = {n!r}, expected a positive integer")
        pp = rec.get("per_prompt")
        if not isinstance(pp, list) or not pp:
            raise UserError(f"{where}: eval record has no per_prompt list "
                            "(written before per-prompt results were kept)")
        ids, counts = [], []
        for i, e in enumerate(pp):
            pid = e.get("id") if isinstance(e, dict) else None
            c = e.get("correct") if isinstance(e, dict) else None
            if pid is None:
                raise UserError(f"{where}: per_prompt[{i}] has no id")
            if isinstance(c, bool) or not isinstance(c, (int, float)) or not _finite(c) or c != int(c) \
                    or not 0 <= c <= n:
                raise UserError(f"{where}: per_prompt[{i}] ({pid!r}): correct = {c!r}, expected an integer 0..{n}")
            ids.append(str(pid))
            counts.append(int(c))
        ids = occurrence_keys(ids)
        if ids0 is None:
            ids0, n0 = ids, n
        else:
            _same_prompts(f"arm {name} seed {seeds[0]}", ids0, n0, f"seed {s}", ids, n)
        order = {p: j for j, p in enumerate(ids)}
        rows.append([counts[order[p]] for p in ids0])
        b = rec.get(binary_key)
        if b is None:  # not computed (greedy off) or a record written before it was kept
            flags = None
        elif not (isinstance(b, list) and len(b) == len(ids) and all(isinstance(x, bool) for x in b)):
            raise UserError(f"{where}: {binary_key} is not a list of {len(ids)} true/false values")
        elif flags is not None:
            flags.append([b[order[p]] for p in ids0])
    return ArmEval(name, tuple(seeds), tuple(ids0), n0, np.asarray(rows, dtype=np.int64),
                   None if flags is None else np.asarray(flags, dtype=bool))


def occurrence_keys(ids: Sequence[str]) -> list[str]:
    """``ids`` with the k-th repeat of an id (k >= 2) keyed ``id#k``: a held-out set that lists one prompt
    twice (a dataset with a repeated row; prompt ids are content digests) was evaluated twice, with
    independent samples, in every arm, so its k-th occurrences pair with each other. ["a", "b", "a"] ->
    ["a", "b", "a#2"]."""
    seen: dict[str, int] = {}
    out = []
    for pid in ids:
        seen[pid] = seen.get(pid, 0) + 1
        out.append(pid if seen[pid] == 1 else f"{pid}#{seen[pid]}")
    return out


def _finite(x: int | float) -> bool:
    """math.isfinite without its OverflowError on an int beyond float's range (such an int is finite)."""
    return isinstance(x, int) or math.isfinite(x)


def per_prompt_scores(arm: ArmEval, metric: str = "pass@k", k: int = 1) -> np.ndarray:
    """(seeds, prompts) float: pass@k (``metric="pass@k"``) or pass^k (``"pass^k"``) of every prompt
    (:mod:`rlvr_cli.algo.passk`; k = 1 is the accuracy c / n)."""
    fn = {"pass@k": pass_at_k, "pass^k": pass_hat_k}.get(metric)
    if fn is None:
        raise ValueError(f"metric must be pass@k or pass^k, got {metric!r}")
    if not 1 <= k <= arm.n:
        raise UserError(f"arm {arm.name}: {metric.replace('k', str(k))} needs k <= n = {arm.n}")
    table = np.array([fn(arm.n, c, k) for c in range(arm.n + 1)])
    return table[arm.correct]


# --- two arms ------------------------------------------------------------------------------------
def _same_prompts(a: str, ids_a: Sequence[str], n_a: int, b: str, ids_b: Sequence[str], n_b: int) -> None:
    if n_a != n_b:
        raise UserError(f"{a} and {b} were evaluated with different n ({n_a} vs {n_b} samples per prompt): "
                        "their per-prompt results cannot be paired")
    set_a, set_b = set(ids_a), set(ids_b)
    only_a = [p for p in ids_a if p not in set_b]
    only_b = [p for p in ids_b if p not in set_a]
    if only_a or only_b:
        parts = [f"{len(x)} only in {who} (first {x[0]!r})" for who, x in ((a, only_a), (b, only_b)) if x]
        raise UserError(f"{a} and {b} were evaluated on different prompts: " + ", ".join(parts))


def pair_arms(control: ArmEval, other: ArmEval) -> Pairing:
    """Align ``other`` on ``control``'s prompts (by id) and, where both have exactly the same known
    training seeds, on its seeds (rows sorted by seed in both). Otherwise each arm keeps its rows and
    the comparison averages over seeds within each arm (still paired by prompt).

    Raises ``UserError`` when the arms were evaluated on different prompts or with different n,
    naming the arms and the first prompt in one and not the other.
    """
    _same_prompts(f"arm {control.name}", control.prompt_ids, control.n, f"arm {other.name}", other.prompt_ids, other.n)
    where = {p: j for j, p in enumerate(other.prompt_ids)}
    cols = [where[p] for p in control.prompt_ids]
    other = _take(other, list(range(len(other.seeds))), cols)
    known = None not in control.seeds and None not in other.seeds
    paired = known and len(set(control.seeds)) == len(control.seeds) and sorted(control.seeds) == sorted(other.seeds)
    if paired:
        control = _take(control, sorted(range(len(control.seeds)), key=lambda i: control.seeds[i]), None)
        other = _take(other, sorted(range(len(other.seeds)), key=lambda i: other.seeds[i]), None)
    return Pairing(control, other, paired)


def _take(arm: ArmEval, rows: list[int], cols: list[int] | None) -> ArmEval:
    c = arm.correct[rows] if cols is None else arm.correct[rows][:, cols]
    b = None if arm.binary is None else (arm.binary[rows] if cols is None else arm.binary[rows][:, cols])
    ids = arm.prompt_ids if cols is None else tuple(arm.prompt_ids[j] for j in cols)
    return ArmEval(arm.name, tuple(arm.seeds[i] for i in rows), ids, arm.n, c, b)


# --- the difference and its interval ---------------------------------------------------------------
def paired_difference(control: np.ndarray, other: np.ndarray, *, paired_seeds: bool = False,
                      n_resamples: int = N_RESAMPLES, seed: int = BOOTSTRAP_SEED,
                      confidence: float = 1 - ALPHA) -> Difference:
    """Mean over prompts (and seeds) of other - control, with a percentile bootstrap interval.

    ``control`` and ``other`` are (seeds, prompts) or (prompts,) per-prompt scores on the same prompts
    in the same order (:func:`pair_arms`, :func:`per_prompt_scores`). The statistic is

        D = mean_s mean_i other[s, i] - mean_s mean_i control[s, i]

    (with ``paired_seeds`` the rows are the same training seeds, and D = mean_{s,i} (other - control)).
    Each of ``n_resamples`` resamples draws P prompt indices with replacement, shared by both arms
    (the pairing), and, for an arm with two or more rows, its seed rows with replacement (the same
    draw for both arms when ``paired_seeds``), so seed-to-seed variation is in the interval wherever
    there are seeds to see it. The interval is the (1 - confidence)/2 and (1 + confidence)/2 quantiles
    (numpy's linear interpolation) of the resampled D (Efron's percentile interval). The draws come
    from ``numpy.random.default_rng(seed)``: prompt indices first, as ``integers(0, P, (batch, P))``,
    which with one row per arm is the draw and the interval of ``scipy.stats.bootstrap(...,
    paired=True, method="percentile")`` with the same generator.
    """
    a, b = _rows(control, "control"), _rows(other, "other")
    if a.shape[1] != b.shape[1]:
        raise UserError(f"control and other arm have {a.shape[1]} and {b.shape[1]} prompts: not paired")
    if a.shape[1] == 0:
        raise UserError("no prompts to compare")
    if paired_seeds and a.shape[0] != b.shape[0]:
        raise ValueError("paired seeds need the same rows in both arms")
    if not 0 < confidence < 1 or n_resamples < 1:
        raise ValueError("need 0 < confidence < 1 and n_resamples >= 1")
    p = a.shape[1]
    resample_rows = max(a.shape[0], b.shape[0]) >= 2
    rng = np.random.default_rng(seed)
    stats = []
    for start in range(0, n_resamples, BATCH):
        m = min(BATCH, n_resamples - start)
        cols = rng.integers(0, p, (m, p))
        ra = rb = None
        if resample_rows:
            ra = rng.integers(0, a.shape[0], (m, a.shape[0]))
            rb = ra if paired_seeds else rng.integers(0, b.shape[0], (m, b.shape[0]))
        stats.append(_resampled_mean(b, cols, rb) - _resampled_mean(a, cols, ra))
    d = np.concatenate(stats)
    q = (1 - confidence) / 2
    low, high = np.percentile(d, [100 * q, 100 * (1 - q)])
    return Difference(
        mean=float(b.mean() - a.mean()), low=float(low), high=float(high), confidence=confidence,
        n_resamples=n_resamples, seed=seed, prompts=p, seeds=(a.shape[0], b.shape[0]), paired_seeds=paired_seeds,
        resampled="prompts and seeds" if resample_rows else "prompts",
    )


def _rows(x, which: str) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    x = x[None, :] if x.ndim == 1 else x
    if x.ndim != 2 or x.shape[0] == 0:
        raise UserError(f"{which} arm: no per-prompt results")
    bad = ~np.isfinite(x)
    if bad.any():
        s, i = np.argwhere(bad)[0]
        raise UserError(f"{which} arm: per-prompt value at prompt index {i} (row {s}) is {x[s, i]}, not a number")
    return x


def _resampled_mean(x: np.ndarray, cols: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
    """Mean of x over resampled prompts (``cols``, (m, P)) and rows (``rows``, (m, S) or None: all rows)."""
    by_row = x[:, cols].mean(axis=2).T  # (m, S): each row's mean over the resampled prompts
    if rows is None:
        return by_row.mean(axis=1)
    return np.take_along_axis(by_row, rows, axis=1).mean(axis=1)


# --- McNemar ---------------------------------------------------------------------------------------
def mcnemar_exact(control, other) -> McNemar:
    """Exact two-sided McNemar test on paired binary outcomes (one per prompt, 1 = correct).

    Only discordant prompts carry information: b = right only under the control, c = right only under
    the other arm. Under "no difference" each discordant prompt is a fair coin, b ~ Binomial(b + c, 1/2),
    and (McNemar 1947; the exact form, e.g. Fagerland, Lydersen & Laake 2013, BMC Med. Res. Methodol. 13:91)

        p = min(1, 2 * sum_{i=0}^{min(b, c)} C(b + c, i) / 2^(b + c)),   p = 1 when b + c = 0,

    which is ``scipy.stats.binomtest(b, b + c, 0.5).pvalue`` (computed here in exact integers).
    """
    x, y = _binary(control, "control"), _binary(other, "other")
    if x.shape != y.shape:
        raise UserError(f"control and other arm have {x.size} and {y.size} prompts: not paired")
    b, c = int(np.sum(x & ~y)), int(np.sum(~x & y))
    return McNemar(b, c, _mcnemar_p(b, c), (_mcnemar_p(b, c),))


def _mcnemar_p(b: int, c: int) -> float:
    m = b + c
    if m == 0:
        return 1.0
    tail = sum(math.comb(m, i) for i in range(min(b, c) + 1))
    return min(1.0, 2 * tail / 2**m)


def _binary(x, which: str) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != 1 or a.size == 0:
        raise UserError(f"{which} arm: expected one correct/incorrect value per prompt")
    if a.dtype != bool:
        f = a.astype(float)
        if not np.all(np.isin(f, (0.0, 1.0))):
            raise UserError(f"{which} arm: per-prompt correctness must be 0/1 (found {f[~np.isin(f, (0.0, 1.0))][0]})")
        a = f.astype(bool)
    return a


def paired_mcnemar(pairing: Pairing) -> McNemar | None:
    """McNemar on the pairing's binary correctness (None when either arm has none, or when the arms
    have several unpaired seeds: there is then no one pair of outcomes per prompt).

    One row each: :func:`mcnemar_exact`. Paired seeds: one test per seed, and the reported p is the
    largest of them, with b and c summed; the arms are declared different only when every seed's test
    is (an intersection-union test, level alpha without correction), and the direction is only
    trusted when every seed leans the same way (otherwise p is reported as 1).
    """
    a, b = pairing.control.binary, pairing.other.binary
    if a is None or b is None:
        return None
    if a.shape[0] == 1 and b.shape[0] == 1:
        return mcnemar_exact(a[0], b[0])
    if not pairing.paired_seeds:
        return None
    tests = [mcnemar_exact(x, y) for x, y in zip(a, b)]
    lean = {np.sign(t.only_other - t.only_control) for t in tests}
    p = max(t.p_value for t in tests) if len(lean) == 1 else 1.0
    return McNemar(sum(t.only_control for t in tests), sum(t.only_other for t in tests), p,
                   tuple(t.p_value for t in tests))


# --- several arms ----------------------------------------------------------------------------------
def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment (Holm 1979, Scand. J. Statist. 6:65) of m p-values (None stays None
    and is not counted): sort ascending, p_(i) -> max_{j <= i} min(1, (m - j + 1) p_(j)). Rejecting
    where the adjusted p < alpha keeps the family-wise error at alpha over all m arms, and is never
    less powerful than Bonferroni (m p). Example: (0.01, 0.04, 0.03, 0.005) -> (0.03, 0.06, 0.06, 0.02).
    """
    idx = [i for i, p in enumerate(p_values) if p is not None]
    for i in idx:
        if not 0 <= p_values[i] <= 1:
            raise UserError(f"p-value {p_values[i]!r} at position {i} is not in [0, 1]")
    order = sorted(idx, key=lambda i: p_values[i])
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * p_values[i]))
        out[i] = running
    return out


def verdict(test: CrossedTest, p_adjusted: float | None, alpha: float = ALPHA) -> str:
    """One word for an arm against the control: "better", "worse" or "not distinguishable at this budget".

    Rule: the primary test (:func:`rlvr_cli.compare.crossed.crossed_test`, the paired difference of
    per-prompt pass@1 with prompts and training seeds as crossed variance components) rejects "no
    difference" at ``alpha`` after Holm's adjustment over the arms (``p_adjusted``), and the sign of
    D = other - control says which way. No test (one arm with a single seed beside several: no p) is
    never a verdict. Holm is a step-down procedure: past the arm with the smallest p it can reject where
    the Bonferroni-wide display interval (1 - alpha/m) still touches 0. "At this budget": an effect
    below the comparison's minimum detectable effect (its ``mde``) is not shown to be absent.
    """
    if test.p_value is None or p_adjusted is None or not p_adjusted < alpha:
        return UNDECIDED
    return "better" if test.mean > 0 else "worse" if test.mean < 0 else UNDECIDED


def legacy_verdict(diff: Difference, test: McNemar | None = None, p_adjusted: float | None = None,
                   alpha: float = ALPHA) -> str:
    """The rule before issue 47, kept so that the calibration study (results/calibration) can measure it
    beside :func:`verdict`, and summary.json can show what a verdict used to be.

    "better" when the bootstrap interval of D lies above 0 and, when a McNemar test is given, its
    (Holm-adjusted) p < ``alpha`` with more prompts right only under the other arm; "worse" the mirror.
    With paired seeds the McNemar p is the largest per-seed p (:func:`paired_mcnemar`), so adding seeds
    lowers its power, and a 16-sample majority seldom flips: the rule is blind to effects its own
    interval shows (the calibration study measures by how much).
    """
    p = p_adjusted if p_adjusted is not None else (test.p_value if test is not None else None)
    if diff.low > 0 and (test is None or (p < alpha and test.only_other > test.only_control)):
        return "better"
    if diff.high < 0 and (test is None or (p < alpha and test.only_control > test.only_other)):
        return "worse"
    return UNDECIDED


def seed_consistency(control: np.ndarray, other: np.ndarray) -> dict | None:
    """How many paired seeds lean each way: per seed, the mean over prompts of other - control.
    ``control`` and ``other`` are (S, P) with the same seeds in the same rows (S >= 2); None otherwise.
    {"seeds": S, "higher": count > 0, "lower": count < 0, "per_seed": [mean difference per seed]}.
    Descriptive: the primary test already carries the seed variance; this says whether the sign replicates."""
    a, b = np.asarray(control, dtype=float), np.asarray(other, dtype=float)
    if a.ndim != 2 or a.shape != b.shape or a.shape[0] < 2:
        return None
    per = (b - a).mean(axis=1)
    return {"seeds": int(a.shape[0]), "higher": int((per > 0).sum()), "lower": int((per < 0).sum()),
            "per_seed": [float(x) for x in per]}
