"""Charts of estimates (matplotlib, imported lazily; rendered off-screen, no display needed)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

from .errors import AnnetteError, check_writable

__all__ = ["PLOT_FORMATS", "plot_format", "plot_breakdown", "plot_roofline", "plot_pred_vs_measured", "plot_pareto"]

#: the file formats charts are written in, named by the file's extension
PLOT_FORMATS = ("png", "pdf", "svg")


def plot_format(path: str | os.PathLike) -> str:
    """The chart format ``path``'s extension names (``png``, ``pdf``, ``svg``); any other raises `AnnetteError`."""
    ext = Path(path).suffix.lower().lstrip(".")
    if ext not in PLOT_FORMATS:
        got = f"'.{ext}'" if ext else "(no extension)"
        raise AnnetteError(f"{os.fspath(path)}: unknown chart format {got}; name the file .png, .pdf or .svg")
    return ext


def _label(name: str, width: int = 34) -> str:
    if len(name) <= width:
        return name
    head = (width - 3) // 2
    return name[:head] + "..." + name[-(width - 3 - head):]


def plot_breakdown(estimate_or_estimates: Any, path: str | os.PathLike, top: int = 15) -> str:
    """Write a per-layer breakdown chart (PNG, PDF or SVG by ``path``'s extension) and return its path.

    One `Estimate`: horizontal bars of the ``top`` executed layers by predicted time, colored by layer
    type (after fusion), titled with network, platform and ``latency_ms`` with its definition on the platform
    (the number the CLI prints), and the share of the layer sum the bars show. A sequence of estimates (e.g. one
    network on several platforms): one such panel per estimate, side by side, with one shared type legend.
    The folder of ``path`` must exist.
    """
    _check_target(path)
    return _save(_breakdown_figure(estimate_or_estimates, top), path)


