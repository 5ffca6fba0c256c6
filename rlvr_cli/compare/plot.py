"""The comparison figure: aligned per-step panels, the final pass@k curve against the base, a legend.

Each variant has one colour. On per-step panels the line is the mean over the seeds that logged
that step and the band is min-max (or mean -+ std) across those seeds, after an optional centred
rolling mean over ``smooth`` steps per seed. KL spans orders of magnitude, so its panel smooths and
averages log10(KL): its line is the geometric mean over seeds (steps with KL <= 0 are not drawn).
Non-finite values are not drawn: the mean and band have a gap at steps where any seed logged one,
and an ``x`` at the top of the panel marks the first such step. Runs in progress are drawn up to
their last complete line. Drawn with the Agg canvas, never a GUI backend.
"""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.transforms import blended_transform_factory

from rlvr_cli.compare.run import Run
from rlvr_cli.compare.series import across_seeds, finite, rolling_mean
from rlvr_cli.compare.variants import Variant
from rlvr_cli.io import atomic_write_bytes, atomic_write_text
from rlvr_cli.metrics import label

STEP_PANELS = [
    # (title, [(metric, linestyle, legend name from rlvr_cli/metrics.py)], log y)
    (title, [(key, style, label(key)) for key, style in lines], log)
    for title, lines, log in [
        ("reward and accuracy", [("reward_mean", "-"), ("accuracy", "--")], False),
        ("KL to reference (nats/token)", [("kl_mean", "-"), ("kl_max", "--")], True),
        ("entropy (nats/token)", [("entropy", "-")], False),
        ("response length (tokens)", [("len_correct", "-"), ("len_incorrect", "--")], False),
        ("clip fraction", [("clip_low_frac", "-"), ("clip_high_frac", "--")], False),
        ("groups without signal", [("zero_std_frac", "-"), ("groups_dropped_frac", "--")], False),
    ]
]
REMEDY_PANELS = [
    # drawn only when some run logged them: the remedies' own statistics (docs/remedies.md)
    (title, [(key, style, label(key)) for key, style in lines], log)
    for title, lines, log in [
        ("remedy tokens (fraction of loss tokens)",
         [("top_entropy_kept_frac", "-"), ("cov_selected_frac", "--"), ("is_corrected_frac", ":")], False),
        ("sampler/trainer mismatch |log-ratio|", [("mismatch_abs_mean", "-"), ("mismatch_abs_max", "--")], True),
    ]
]
LENGTH_BIAS_PANELS = [
    # drawn only when some run logged them: who gets how much gradient per token (rlvr_cli/algo/length_bias.py)
    (title, [(key, style, label(key)) for key, style in lines], log)
    for title, lines, log in [
        ("per-token gradient weight on incorrect responses (share)",
         [("gw_incorrect_short_share", "-"), ("gw_incorrect_long_share", "--"), ("gw_incorrect_share", ":")], False),
        ("incorrect: corr(length, weight); truncation", [("gw_len_corr_incorrect", "-"), ("truncated_frac", "--")], False),
    ]
]
TOOLS_PANELS = [
    # drawn only when some run had tools in the loop (docs/tools.md): how often it calls, and what a call buys
    (title, [(key, style, label(key)) for key, style in lines], log)
    for title, lines, log in [
        ("tool calls per trajectory; failed share", [("tools/call_rate", "-"), ("tools/failure_rate", "--")], False),
        ("accuracy with and without a call", [("tools/acc_with_call", "-"), ("tools/acc_without_call", "--")], False),
    ]
]
STYLES = ("-", "--", ":", "-.")
BAND_ALPHA = 0.18


def reward_term_panels(variants: list[Variant]) -> list:
    """One panel of each reward term's mean (``rewards/<term>/mean``, before weighting) when some run logged
    more than one term, paired with the shaped reward so that the panels stay two to a row."""
    terms = sorted({k for v in variants for r in v.runs for k in r.metrics.columns
                    if k.startswith("rewards/") and k.endswith("/mean") and r.series(k) is not None})
    if len(terms) < 2:
        return []
    lines = [(k, STYLES[i % len(STYLES)], k[len("rewards/"):-len("/mean")]) for i, k in enumerate(terms)]
    return [("reward terms (mean, before weighting)", lines, False),
            ("reward: raw and shaped", [(k, st, label(k)) for k, st in (("reward_mean", "-"),
                                                                       ("reward_shaped_mean", "--"))], False)]


