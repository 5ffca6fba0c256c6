"""pass@k against k (log2 axis) for the base model and each checkpoint, on one figure.

The plot behind "does RL widen or narrow the reasoning boundary" (Yue et al. 2025 vs ProRL): a
checkpoint above the base at k = 1 but below it at large k has sharpened what the base already
sampled rather than reached new answers. The figure shows the curves; it decides neither claim.
Drawn with the Agg canvas, never a GUI backend.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, NullLocator


def curve_label(record: dict) -> str:
    step = record.get("step")
    name = "base (step 0)" if step == 0 else (f"step {step}" if step is not None else str(record.get("model")))
    return name + (f" [{record['label']}]" if record.get("label") else "")


def pass_at_k_figure(records: list[dict], title: str) -> Figure:
    """One line per record: pass@k at each k it has; the base (step 0) dashed black, later steps by colour."""
    fig = Figure(figsize=(6.4, 4.4), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    later = [r for r in records if r.get("step") != 0]
    viridis = colormaps["viridis"]
    shade = {id(r): viridis(0.15 + 0.7 * i / max(1, len(later) - 1)) for i, r in enumerate(later)}
    ks: set[int] = set()
    for r in records:
        pts = sorted((int(k), v) for k, v in r["pass_at_k"].items())
        ks.update(k for k, _ in pts)
        base = r.get("step") == 0
        ax.plot(
            [k for k, _ in pts],
            [v for _, v in pts],
            linestyle="--" if base else "-",
            color="black" if base else shade[id(r)],
            marker="o",
            markersize=3.5,
            label=curve_label(r),
        )
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sorted(ks)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(k) for k in sorted(ks)])
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("k (samples per prompt, log scale)")
    ax.set_ylabel("pass@k (unbiased)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return fig


def save_pass_at_k(records: list[dict], out_dir: Path, title: str, stem: str = "pass_at_k") -> list[Path]:
    """Write ``stem.png`` and ``stem.svg`` into ``out_dir`` atomically; return their paths."""
    from rlvr_cli.compare.plot import save_figure

    return save_figure(pass_at_k_figure(records, title), Path(out_dir), stem)