def _breakdown_figure(estimate_or_estimates: Any, top: int) -> Any:
    """The figure of `plot_breakdown`."""
    import matplotlib
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

    from .estimator import latency_definition

    panels = []
    for est in ests:
        rows = [r for r in est.table() if r["time_ms"] > 0]
        rows.sort(key=lambda r: -r["time_ms"])
        panels.append((est, rows[:top], len(rows), sum(r["time_ms"] for r in rows)))
    types = sorted({r["type"] for _, rows, _, _ in panels for r in rows})
    cmap = matplotlib.colormaps["tab20" if len(types) > 10 else "tab10"]
    color = {t: cmap(i % cmap.N) for i, t in enumerate(types)}

    n = len(panels)
    height = 1.5 + 0.32 * max(len(rows) for _, rows, _, _ in panels)
    fig = _figure((6.2 * n + 0.4, max(3.0, height) + 0.8))
    axes = fig.subplots(1, n, squeeze=False)[0]
    for ax, (est, rows, n_exec, layer_sum) in zip(axes, panels):
        y = list(range(len(rows)))
        times = [r["time_ms"] for r in rows]
        ax.barh(y, times, color=[color[r["type"]] for r in rows])
        ax.set_yticks(y, [_label(r["name"]) for r in rows], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("predicted time of the layer (ms)")
        shown = sum(times)
        share = 100 * shown / layer_sum if layer_sum > 0 else 0.0
        # the title gives latency_ms, the number the CLI and the demo print, with what it is on this platform;
        # the bars are layer times, whose sum (the device time) may differ from it
        ax.set_title(f"{est.network.name} on {est.platform.name}: latency {est.latency_ms:.3f} ms\n"
                     f"({_brief(latency_definition(est.platform))})\n"
                     f"bars: top {len(rows)} of {n_exec} executed layers, {shown:.3f} of {layer_sum:.3f} ms "
                     f"layer sum ({share:.0f}%)", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
        for yi, t in zip(y, times):
            ax.text(t, yi, f" {t:.3f}", va="center", fontsize=7)
        ax.margins(x=0.18)
    fig.legend(handles=[Patch(color=color[t], label=t) for t in types], loc="outside lower center",
               ncols=min(len(types), 6), fontsize=8, title="layer type (after fusion)", title_fontsize=8)
    return fig


def _brief(definition: str, width: int = 60) -> str:
    """A latency definition short enough for a title or a legend: its head before any parenthesis, cut at the
    last comma or semicolon that keeps it within ``width`` characters."""
    head = definition.split(" (")[0].strip()
    if len(head) <= width:
        return head
    cut = max(head.rfind(", ", 0, width), head.rfind("; ", 0, width))
    return head[:cut] if cut > 0 else head[: width - 3].rstrip() + "..."


def _plain(v: float, pos: Any = None) -> str:
    """A tick label as a plain number: 0.2, 1, 50, 20k, 1.5M, 3G (never 2x10^-1)."""
    if v == 0:
        return "0"
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:g}{suffix}"
    return f"{v:g}"


def _plain_log_axis(axis: Any) -> None:
    """Ticks of a log axis at 1, 2, 3, 5 x 10^k labelled as plain numbers; unlabelled minor ticks for the grid."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(_plain))
    axis.set_minor_locator(LogLocator(base=10, subs=(4.0, 6.0, 7.0, 8.0, 9.0)))
    axis.set_minor_formatter(NullFormatter())


def plot_pareto(table: Any, path: str | os.PathLike, front: dict[str, Any], title: str | None = None) -> str:
    """Write the chart of a NAS space's predicted latencies (PNG, PDF or SVG by extension) and return its path.

    ``table``: a `annette_torch.search.pareto.SpaceTable` (``space``, ``params``, ``ops``, ``latency_ms`` per
    platform, ``accuracy`` or None, ``latency``, ``definitions``); ``front``: per platform the indices of its
    Pareto front. With accuracy: accuracy against predicted latency, each front as a step line; without:
    predicted latency against parameters and against ops, with the fronts of most ops per ms. One colour per
    platform; every cell is drawn as a visible dot; the legend sits below the axes, where it hides no point;
    log axes are labelled with plain numbers.
    """
    _check_target(path)
    return _save(_pareto_figure(table, front, title), path)


def _pareto_figure(table: Any, front: dict[str, Any], title: str | None) -> Any:
    """The figure of `plot_pareto`."""
    import numpy as np
    from matplotlib.lines import Line2D

    plats = list(table.latency_ms)
    if not plats:
        raise ValueError("plot_pareto: no platform in the table")
    import matplotlib
    colors = matplotlib.colormaps["tab10"]
    n = len(table.archs)
    size, alpha = (7, 0.35) if n > 2000 else (14, 0.6)
    device = getattr(table, "latency", "latency") == "device"
    lat_label = "predicted device time, layer sum (ms)" if device else "predicted latency_ms (ms)"

    def what(p: str) -> str:
        d = table.definitions.get(p) or ("layer sum (device time)" if device else "latency")
        return _brief(d, 64)

    handles = []
    if table.accuracy is not None:
        fig = _figure((8.0, 6.0))
        ax = fig.subplots()
        ok = ~np.isnan(table.accuracy)
        for k, p in enumerate(plats):
            c, lat, idx = colors(k % colors.N), table.latency_ms[p], front[p]
            ax.scatter(lat[ok], table.accuracy[ok], s=size, alpha=alpha, color=c, linewidths=0, rasterized=True)
            ax.step(lat[idx], table.accuracy[idx], where="post", color=c, lw=1.6)
            ax.scatter(lat[idx], table.accuracy[idx], s=22, color=c, edgecolors="black", linewidths=0.5, zorder=3)
            handles.append((Line2D([], [], color=c, marker="o", ms=6, lw=1.6, mec="black", mew=0.5),
                            f"{p}: {what(p)}; front {len(idx)} cells"))
        ax.set_xscale("log")
        _plain_log_axis(ax.xaxis)
        ax.set_xlabel(lat_label + ", log scale")
        ax.set_ylabel("accuracy")
        ax.grid(alpha=0.3, which="both")
        ax.set_title(title or f"{table.space}: accuracy and predicted latency of {n:,} cells", fontsize=11)
    else:
        fig = _figure((12.0, 6.0))
        axes = fig.subplots(1, 2, sharey=True)
        # networks that compute nothing (NB201 cells with zero output: no layer) have no place on log axes
        shown = (np.asarray(table.params) > 0) & (np.asarray(table.ops) > 0)
        for ax, x, label in ((axes[0], table.params, "parameters"), (axes[1], table.ops, "ops (2 x MACs)")):
            for k, p in enumerate(plats):
                c, lat = colors(k % colors.N), table.latency_ms[p]
                ax.scatter(x[shown], lat[shown], s=size, alpha=alpha, color=c, linewidths=0, rasterized=True)
                if ax is axes[1]:
                    idx = front[p]
                    idx = idx[shown[idx]]
                    ax.plot(x[idx], lat[idx], color=c, lw=1.4, marker="o", ms=4, mec="black", mew=0.4, zorder=3)
                    pts = len({(float(lat[i]), float(x[i])) for i in idx})
                    handles.append((Line2D([], [], color=c, marker="o", ms=6, lw=1.4, mec="black", mew=0.4),
                                    f"{p}: {what(p)}; most ops per ms: {pts} points ({len(idx)} cells)"))
            ax.set_xscale("log")
            ax.set_yscale("log")
            _plain_log_axis(ax.xaxis)
            _plain_log_axis(ax.yaxis)
            ax.set_xlabel(label + ", log scale")
            ax.grid(alpha=0.3, which="both")
        axes[0].set_ylabel(lat_label + ", log scale")
        axes[1].set_title("line: each platform's front of most ops per ms", fontsize=9)
        hidden = int((~shown).sum())
        fig.suptitle((title or f"{table.space}: predicted latency of {n:,} cells")
                     + (f"; {hidden:,} that compute nothing not shown" if hidden else ""), fontsize=11)
    fig.legend([h for h, _ in handles], [t for _, t in handles], loc="outside lower center",
               ncols=1 if len(handles) > 3 or max(len(t) for _, t in handles) > 50 else len(handles), fontsize=8,
               title="one dot per cell; platform: what its latency is", title_fontsize=8)
    return fig


def _figure(figsize: tuple[float, float]):
    """A bare Figure on matplotlib's Agg canvas (pyplot's global backend stays as it is)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _check_target(path: str | os.PathLike) -> None:
    """Fail before drawing: ``path``'s extension names a chart format and its folder exists."""
    plot_format(path)
    check_writable(path)