def make_figure(variants: list[Variant], smooth: int = 5, band: str = "minmax", against: dict | None = None) -> Figure:
    """Build the figure (not saved): 6 per-step panels (2 more when some run logged a remedy's statistics,
    2 more for the length-bias metrics, 2 for tools in the loop, 2 for reward terms when a run has several),
    the pass@k panel and a legend panel, and with
    two or more variants and ``against`` (:func:`rlvr_cli.compare.against.compare_to_control`) a forest
    plot of each arm's paired difference from the control."""
    logged = lambda metrics: any(r.series(k) is not None for v in variants for r in v.runs for k, _, _ in metrics)  # noqa: E731
    panels = STEP_PANELS + (REMEDY_PANELS if any(logged(m) for _, m, _ in REMEDY_PANELS) else [])
    panels += LENGTH_BIAS_PANELS if logged(LENGTH_BIAS_PANELS[0][1]) else []
    panels += TOOLS_PANELS if logged(TOOLS_PANELS[0][1]) else []
    panels += reward_term_panels(variants)
    forest = against is not None and len(variants) > 1
    rows = len(panels) // 2 + 1
    fig = Figure(figsize=(13, 3.75 * rows + (0.6 + 0.45 * len(variants) if forest else 0)), layout="constrained")
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(rows + forest, 2, height_ratios=[3.75] * rows + ([0.6 + 0.45 * len(variants)] if forest else []))
    colors = _colors(len(variants))
    first = None
    for i, (title, metrics, log) in enumerate(panels):
        ax = fig.add_subplot(grid[i // 2, i % 2], sharex=first)
        first = first or ax
        _step_panel(ax, variants, colors, title, metrics, log, smooth, band)
        if i == 0:
            _eval_pass1(ax, variants, colors)
    _passk_panel(fig.add_subplot(grid[rows - 1, 0]), variants, colors, band)
    _legend_panel(fig.add_subplot(grid[rows - 1, 1]), variants, colors, smooth, band)
    if forest:
        _forest_panel(fig.add_subplot(grid[rows, :]), variants, colors, against)
    return fig


def save_figure(fig: Figure, out_dir: Path, stem: str = "compare") -> list[Path]:
    """Write ``stem.png`` and ``stem.svg`` atomically; return their paths. Both are a function of the figure
    alone (no date in the SVG's metadata, element ids hashed with a fixed salt), so a re-derived comparison
    leaves its figures byte-identical unless a number in them changed."""
    png, svg = out_dir / f"{stem}.png", out_dir / f"{stem}.svg"
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    atomic_write_bytes(png, buf.getvalue())
    fig.set_layout_engine("none")  # keep the layout the PNG computed: the SVG then draws once, not twice
    text = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "rlvr"}):
        fig.savefig(text, format="svg", metadata={"Date": None})
    atomic_write_text(svg, text.getvalue())
    return [png, svg]


LOG_FLOOR = 1e-6
"""Log panels show values below this at the floor (round-off KL of a policy equal to its reference)."""


# --- panels ----------------------------------------------------------------------------------------
def _step_panel(ax, variants, colors, title, metrics, log, smooth, band) -> None:
    drawn = False
    for v, color in zip(variants, colors):
        for key, style, _ in metrics:
            per_seed = [_prepared(r, key, log, smooth) for r in v.runs]
            per_seed = [s for s in per_seed if s is not None and not s.empty]
            if not per_seed:
                continue
            agg = across_seeds(per_seed, band)
            if not np.isfinite(agg["mean"].to_numpy(dtype=float)).any():
                continue  # every value NaN or infinite (an all-NaN run): nothing to draw, not a broken axis
            if log:
                agg[["mean", "lo", "hi"]] = 10.0 ** agg[["mean", "lo", "hi"]]
            ax.plot(agg.index, agg["mean"], color=color, linestyle=style, linewidth=1.4)
            ax.fill_between(agg.index, agg["lo"], agg["hi"], color=color, alpha=BAND_ALPHA, linewidth=0)
            drawn = True
        _mark_nonfinite(ax, v.runs, [m[0] for m in metrics], color)
    if log and drawn:
        ax.set_yscale("log")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
    if len(metrics) > 1:
        ax.legend(
            handles=[Line2D([], [], color="0.3", linestyle=s, label=n) for _, s, n in metrics],
            fontsize=8,
            loc="best",
            framealpha=0.6,
        )
    if not drawn:
        ax.text(0.5, 0.5, "not logged by these runs", transform=ax.transAxes, ha="center", va="center", color="0.5")


