"""The primary test of ``rlvr compare``: the paired difference of per-prompt mean scores, with prompts and
training seeds as crossed sources of variance; its t interval, p-value, and the smallest effect it detects.

Two arms are evaluated on the same P held-out prompts, each on S training seeds. With x[s, i] an arm's
per-prompt score (pass@1 = c/n over all n samples, or pass@k / pass^k) on seed s and prompt i, the
estimand is the mean difference D = mean(other) - mean(control). Its variance has a prompt part (shrinks
with P), a seed part (run-to-run variation of training: shrinks only with S) and a cell part (binomial
sampling and prompt x seed interaction: shrinks with P * S). Ignoring the seed part over-claims as soon as
runs vary: with one seed per arm (where it cannot be seen) a null comparison was called different in
15-83% of simulated draws at arm seed SDs 0.024-0.040 and 32-512 prompts (400 draws each, the model of
:mod:`.simulate`; docs/statistics.md); ignoring the prompt part wastes the
pairing.

**Paired seeds** (both arms trained on the same seeds; D[s, i] = other - control): the two-way ANOVA of
the S x P matrix of differences without replication (Searle, Casella & McCulloch 1992, "Variance
Components", ch. 4; the crossed random-effects SE of Miller 2024, arXiv:2411.00640 §2.3, with seeds as the
second clustering factor)::

    MS_p = S * sum_i (D_i. - D..)^2 / (P - 1)          E = s_e^2 + S s_a^2      (prompts)
    MS_s = P * sum_s (D_.s - D..)^2 / (S - 1)          E = s_e^2 + P s_b^2      (seeds)
    MS_e = sum (D_si - D_i. - D_.s + D..)^2 / ((P-1)(S-1))   E = s_e^2          (cells)
    Var(D..) = s_a^2 / P + s_b^2 / S + s_e^2 / (P S)

each component estimated by its ANOVA formula and truncated at 0 (for planning). The test itself uses
Var = max(MS_p + MS_s - MS_e, MS_s) / (P S) with S - 1 df (:func:`paired_variance`: the paired t over
seeds, widened by the prompt part when its estimate is positive).

**Unpaired seeds** (other seeds, S_c and S_o >= 2): Var(D..) = s_a^2 / P + s_u^2 / S_c + s_v^2 / S_o +
cell terms, from the per-prompt difference of seed means (MS_D, P - 1 df) and each arm's own seed mean
square minus its cell mean square (a Welch-type sum, one seed component per arm). An arm with one seed
beside one with several has no estimate of its run-to-run variance: no p-value, and the reason.

**One seed each**: Var(D) = MS_p / P, the prompt-clustered paired t (Miller 2024 §2.1). It is about these
two runs: run-to-run variance cannot be seen, and a verdict says the two checkpoints differ.

Degrees of freedom: S - 1 with paired seeds (above); elsewhere Satterthwaite's (1946, Biometrics Bull.
2:110) for Var = sum_j c_j MS_j: df = (sum_j c_j MS_j)^2 / sum_j (c_j MS_j)^2 / df_j. The interval is D +- t_{df, 1-a/2} SE and the p-value
two-sided Student t. The minimum detectable effect at power 1 - b is (t_{df, 1-a/2} + t_{df, 1-b}) SE
(the normal-approximation formula with t quantiles; Cohen 1988 §2.3), with a the per-arm level (Bonferroni
over the arms: Holm's first step, so the MDE is exact for the arm with the smallest p and conservative
for the rest). Frameworks differ: rliable (Agarwal et al. 2021) bootstraps over runs only; lm-eval-harness
and Miller's paper over questions only; this module keeps both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from rlvr_cli.errors import UserError

POWER = 0.8
"""Power at which the minimum detectable effect (MDE) is quoted."""
MAX_PLAN = 4096
"""Largest count of seeds or prompts the planner looks at (beyond it a target is reported as out of reach)."""


@dataclass(frozen=True)
class Term:
    """One part of Var(D) with the degrees of freedom of its estimate (for Satterthwaite's df)."""

    name: str
    var: float
    df: float


@dataclass(frozen=True)
class Components:
    """Variance components of the per-prompt difference, estimated from the data and truncated at 0.

    ``prompt``: s_a^2, the prompt main effect of the difference (consistent across seeds). Paired seeds:
    ``seed`` = s_b^2, run-to-run variance of the difference, and ``cell`` = s_e^2, one cell's residual
    (prompt x seed interaction and sampling noise). Unpaired seeds: ``seed`` and ``cell`` are (control,
    other) pairs, each arm's own. One seed: ``seed`` is None (not seen) and the cell part is inside
    ``prompt``. ``binomial`` is the part of each cell that is sampling noise at ``n`` samples per prompt
    (pass@1 only: the unbiased p(1-p)/(n-1), summed over both arms when paired; else None), so that a plan
    can change n."""

    design: str
    prompt: float
    seed: float | tuple[float, float] | None
    cell: float | tuple[float, float]
    binomial: float | tuple[float, float] | None
    n: int | None
    mean_squares: tuple[float, float, float] | None = None
    """Paired seeds: (MS_p, MS_s, MS_e) of the difference matrix, from which the test's SE and df come."""

    def terms(self, prompts: int, seeds: int | tuple[int, int], n: int | None = None) -> list[Term]:
        """Var(D) at ``prompts`` prompts, ``seeds`` training seeds per arm (one count, or (control, other))
        and ``n`` samples per prompt, as parts with the df their estimates would have there."""
        sc, so = (seeds, seeds) if isinstance(seeds, int) else seeds
        out = [Term("prompts", self.prompt / prompts, prompts - 1)]
        if self.design == "unpaired seeds":
            for j, (name, s) in enumerate((("control", sc), ("other", so))):
                out += [Term(f"seeds ({name})", self.seed[j] / s, s - 1),
                        Term(f"cells ({name})", self._cell(j, n) / (prompts * s), (prompts - 1) * (s - 1))]
        elif self.seed is not None:
            out += [Term("seeds", self.seed / sc, sc - 1),
                    Term("cells", self._cell(None, n) / (prompts * sc), (prompts - 1) * (sc - 1))]
        else:  # one seed: the cell part is sampling noise only (interaction is not separable from prompts)
            out.append(Term("cells", self._cell(None, n) / prompts, prompts - 1))
        return [t for t in out if t.var > 0]

    def variance(self, prompts: int, seeds: int | tuple[int, int], n: int | None = None) -> float:
        return sum(t.var for t in self.terms(prompts, seeds, n))

    def _cell(self, j: int | None, n: int | None) -> float:
        cell = self.cell if j is None else self.cell[j]
        if n is None or self.binomial is None or not self.n:
            return cell
        b = min(cell, self.binomial if j is None else self.binomial[j])
        return cell - b + b * self.n / n  # sampling variance is proportional to 1 / n


@dataclass(frozen=True)
class CrossedTest:
    """The primary test of one arm against the control on one per-prompt score."""

    mean: float
    """D = mean(other) - mean(control) over prompts and seeds."""
    se: float
    df: float
    p_value: float | None
    """Two-sided; None when the design cannot give one (``reason``)."""
    prompts: int
    seeds: tuple[int, int]
    """Training seeds of the control and of the other arm."""
    components: Components
    reason: str | None = None

    @property
    def design(self) -> str:
        """"paired seeds", "unpaired seeds" or "one seed": the variance formula used."""
        return self.components.design

    def interval(self, confidence: float) -> tuple[float, float]:
        """D +- t_{df, (1 + confidence)/2} SE (NaN bounds where there is no p-value)."""
        if self.p_value is None:
            return math.nan, math.nan
        h = _t(self.df, (1 + confidence) / 2) * self.se
        return self.mean - h, self.mean + h

    def mde(self, alpha: float, power: float = POWER) -> float | None:
        """Smallest |D| that a two-sided level-``alpha`` test detects with probability ``power``."""
        if self.p_value is None:
            return None
        return minimum_detectable(self.se, self.df, alpha, power)


def minimum_detectable(se: float, df: float, alpha: float, power: float = POWER) -> float:
    """MDE = (t_{df, 1 - alpha/2} + t_{df, power}) * se. Example: se 0.01, df = inf, alpha 0.05, power
    0.8: (1.960 + 0.842) * 0.01 = 0.0280."""
    if not (se >= 0 and 0 < alpha < 1 and 0 < power < 1):
        raise ValueError("need se >= 0, 0 < alpha < 1, 0 < power < 1")
    return (_t(df, 1 - alpha / 2) + _t(df, power)) * se


def _t(df: float, q: float) -> float:
    return float(stats.norm.ppf(q)) if not math.isfinite(df) else float(stats.t.ppf(q, df))


def satterthwaite(terms: list[Term]) -> tuple[float, float]:
    """(Var, df) of Var = sum_j v_j where v_j has df_j: df = Var^2 / sum_j v_j^2 / df_j (Satterthwaite
    1946). Example: parts 1.0 (df 4) and 1.0 (df 9): Var 2.0, df 4 / (1/4 + 1/9) = 11.08."""
    var = sum(t.var for t in terms)
    den = sum(t.var**2 / t.df for t in terms if t.df > 0)
    return var, (var**2 / den if den > 0 else math.inf)


# --- the designs ---------------------------------------------------------------------------------
def crossed_test(control, other, *, paired_seeds: bool, n: int | None = None) -> CrossedTest:
    """The primary test of ``other`` against ``control``: (S_c, P) and (S_o, P) per-prompt scores on the
    same prompts in the same order (:func:`rlvr_cli.compare.paired.pair_arms`). ``paired_seeds``: rows
    are the same training seeds in the same order. ``n``: samples per prompt when the scores are pass@1
    (c / n), so that a plan can rescale the sampling part of the cell variance."""
    a, b = _matrix(control, "control"), _matrix(other, "other")
    if a.shape[1] != b.shape[1]:
        raise UserError(f"control and other arm have {a.shape[1]} and {b.shape[1]} prompts: not paired")
    if a.shape[1] < 2:
        raise UserError("a paired test needs at least 2 prompts")
    if paired_seeds and a.shape[0] != b.shape[0]:
        raise ValueError("paired seeds need the same rows in both arms")
    binom = [_binomial(x, n) for x in (a, b)]
    if a.shape[0] == 1 and b.shape[0] == 1:
        d = b[0] - a[0]
        ms, samp = float(d.var(ddof=1)), min(float(d.var(ddof=1)), _sum(binom) or 0.0)
        comp = Components("one seed", ms - samp, None, samp, _sum(binom), n)
        return _finish(float(d.mean()), comp, a.shape[1], (1, 1))
    if paired_seeds:
        return _finish(float((b - a).mean()), _paired_components(b - a, _sum(binom), n), a.shape[1], a.shape[0])
    lone = [w for w, x in (("control", a), ("other", b)) if x.shape[0] == 1]
    if lone:
        why = (f"the {lone[0]} arm has one training seed and the other {max(a.shape[0], b.shape[0])}: its "
               "run-to-run variance is unknown (train it on the control's seeds, or on 2 or more)")
        comp = Components("unpaired seeds", 0.0, (0.0, 0.0), (0.0, 0.0), None, n)
        mean = float(b.mean() - a.mean())
        return CrossedTest(mean, math.nan, math.nan, None, a.shape[1], (a.shape[0], b.shape[0]), comp, why)
    comp = _unpaired_components(a, b, binom, n)
    return _finish(float(b.mean() - a.mean()), comp, a.shape[1], (a.shape[0], b.shape[0]))


def two_way(x: np.ndarray) -> tuple[float, float, float]:
    """(MS_prompts, MS_seeds, MS_cells) of an (S, P) matrix: the two-way ANOVA without replication.
    Example: [[1, 2, 3], [3, 4, 8]]: row means 2, 5; column means 2, 3, 5.5; MS_p = 2 * 6.5 / 2 = 6.5,
    MS_s = 3 * 4.5 / 1 = 13.5, MS_e = 3 / 2 = 1.5."""
    s, p = x.shape
    m = x.mean()
    row, col = x.mean(axis=1), x.mean(axis=0)
    ms_p = s * float(((col - m) ** 2).sum()) / (p - 1)
    ms_s = p * float(((row - m) ** 2).sum()) / (s - 1)
    ms_e = float(((x - row[:, None] - col[None, :] + m) ** 2).sum()) / ((p - 1) * (s - 1))
    return ms_p, ms_s, ms_e


def _paired_components(d: np.ndarray, binom: float | None, n: int | None) -> Components:
    s, p = d.shape
    ms_p, ms_s, ms_e = two_way(d)
    # E[MS_p] = s_e^2 + S s_a^2, E[MS_s] = s_e^2 + P s_b^2, E[MS_e] = s_e^2
    return Components("paired seeds", max(0.0, (ms_p - ms_e) / s), max(0.0, (ms_s - ms_e) / p), ms_e, binom, n,
                      (ms_p, ms_s, ms_e))


def paired_variance(ms_p: float, ms_s: float, ms_e: float, prompts: int, seeds: int) -> tuple[float, float]:
    """(Var(D..), df) of the paired-seeds design from its mean squares:

        Var = max(MS_p + MS_s - MS_e, MS_s) / (P S),     df = S - 1

    MS_s / (P S) is the variance of the mean of the S per-seed mean differences: with df S - 1 it is the
    paired t-test over seeds, exact when those means are normal, and it already carries the cell part
    (binomial sampling, prompt x seed). What it cannot see is the prompt part shared by all seeds (an effect
    that differs from prompt to prompt: s_a^2 / P, estimated by (MS_p - MS_e) / (P S)); the crossed estimate
    adds it back when it is positive. The df stays S - 1: Satterthwaite's df for the signed sum (MS_e enters
    with weight -1) is optimistic at few seeds and called one recipe different from itself in 9% of null
    draws at 2 seeds, 32 prompts and an arm seed SD of 0.044 (and truncating the seed component at 0, 13-20%
    at 2 seeds and 512 prompts); this form stayed at or below 5% in every simulated setting
    (tests/compare/test_compare_crossed.py, results/calibration).

    When every seed's mean difference is the same (MS_s = 0: it happens with discrete scores, pass^k on few
    prompts) the t over seeds has no spread to divide by, and the formula above gave SE 0 and p 0 although
    the per-prompt differences disagreed (results/real's pass^8 against the base: each of 2 seeds newly
    solved 2 of 32 prompts, not the same 2). There the cell part MS_e / (P S) stands in for the seed part;
    a general floor at MS_e is not used, because with S - 1 df it is far too conservative (it took the
    null rate to 0% and the power on the real lag-8 drop at 2 seeds from 20% to 0%, results/calibration).
    Example: MS_p 6.5, MS_s 13.5, MS_e 1.5, P 3, S 2: Var = max(18.5, 13.5) / 6 = 3.083, df 1."""
    crossed = ms_p + ms_s - ms_e
    floor = ms_s if ms_s > 0 else ms_e
    return max(crossed, floor) / (prompts * seeds), float(seeds - 1)


def _unpaired_components(a: np.ndarray, b: np.ndarray, binom: list, n: int | None) -> Components:
    p = a.shape[1]
    ms_d = float((b.mean(axis=0) - a.mean(axis=0)).var(ddof=1))
    seed, cell = [], []
    for x in (a, b):
        _, ms_s, ms_e = two_way(x)
        seed.append(max(0.0, (ms_s - ms_e) / p))
        cell.append(ms_e)
    # E[MS_D] = s_a^2 + cell_c / S_c + cell_o / S_o
    prompt = max(0.0, ms_d - cell[0] / a.shape[0] - cell[1] / b.shape[0])
    return Components("unpaired seeds", prompt, (seed[0], seed[1]), (cell[0], cell[1]),
                      None if binom[0] is None else (binom[0], binom[1]), n)


def _finish(mean: float, comp: Components, prompts: int, seeds) -> CrossedTest:
    if comp.mean_squares is not None:
        var, df = paired_variance(*comp.mean_squares, prompts, seeds)
    else:
        var, df = satterthwaite(comp.terms(prompts, seeds))
    if comp.design == "one seed":
        df = prompts - 1
    se = math.sqrt(var)
    if se == 0:  # every difference equal: no spread for a t statistic
        pv = 1.0 if mean == 0 else constant_difference_p(prompts, seeds if comp.design != "one seed" else None)
    else:
        pv = float(2 * (stats.norm.sf(abs(mean) / se) if not math.isfinite(df) else stats.t.sf(abs(mean) / se, df)))
    pair = (seeds, seeds) if isinstance(seeds, int) else tuple(seeds)
    return CrossedTest(mean, se, df, pv, prompts, pair, comp)


def constant_difference_p(prompts: int, seeds: int | tuple[int, int] | None) -> float:
    """Two-sided p when every per-prompt difference is the same nonzero number (SE 0, so no t): the exact
    sign test on the independent replicates the design has, all of one sign: 2 * 0.5^m, with m the prompts
    for one seed, else the fewest of prompts and each arm's seeds (a seed-level claim cannot be surer than
    its seed count allows). Example: 64 prompts, one seed: 2 * 0.5^64 = 1.08e-19; 32 prompts, 2 seeds: 0.5."""
    m = prompts if seeds is None else min(prompts, *((seeds, seeds) if isinstance(seeds, int) else seeds))
    return min(1.0, 2.0 * 0.5**m)


def _matrix(x, which: str) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    x = x[None, :] if x.ndim == 1 else x
    if x.ndim != 2 or x.size == 0:
        raise UserError(f"{which} arm: no per-prompt results")
    if not np.isfinite(x).all():
        s, i = np.argwhere(~np.isfinite(x))[0]
        raise UserError(f"{which} arm: per-prompt value at prompt index {i} (row {s}) is {x[s, i]}, not a number")
    return x


def _binomial(x: np.ndarray, n: int | None) -> float | None:
    """Sampling variance of one arm's cell at n: the mean over cells of p(1-p)/(n-1), unbiased for
    Var(c/n) = p(1-p)/n. None unless the scores are pass@1 with n >= 2."""
    if n is None or n < 2:
        return None
    return float((x * (1 - x)).mean() / (n - 1))


def _sum(binom: list) -> float | None:
    return None if binom[0] is None else binom[0] + binom[1]


def components_json(comp: Components) -> dict:
    """The components as summary.json holds them (pairs as [control, other] lists)."""
    pair = lambda x: list(x) if isinstance(x, tuple) else x  # noqa: E731
    return {"design": comp.design, "prompt": comp.prompt, "seed": pair(comp.seed), "cell": pair(comp.cell),
            "binomial": pair(comp.binomial), "n": comp.n}


# --- what more data would buy --------------------------------------------------------------------
@dataclass(frozen=True)
class Budget:
    prompts: int
    seeds: int
    n: int | None
    se: float
    df: float
    mde: float


def predicted(comp: Components, prompts: int, seeds: int, n: int | None, alpha: float,
              power: float = POWER) -> Budget:
    """The SE, df and MDE these components give at another budget (``seeds`` per arm). Paired seeds: the
    test's own :func:`paired_variance` on the mean squares expected there (E[MS_p] = s_e^2 + S s_a^2,
    E[MS_s] = s_e^2 + P s_b^2, E[MS_e] = s_e^2), so the plan and the test agree."""
    if comp.design == "paired seeds" and seeds >= 2 and prompts >= 2:
        e = comp._cell(None, n)
        var, df = paired_variance(e + seeds * comp.prompt, e + prompts * comp.seed, e, prompts, seeds)
        se = math.sqrt(var)
        return Budget(prompts, seeds, n, se, df, minimum_detectable(se, df, alpha, power))
    var, df = satterthwaite(comp.terms(prompts, seeds, n))
    if comp.design == "one seed":
        df = prompts - 1
    se = math.sqrt(var)
    return Budget(prompts, seeds, n, se, df, minimum_detectable(se, df, alpha, power))


def seeds_for(comp: Components, target: float, prompts: int, n: int | None, alpha: float,
              start: int = 2) -> int | None:
    """The fewest seeds per arm (>= ``start``) whose MDE is at most ``target`` at these prompts and n;
    None when no count up to MAX_PLAN reaches it (the prompt part alone is above it) or the seed part is
    unknown (one seed)."""
    if comp.seed is None:
        return None
    for s in _grid(start):
        if predicted(comp, prompts, s, n, alpha).mde <= target:
            return s
    return None


def prompts_for(comp: Components, target: float, seeds: int, n: int | None, alpha: float,
                start: int = 2) -> int | None:
    """The fewest prompts (>= ``start``) whose MDE is at most ``target`` at these seeds and n; None when
    no count up to MAX_PLAN reaches it (the seed part alone is above it)."""
    for p in _grid(start):
        if predicted(comp, p, seeds, n, alpha).mde <= target:
            return p
    return None


def _grid(start: int):
    """start, start+1, ... up to 64, then about 5% steps up to MAX_PLAN (a search, not a table)."""
    x = max(1, start)
    while x <= MAX_PLAN:
        yield x
        x = x + 1 if x < 64 else int(math.ceil(x * 1.05))