def _save(fig: Any, path: str | os.PathLike) -> str:
    """Write the figure atomically in the format ``path``'s extension names (a failed save leaves an existing file
    as it was); a missing folder or an unknown extension raises `AnnetteError` before anything is written."""
    from .atomic import atomic_write
    out = Path(path)
    fmt = plot_format(out)
    check_writable(out)
    with atomic_write(out, "wb") as f:
        fig.savefig(f, dpi=120, format=fmt)
    return str(out)


def _fmt_rate(v: float, unit: str) -> str:
    for div, p in ((1e12, "T"), (1e9, "G"), (1e6, "M")):
        if abs(v) >= div:
            return f"{v / div:.3g} {p}{unit}"
    return f"{v:.3g} {unit}"


def _layer_columns(layers: Any) -> tuple[Any, Any, Any, list[str]]:
    """(ops, bytes, time_ms, type labels) from a mapping with those keys or a 3/4-tuple of arrays."""
    import numpy as np

    if isinstance(layers, dict) or hasattr(layers, "keys"):
        ops, byts, t = layers["ops"], layers["bytes"], layers["time_ms"]
        types = layers.get("type", layers.get("types")) if hasattr(layers, "get") else None
    else:
        seq = list(layers)
        if len(seq) not in (3, 4):
            raise ValueError("plot_roofline: layers must be {ops, bytes, time_ms[, type]} or (ops, bytes, "
                             "time_ms[, types])")
        ops, byts, t = seq[:3]
        types = seq[3] if len(seq) == 4 else None
    ops = np.asarray(ops, dtype=np.float64).reshape(-1)
    byts = np.asarray(byts, dtype=np.float64).reshape(-1)
    t = np.asarray(t, dtype=np.float64).reshape(-1)
    labels = ["layer"] * ops.size if types is None else [str(x) for x in types]
    if not (ops.size == byts.size == t.size == len(labels)):
        raise ValueError(f"plot_roofline: layer columns differ in length ({ops.size}, {byts.size}, {t.size}, "
                         f"{len(labels)})")
    return ops, byts, t, labels