def _prepared(run: Run, key: str, log: bool, smooth: int) -> pd.Series | None:
    """The run's series for plotting: the finite values (log10 of the positive ones on log panels:
    a quantity that spans orders of magnitude is smoothed in log space), smoothed, with +inf put back
    at steps that logged NaN/inf so that the mean over seeds shows a gap there."""
    s = run.series(key)
    if s is None:
        return None
    f = finite(s)
    if log:
        # values below LOG_FLOOR (KL ~1e-13 at step 1, when the policy is the reference) are drawn at
        # the floor, so that the axis shows the orders of magnitude that matter
        f = np.log10(f[f > 0].clip(lower=LOG_FLOOR))
    bad = run.nonfinite[key]
    diverged = pd.Series(np.inf, index=bad.index[bad.to_numpy()])
    return pd.concat([rolling_mean(f, smooth), diverged]).sort_index() if len(diverged) else rolling_mean(f, smooth)


def _mark_nonfinite(ax, runs: list[Run], keys: list[str], color) -> None:
    steps = [
        int(r.nonfinite[k][r.nonfinite[k]].index[0])
        for r in runs
        for k in keys
        if k in r.nonfinite.columns and r.nonfinite[k].any()
    ]
    if steps:
        trans = blended_transform_factory(ax.transData, ax.transAxes)
        ax.plot([min(steps)], [0.97], marker="x", markersize=9, color=color, transform=trans, clip_on=False)


def _eval_pass1(ax, variants, colors) -> None:
    """Held-out pass@1 at the eval points, as dots on the reward/accuracy panel."""
    for v, color in zip(variants, colors):
        per_seed = [
            pd.Series({st: e["pass_at_k"][1] for st, e in r.evals.items() if 1 in e["pass_at_k"]}, dtype=float)
            for r in v.runs
        ]
        per_seed = [s for s in per_seed if not s.empty]
        if per_seed:
            agg = across_seeds(per_seed, "minmax")
            ax.plot(agg.index, agg["mean"], color=color, linestyle=":", marker="o", markersize=3.5, linewidth=0.8)


def _passk_panel(ax, variants, colors, band) -> None:
    """Each variant's pass@k at its runs' last eval (mean and band over seeds) against step 0."""
    drawn = False
    ks: set[int] = set()
    bases: dict[str, list[pd.Series]] = {}
    for v, color in zip(variants, colors):
        finals = [_curve(r.evals[max(r.evals)]) for r in v.runs if r.evals and max(r.evals) > 0]
        if finals:
            agg = across_seeds(finals, band)
            ks.update(int(k) for k in agg.index)
            ax.plot(agg.index, agg["mean"], color=color, marker="o", markersize=3.5, linewidth=1.4)
            ax.fill_between(agg.index, agg["lo"], agg["hi"], color=color, alpha=BAND_ALPHA, linewidth=0)
            drawn = True
        for r in v.runs:
            if 0 in r.evals:
                bases.setdefault(_base_identity(r), []).append(_curve(r.evals[0]))
    for i, (ident, curves) in enumerate(bases.items()):
        agg = across_seeds(curves, "minmax")
        label = "base (step 0)" if len(bases) == 1 else f"base {textwrap.shorten(ident, 40)}"
        ax.plot(agg.index, agg["mean"], color="black", linestyle=["--", ":", "-."][i % 3], linewidth=1.2, label=label)
        ks.update(int(k) for k in agg.index)
        drawn = True
    ax.set_title("pass@k at the last eval vs the base model", fontsize=10)
    ax.set_xlabel("k")
    ax.set_ylabel("pass@k")
    ax.grid(alpha=0.3)
    if drawn:
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(ks), [str(k) for k in sorted(ks)])
        ax.minorticks_off()
        ax.legend(fontsize=8, loc="lower right")
    else:
        ax.text(0.5, 0.5, "no eval files", transform=ax.transAxes, ha="center", va="center", color="0.5")


def _curve(ev: dict) -> pd.Series:
    return pd.Series(ev["pass_at_k"], dtype=float).sort_index()


