"""Charts of estimates (matplotlib, imported lazily; rendered off-screen, no display needed)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

__all__ = ["plot_breakdown"]


def _label(name: str, width: int = 34) -> str:
    if len(name) <= width:
        return name
    head = (width - 3) // 2
    return name[:head] + "..." + name[-(width - 3 - head):]


def plot_breakdown(estimate_or_estimates: Any, path: str | os.PathLike, top: int = 15) -> str:
    """Write a per-layer breakdown chart (PNG) and return its path.

    One `Estimate`: horizontal bars of the ``top`` executed layers by predicted time, colored by layer
    type (after fusion), titled with network, platform and total. A sequence of estimates (e.g. one
    network on several platforms): one such panel per estimate, side by side, with one shared type legend.
    The parent folder of ``path`` is created if needed.
    """
    import matplotlib

    # Agg, without touching pyplot's global backend (a notebook user's inline backend stays as it is):
    # a bare Figure renders through matplotlib's Agg canvas when saved as PNG
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    ests: Sequence[Any]
    if isinstance(estimate_or_estimates, (list, tuple)):
        ests = list(estimate_or_estimates)
    else:
        ests = [estimate_or_estimates]
    if not ests:
        raise ValueError("plot_breakdown: no estimates given")
    if top < 1:
        raise ValueError(f"plot_breakdown: top must be >= 1, got {top}")

    panels = []
    for est in ests:
        rows = [r for r in est.table() if r["time_ms"] > 0]
        rows.sort(key=lambda r: -r["time_ms"])
        panels.append((est, rows[:top], len(rows)))
    types = sorted({r["type"] for _, rows, _ in panels for r in rows})
    cmap = matplotlib.colormaps["tab20" if len(types) > 10 else "tab10"]
    color = {t: cmap(i % cmap.N) for i, t in enumerate(types)}

    n = len(panels)
    height = 1.2 + 0.32 * max(len(rows) for _, rows, _ in panels)
    fig = Figure(figsize=(6.2 * n + 0.4, max(3.0, height) + 0.8), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, n, squeeze=False)[0]
    for ax, (est, rows, n_exec) in zip(axes, panels):
        total = est.total_ms
        y = list(range(len(rows)))
        times = [r["time_ms"] for r in rows]
        ax.barh(y, times, color=[color[r["type"]] for r in rows])
        ax.set_yticks(y, [_label(r["name"]) for r in rows], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("predicted time (ms)")
        shown = sum(times)
        share = 100 * shown / total if total > 0 else 0.0
        ax.set_title(f"{est.network.name} on {est.platform.name}: {total:.3f} ms\n"
                     f"top {len(rows)} of {n_exec} executed layers ({share:.0f}% of total)", fontsize=10)
        ax.grid(axis="x", alpha=0.3)
        for yi, t in zip(y, times):
            ax.text(t, yi, f" {t:.3f}", va="center", fontsize=7)
        ax.margins(x=0.18)
    fig.legend(handles=[Patch(color=color[t], label=t) for t in types], loc="outside lower center",
               ncols=min(len(types), 6), fontsize=8, title="layer type (after fusion)", title_fontsize=8)

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120, format="png")
    return str(out)