def plot_roofline(platform: Any, layers: Any = None, path: str | os.PathLike | None = None,
                  title: str | None = None) -> str:
    """Write the roofline view of a platform (the ANNETTE paper's Fig. 1) as PNG, PDF or SVG (by ``path``'s
    extension) and return its path.

    Log-log axes: operational intensity (ops/byte) against performance (ops/s). One roofline
    ``min(op_s, intensity x bandwidth)`` per distinct (op_s, bandwidth) among the platform's layer models
    (keys sharing one are listed together; models without a roofline, e.g. purely statistical ones, are
    named in the title). ``layers``: measured layers as points colored by type, in the color of their
    type's own roofline where the platform has one: a mapping with ``ops``, ``bytes``, ``time_ms`` and
    ``type`` arrays, or a tuple ``(ops, bytes, time_ms[, types])``; layers without operations or time
    cannot be placed on log axes and are counted in the title. ``platform``: a `Platform`, a shipped name
    or a platform file path. With measured layers the axes span them (roofs far above, e.g. the nominal
    roof of a data-movement type without operations, are clipped).
    """
    import matplotlib
    import numpy as np
    from matplotlib.legend_handler import HandlerTuple

    from .platform import load_platform

    if path is None:
        raise ValueError("plot_roofline: path is required")
    _check_target(path)
    plat = load_platform(platform)
    roofs: dict[tuple[float, float], list[str]] = {}
    no_roof: list[str] = []
    via_base: set[str] = set()
    for key, model in plat.layers.items():
        op_s, bw = getattr(model, "op_s", None), getattr(model, "bandwidth", None)
        base = getattr(model, "base", None)
        if op_s is None and base is not None and getattr(base, "op_s", None) is not None:
            op_s, bw = base.op_s, getattr(base, "bandwidth", None)  # a mixed model: its roofline base
            via_base.add(key)
        if op_s is None or bw is None or not op_s > 0 or not bw > 0:
            no_roof.append(key)
            continue
        roofs.setdefault((float(op_s), float(bw)), []).append(key)
    groups = sorted(roofs.items(), key=lambda kv: -kv[0][0])

    pts = None
    dropped = 0
    if layers is not None:
        ops, byts, t, labels = _layer_columns(layers)
        ok = (ops > 0) & (byts > 0) & (t > 0) & np.isfinite(ops) & np.isfinite(byts) & np.isfinite(t)
        dropped = int((~ok).sum())
        pts = (ops[ok] / byts[ok], ops[ok] / (t[ok] * 1e-3), np.asarray([labels[i] for i in np.flatnonzero(ok)],
                                                                        dtype=object))
    have_pts = pts is not None and pts[0].size > 0

    # axes: the measured points (if any) with margin, else the ridge points of the usual roofs
    ops_all = np.array([op for op, _ in roofs]) if roofs else np.array([1e11])
    typical = ops_all <= 1e3 * np.median(ops_all)
    if have_pts:
        x_lo, x_hi = float(pts[0].min()), float(pts[0].max())
        y_lo, y_hi = float(pts[1].min()), float(pts[1].max())
        y_hi = max(y_hi, min(float(ops_all[typical].max()), 100 * y_hi))
    else:
        ridges = [op / bw for (op, bw), _ in groups if op <= 1e3 * np.median(ops_all)]
        x_lo, x_hi = (min(ridges), max(ridges)) if ridges else (1.0, 100.0)
        x_lo, x_hi = x_lo / 100, x_hi * 100
        y_hi = float(ops_all[typical].max())
        y_lo = min(float(ops_all[typical].min()), x_lo * min(bw for _, bw in roofs) if roofs else y_hi) / 10
    lo = 10 ** np.floor(np.log10(x_lo / 2))
    hi = 10 ** np.ceil(np.log10(x_hi * 2))
    x = np.logspace(np.log10(lo), np.log10(hi), 400)

    # colors: one per layer type (points) and per single-key roof of that type; shared/fallback roofs in grays
    types = sorted(set(pts[2].tolist())) if have_pts else []
    own = [keys[0] for _, keys in groups if len(keys) == 1 and keys[0] not in ("Base", "Pool")]
    palette = list(dict.fromkeys(types + own))
    cmap = matplotlib.colormaps["tab20" if len(palette) > 10 else "tab10"]
    color = {k: cmap(i % cmap.N) for i, k in enumerate(palette)}
    grays = ["0.0", "0.35", "0.55", "0.7"]
    dashes = ["-", "--", "-.", ":"]

    fig = _figure((11.0, 6.0))
    ax = fig.subplots()
    handles: dict[str, list] = {}
    texts: dict[str, str] = {}
    n_shared = 0
    for (op_s, bw), keys in groups:
        y = np.minimum(op_s, x * bw)
        rate = f"{_fmt_rate(op_s, 'op/s')}, {_fmt_rate(bw, 'B/s')}"
        if len(keys) == 1 and keys[0] in color:
            k = keys[0]
            (ln,) = ax.plot(x, y, color=color[k], lw=1.8, alpha=0.95)
            handles.setdefault(k, []).insert(0, ln)
            texts[k] = f"{k}: {'base ' if k in via_base else ''}roof {rate}"
        else:
            ls = dashes[n_shared % len(dashes)]
            (ln,) = ax.plot(x, y, color=grays[n_shared % len(grays)], lw=2.2, ls=ls, alpha=0.9)
            n_shared += 1
            shown = ", ".join(keys) if len(keys) <= 4 else ", ".join(keys[:4]) + f", +{len(keys) - 4}"
            label = f"roof of {shown}"
            handles[label] = [ln]
            texts[label] = f"{label}: {rate}"
    if have_pts:
        for ty in types:
            k = pts[2] == ty
            sc = ax.scatter(pts[0][k], pts[1][k], s=9, alpha=0.6, color=color[ty], edgecolors="none")
            handles.setdefault(ty, []).append(sc)
            texts[ty] = (texts[ty] + f"; {int(k.sum())} measured") if ty in texts else f"{ty}: {int(k.sum())} measured"
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(10 ** np.floor(np.log10(y_lo / 2)), 10 ** np.ceil(np.log10(y_hi * 2)))
    ax.set_xlabel("operational intensity (ops / byte)")
    ax.set_ylabel("performance (ops / s)")
    ax.grid(True, which="major", alpha=0.3)
    ax.grid(True, which="minor", alpha=0.1)
    head = title or f"roofline of {plat.name}"
    sub = []
    if pts is not None:
        sub.append(f"{pts[0].size} measured layers" + (f" ({dropped} without ops/time not shown)" if dropped else ""))
    if via_base:
        sub.append("roofs of mixed models: their roofline base")
    if no_roof:
        sub.append("no roofline: " + ", ".join(no_roof[:4]) + (f" +{len(no_roof) - 4}" if len(no_roof) > 4 else ""))
    ax.set_title(head + "".join("\n" + x for x in sub), fontsize=10)
    if handles:
        order = list(handles)
        hs = [tuple(handles[k]) if len(handles[k]) > 1 else handles[k][0] for k in order]
        fig.legend(hs, [texts[k] for k in order], loc="outside right upper", fontsize=7, framealpha=0.85,
                   markerscale=2.0, handler_map={tuple: HandlerTuple(ndivide=None)})
    return _save(fig, path)


