"""``make demo`` (``python -m annette_torch.cli.demo``): estimate a handful of networks on every shipped platform.

Zoo models are traced with torch.fx; graphs of the original ANNETTE are read from ``graphs/`` of the
reference data folder (``$ANNETTE_REFERENCE_DIR``, see docs/cli.md) when it is found. Prints one table
(network x platform, ms, plus the time each conversion and estimate took) and writes a per-layer
breakdown chart of resnet50 on zcu102 and ncs2 to ``out/demo_breakdown.png``.

The demo is a list of steps (`STEPS`), each a function of a shared `DemoContext`; a later step (e.g. a
small NAS run from ``search/``) is one more function appended there.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ZOO_MODELS = ("resnet18", "resnet50", "mobilenet_v2", "squeezenet1_1", "efficientnet_b0")
REFERENCE_GRAPHS = ("cf_resnet50", "cf_inceptionv1", "tf_mobilenetv2", "cf_squeezenet")
BREAKDOWN = ("resnet50", ("zcu102", "ncs2"))


@dataclass
class DemoContext:
    """What the steps share: where to write, the platforms, and the results so far."""

    out_dir: Path
    platforms: list[Any] = field(default_factory=list)
    #: network name -> {"source", "layers", "convert_s", "estimates": {platform: Estimate}, "estimate_s"}
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def find_reference_graphs() -> Path | None:
    """The original ANNETTE graph folder: ``graphs/`` of the reference data folder (``$ANNETTE_REFERENCE_DIR``,
    else ``shared/annette-reference`` beside or inside the current folder or beside the checkout)."""
    from ..bench.suites.reference import reference_dir

    ref = reference_dir()
    return ref / "graphs" if ref is not None and (ref / "graphs").is_dir() else None


# ------------------------------------------------------------------------------------------------------
# steps


def step_estimate(ctx: DemoContext) -> None:
    """Convert each network once, estimate it on every platform, print the table."""
    from .. import zoo
    from ..estimator import estimate, latency_definition
    from ..frontends.annette_json import from_annette_json
    from ..frontends.fx import trace

    sources: list[tuple[str, str, Callable[[], Any]]] = []
    for name in ZOO_MODELS:
        if name in zoo.ZOO:
            sources.append((name, "torch.fx", lambda n=name: trace(zoo.get(n), zoo.INPUT_SHAPES[n], name=n)))
    graphs = find_reference_graphs()
    if graphs is None:
        ctx.notes.append("original ANNETTE graphs not found (set ANNETTE_REFERENCE_DIR to the reference data "
                         "folder, which holds graphs/); estimated the zoo models only")
    else:
        for name in REFERENCE_GRAPHS:
            path = graphs / f"{name}.json"
            if path.is_file():
                sources.append((name, "ANNETTE json", lambda p=path: from_annette_json(p)))

    for name, kind, convert in sources:
        t0 = time.perf_counter()
        net = convert()
        t1 = time.perf_counter()
        ests = {p.name: estimate(net, p) for p in ctx.platforms}
        t2 = time.perf_counter()
        ctx.results[name] = {"source": kind, "layers": len(net), "convert_s": t1 - t0,
                             "estimate_s": (t2 - t1) / max(len(ests), 1), "estimates": ests}

    plat_names = [p.name for p in ctx.platforms]
    head = ["network", "source", "layers", *(f"{p} ms" for p in plat_names), "convert", "per estimate"]
    rows = []
    for name, r in ctx.results.items():
        rows.append([name, r["source"], str(r["layers"]),
                     *(f"{r['estimates'][p].latency_ms:.3f}" for p in plat_names),
                     f"{r['convert_s'] * 1e3:.0f} ms", f"{r['estimate_s'] * 1e3:.2f} ms"])
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    left = {0, 1}

    def fmt(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    print(fmt(head))
    print(fmt(["-" * w for w in widths]))
    for row in rows:
        print(fmt(row))
    print("(convert: torch.fx trace or JSON read, once per network; per estimate: mapping pass + layer "
          "models, per platform)")
    for p in ctx.platforms:
        print(f"{p.name} ms: {latency_definition(p)}; file {p.source}")


def step_breakdown_plot(ctx: DemoContext) -> None:
    """Per-layer breakdown chart of resnet50 on zcu102 and ncs2."""
    from ..plots import plot_breakdown

    net_name, plats = BREAKDOWN
    r = ctx.results.get(net_name) or ctx.results.get("cf_resnet50")
    if r is None:
        ctx.notes.append(f"no {net_name} estimate, breakdown chart skipped")
        return
    ests = [r["estimates"][p] for p in plats if p in r["estimates"]]
    ctx.out_dir.mkdir(exist_ok=True)  # the demo's own output folder (charts create no folders)
    path = plot_breakdown(ests, ctx.out_dir / "demo_breakdown.png")
    print(f"\nper-layer breakdown chart: {Path(path).resolve()}")


#: NAS step: search space, platform, latency budget (ms), trials
NAS_SEARCH = ("nb201", "zcu102", 0.6, 50)


def step_nas_search(ctx: DemoContext) -> None:
    """A 50-trial latency-constrained Optuna search (TPE) over NAS-Bench-201 cells under a zcu102 budget.

    The objective is `annette_torch.search.optuna_search.synthetic_accuracy`, a deterministic stand-in (NOT accuracy);
    a real search passes a training function, a zero-cost proxy or a NAS-Bench lookup instead.
    """
    space, plat, budget, trials = NAS_SEARCH
    try:
        import optuna
        from ..search.optuna_search import best_feasible, latency_constrained_search
    except ImportError as e:
        ctx.notes.append(f"NAS search step skipped ({e}; pip install 'annette-torch[search]')")
        return
    old = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        t0 = time.perf_counter()
        study = latency_constrained_search(space, plat, "synthetic", trials, latency_ms=budget, seed=0)
        wall = time.perf_counter() - t0
    finally:
        optuna.logging.set_verbosity(old)
    best = best_feasible(study, 1)
    oracle = study.annette_oracle
    print(f"\nNAS: {trials}-trial Optuna TPE search over {space} cells, predicted latency on {plat} <= {budget} ms "
          "(objective: synthetic accuracy proxy, NOT real accuracy)")
    if best:
        b = best[0]
        print(f"  best feasible   {b['arch']}")
        print(f"                  predicted {b['latency_ms']:.4f} ms, proxy objective {b['objective']:.2f} "
              f"(trial {b['trial']})")
    else:
        print("  no architecture within the budget found")
    n_ok = sum(1 for t in study.trials if t.user_attrs.get("latency_ms", float("inf")) <= budget)
    print(f"  {n_ok} of {len(study.trials)} trials within budget; search {wall:.2f} s; latency constraint "
          f"{study.annette_overhead_ms:.3f} ms per trial ({oracle.misses} estimated, "
          f"{oracle.calls - oracle.misses} cached)")


#: The demo, in order. A further step is one more function appended here.
STEPS: list[Callable[[DemoContext], None]] = [step_estimate, step_breakdown_plot, step_nas_search]


def main(argv: list[str] | None = None) -> int:
    from ..platform import list_platforms, load_platform

    logging.basicConfig(level=logging.WARNING, format="demo: %(levelname)s: %(message)s")
    t0 = time.perf_counter()
    ctx = DemoContext(out_dir=Path("out"), platforms=[load_platform(p) for p in list_platforms()])
    print(f"annette-torch demo: {len(ctx.platforms)} platforms ({', '.join(p.name for p in ctx.platforms)})\n")
    for step in STEPS:
        step(ctx)
    for note in ctx.notes:
        print(f"note: {note}")
    print(f"\ndemo finished in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