def _base_identity(run: Run) -> str:
    """Runs whose base evaluations can be pooled: same initial model and same eval settings."""
    model = run.recipe.get("model", {}) if isinstance(run.recipe.get("model"), dict) else {}
    ev = run.recipe.get("eval", {}) if isinstance(run.recipe.get("eval"), dict) else {}
    keys = ("n", "num_prompts", "temperature", "top_p", "max_new_tokens", "seed")
    return f"{model.get('name')} " + " ".join(f"{k}={ev.get(k)}" for k in keys)


def _legend_panel(ax, variants, colors, smooth, band) -> None:
    ax.axis("off")
    handles = []
    for v, color in zip(variants, colors):
        steps = sorted({r.last_step for r in v.runs})
        running = sum(r.status == "running" for r in v.runs)
        evals = sorted({max(r.evals) for r in v.runs if any(st > 0 for st in r.evals)})
        info = f"{len(v.runs)} seed{'s' if len(v.runs) > 1 else ''}, step {_span(steps)}"
        if evals:
            info += f", last eval {_span(evals)}"
        if running:
            info += f", {running} running"
        handles.append(Line2D([], [], color=color, linewidth=3, label=textwrap.fill(f"{v.label}  [{info}]", 70)))
    handles += [
        Line2D([], [], color="0.3", linestyle=":", marker="o", markersize=3.5, label="held-out pass@1 (eval files)"),
        Line2D([], [], color="0.3", linestyle="", marker="x", markersize=8, label="first non-finite value"),
    ]
    ax.legend(handles=handles, loc="upper left", fontsize=8, frameon=False)
    band_text = "min-max" if band == "minmax" else "mean -+ 1 std (ddof=1)"
    smooth_text = f"centred rolling mean over {smooth} steps" if smooth > 1 else "no smoothing"
    ax.text(
        0.0,
        0.02,
        f"lines: mean over seeds; bands: {band_text} across seeds; {smooth_text}",
        transform=ax.transAxes,
        fontsize=8,
        color="0.3",
        va="bottom",
    )


def _forest_panel(ax, variants, colors, against: dict) -> None:
    """One row per arm: the pass@1 difference from the control (dot) and its interval (bar), a lighter
    square for pass^k; a refused arm is a grey row saying "not paired" (its reason is in summary.md)."""
    arms = against["arms"]
    order = [(i, v) for i, v in enumerate(variants) if v.label in arms]
    hat_k = None
    for row, (i, v) in enumerate(order):
        a, y = arms[v.label], len(order) - 1 - row
        if a["refused"] is not None or a["pass@1"] is None:
            ax.text(0.5, y, "not paired (see summary.md)", color="grey", ha="center", va="center",
                    transform=blended_transform_factory(ax.transAxes, ax.transData), fontsize=8)
            continue
        d = a["pass@1"]
        if d["low"] is None:  # no test (an arm with one seed beside several): the point alone
            ax.plot([d["mean"]], [y], "o", color=colors[i])
            continue
        ax.errorbar([d["mean"]], [y], xerr=[[d["mean"] - d["low"]], [d["high"] - d["mean"]]], fmt="o",
                    color=colors[i], capsize=4, lw=2)
        if a["k"] and a["k"] > 1 and a["pass^k"] is not None and a["pass^k"]["low"] is not None:
            h, hat_k = a["pass^k"], a["k"]
            ax.errorbar([h["mean"]], [y - 0.25], xerr=[[h["mean"] - h["low"]], [h["high"] - h["mean"]]], fmt="s",
                        color=colors[i], alpha=0.4, capsize=2, lw=1, ms=4)
        ax.text(1.01, y, a["verdict"], transform=blended_transform_factory(ax.transAxes, ax.transData),
                va="center", fontsize=8)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(range(len(order)), [textwrap.shorten(v.label, 40) for _, v in reversed(order)], fontsize=8)
    ax.set_ylim(-0.8, len(order) - 0.4)
    seeds = " and seeds" if any(a.get("paired_seeds") for a in arms.values()) else ""
    ax.set_xlabel(f"pass@1 difference vs {textwrap.shorten(against['control'], 40)} "
                  f"({100 * against['confidence']:.4g}% simultaneous t CI, paired by prompt{seeds})"
                  + (f"; light squares: pass^{hat_k}" if hat_k else ""), fontsize=9)
    ax.set_title("against the control: paired difference (other - control)", fontsize=10)


def _span(values: list[int]) -> str:
    return str(values[0]) if len(values) == 1 else f"{values[0]}-{values[-1]}"


def _colors(n: int) -> list:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]