def _pct(v: float) -> str:
    return f"{v:.1f}%" if abs(v) < 1e5 else f"{v:.2g}%"


def plot_pred_vs_measured(data: Any, path: str | os.PathLike, groups: Sequence[str] | None = None,
                          title: str | None = None) -> str:
    """Write predicted-vs-measured scatter plots (PNG, PDF or SVG by the extension), one log-log panel per
    variant, and return the path.

    ``data``: ``{variant: (predicted_ms, measured_ms)}`` (arrays in the same order). Each panel shows the
    identity line, the +-10 % band and the variant's MAPE in its title; ``groups`` (one label per network,
    e.g. ``real`` / ``nb101``) colors the points.
    """
    import matplotlib
    import numpy as np

    if not data:
        raise ValueError("plot_pred_vs_measured: no variants given")
    _check_target(path)
    items = []
    for name, pm in data.items():
        p, m = (np.asarray(a, dtype=np.float64).reshape(-1) for a in pm[:2])
        if p.shape != m.shape:
            raise ValueError(f"plot_pred_vs_measured: {name}: {p.size} predictions for {m.size} measurements")
        items.append((str(name), p, m))
    n = len(items)
    ncols = min(3, n)
    nrows = -(-n // ncols)
    fig = _figure((4.3 * ncols, 4.1 * nrows + 0.4))
    axes = fig.subplots(nrows, ncols, squeeze=False)
    glab = None if groups is None else np.asarray([str(g) for g in groups], dtype=object)
    gnames = [] if glab is None else list(dict.fromkeys(glab.tolist()))
    cmap = matplotlib.colormaps["tab10"]
    for ax, (name, p, m) in zip(axes.flat, items):
        mv = (m > 0) & np.isfinite(m)
        with np.errstate(over="ignore", invalid="ignore"):
            err = np.abs(p[mv] - m[mv]) / m[mv]
        mape = float(100 * np.mean(err)) if mv.any() else float("nan")
        within = float(100 * np.mean(err <= 0.1)) if mv.any() else float("nan")
        # axes span the measurements (and predictions within a factor 100 of them); predictions beyond
        # are drawn on the border as triangles, so one exploding model cannot flatten the panel
        m_lo, m_hi = (float(m[mv].min()), float(m[mv].max())) if mv.any() else (0.1, 10.0)
        inside = mv & np.isfinite(p) & (p >= m_lo / 100) & (p <= m_hi * 100)
        vals = np.concatenate([p[inside], m[mv]])
        lo, hi = float(vals.min()) / 1.5, float(vals.max()) * 1.5
        pc = np.clip(np.nan_to_num(p, nan=lo, posinf=hi, neginf=lo), lo, hi)
        off = mv & ~((p >= lo) & (p <= hi))
        x = np.logspace(np.log10(lo), np.log10(hi), 50)
        ax.fill_between(x, x * 0.9, x * 1.1, color="0.6", alpha=0.25, lw=0, label="±10%")
        ax.plot(x, x, color="0.3", lw=1.0, label="identity")
        sets = [(g, glab == g) for g in gnames] if glab is not None and glab.size == p.size else [(None, mv)]
        for i, (g, sel) in enumerate(sets):
            k = mv & sel & ~off
            ax.scatter(m[k], pc[k], s=14, alpha=0.75, color=cmap(i % cmap.N), edgecolors="none",
                       label=None if g is None else f"{g} ({int((mv & sel).sum())})")
            k = mv & sel & off
            if k.any():
                ax.scatter(m[k], pc[k], s=30, marker="^", color=cmap(i % cmap.N), edgecolors="k", linewidths=0.5)
        if off.any():
            ax.text(0.02, 0.90, f"{int(off.sum())} off-scale (triangles on the border)", transform=ax.transAxes,
                    va="top", fontsize=7)
        ok = mv
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_aspect("equal")
        ax.set_xlabel("measured (ms)")
        ax.set_ylabel("predicted (ms)")
        ax.set_title(f"{name}: MAPE {_pct(mape)}, {within:.0f}% within ±10%", fontsize=9)
        ax.grid(True, which="major", alpha=0.3)
        if (~ok).any():
            ax.text(0.02, 0.98, f"{int((~ok).sum())} without a positive measurement not shown",
                    transform=ax.transAxes, va="top", fontsize=7)
        ax.legend(loc="lower right", fontsize=7)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title, fontsize=11)
    return _save(fig, path)
