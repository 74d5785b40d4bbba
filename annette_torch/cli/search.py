"""``annette search`` (latency-constrained / Pareto architecture search with Optuna) and ``annette pareto``
(predicted latency of whole NAS-Bench spaces per platform, Pareto fronts, PNG + CSV)."""

from __future__ import annotations

import argparse
import contextlib
import csv
import math
import os
from pathlib import Path
from typing import Any, Iterator

from ..errors import AnnetteError, require
from .common import check_output, check_output_store, platform_names

__all__ = ["add_parser", "run"]

SEARCH_SPACES = ("nb201", "nb101", "mbv2", "anb", "vit", "hybrid")
PARETO_SPACES = ("nb201", "nb101", "vit", "hybrid")


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of milliseconds, got {text!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number of milliseconds, got {text!r}")
    return v


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return v


def parse_input_shape(text: str) -> tuple[int, ...]:
    """``1,3,32,32`` (or ``1x3x32x32``) -> a shape of positive integers."""
    try:
        shape = tuple(int(d) for d in text.replace("x", ",").split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers such as 1,3,32,32, "
                                         f"got {text!r}") from None
    if not shape or any(d <= 0 for d in shape):
        raise argparse.ArgumentTypeError(f"every dimension must be a positive integer, got {text!r}")
    return shape


def add_parser(sub: Any) -> None:
    """Add the ``search`` and ``pareto`` commands to the CLI's sub-parser set."""
    s = sub.add_parser(
        "search", help="latency-constrained architecture search with Optuna (predicted latency as the constraint)",
        description="Search a space for the architecture with the best objective whose predicted latency on the "
                    "platform is within --latency-ms (TPE), or for the objective/latency Pareto front "
                    "(--multi-objective, NSGA-II). Several processes given the same --storage and --study "
                    "search one study; watch it with optuna-dashboard STORAGE.")
    s.add_argument("--space", default="nb201", metavar="NAME|module:callable",
                   help=f"search space: {', '.join(SEARCH_SPACES)} (default nb201), or package.module:function, a "
                        "function trial -> nn.Module (give --input-shape)")
    s.add_argument("-i", "--input-shape", type=parse_input_shape, metavar="SHAPE",
                   help="input shape of a module:callable space's models, e.g. 1,3,32,32")
    s.add_argument("--latency", choices=("latency", "device"), default="latency",
                   help="what is constrained: the platform's latency (end to end where it has a network-level "
                        "model; default) or device time (the layer sum)")
    s.add_argument("-p", "--platform", default="zcu102", help="platform name or .json file (default zcu102)")
    s.add_argument("--margin", type=float, default=0.0, metavar="FRACTION",
                   help="safety margin: enforce latency <= budget x (1 - FRACTION), e.g. 0.06 = the platform's "
                        "measured error (default 0)")
    s.add_argument("--latency-ms", type=_positive_float, metavar="MS",
                   help="latency budget in ms (required unless --multi-objective)")
    s.add_argument("--trials", type=_positive_int, default=200, help="trials run by this process (default 200)")
    s.add_argument("--storage", metavar="URL",
                   help="Optuna storage: sqlite:///study.db, postgresql://..., or journal:FILE (default: in memory)")
    s.add_argument("--study", metavar="NAME", help="study name (default: derived from space, platform and mode)")
    s.add_argument("--objective", default="synthetic", metavar="synthetic|FILE.csv",
                   help="'synthetic' (a deterministic stand-in, NOT accuracy) or an 'arch,accuracy' CSV to look up")
    s.add_argument("--seed", type=int, default=0, help="sampler seed (give each worker its own; default 0)")
    s.add_argument("--multi-objective", action="store_true",
                   help="NSGA-II over (objective max, predicted latency min); --latency-ms then optional")
    s.add_argument("--skip-infeasible", action="store_true",
                   help="do not evaluate the objective of over-budget architectures (prune their trials)")
    s.add_argument("--top", type=_positive_int, default=5, help="architectures to print (default 5)")
    s.add_argument("--out", metavar="FILE.csv", help="write every trial of the study as CSV")

    p = sub.add_parser(
        "pareto", help="predicted latency of a whole NAS-Bench space per platform, Pareto fronts, PNG + CSV",
        description="Predict the latency of all 15,625 NB201 cells (or --samples sampled NB101 cells, vision "
                    "transformers or hybrids) on each platform. "
                    "With --accuracy (an 'arch,accuracy' CSV): accuracy vs latency with each platform's Pareto "
                    "front; without: latency vs parameters and ops. Writes a PNG and a CSV of the fronts.")
    p.add_argument("--space", choices=PARETO_SPACES, default="nb201", help="search space (default nb201)")
    p.add_argument("-p", "--platform", nargs="+", default=["zcu102"], metavar="P",
                   help="one or more platforms (space- or comma-separated; default zcu102)")
    p.add_argument("--accuracy", metavar="FILE", help="'arch,accuracy' CSV (NB201 arch strings / NB101 hashes)")
    p.add_argument("--samples", type=_positive_int, default=2000,
                   help="NB101 cells, vit or hybrid networks to sample (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    p.add_argument("--out", default=None, metavar="PLOT.png",
                   help="plot file: .png, .pdf or .svg, by its extension (default pareto_<space>.png)")
    p.add_argument("--csv", metavar="FILE", help="front CSV (default: <plot name>_front.csv)")
    p.add_argument("--latency", choices=("latency", "device"), default="latency",
                   help="latency axis: the platform's latency (end to end where it has a network-level model; "
                        "default) or device time (the layer sum)")


@contextlib.contextmanager
def _optuna_quiet(verbose: bool) -> Iterator[None]:
    import optuna
    old = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.INFO if verbose else optuna.logging.WARNING)
    try:
        yield
    finally:
        optuna.logging.set_verbosity(old)


def run(args: argparse.Namespace) -> int:
    """Execute ``annette search`` or ``annette pareto``; returns the exit code."""
    if args.command == "pareto":
        return _pareto(args)
    require("'annette search'", "optuna")
    with _optuna_quiet(bool(getattr(args, "verbose", False))):
        return _search(args)


def _dashboard_hint(storage: str) -> str:
    from ..search.storage import mask_url
    target = storage[len("journal:"):] if storage.startswith("journal:") else storage
    return f"optuna-dashboard {mask_url(target)}"


def _space(args: argparse.Namespace) -> Any:
    """A shipped space by name, or ``package.module:function`` (trial -> nn.Module) as a function space."""
    from ..search import optuna_search as osr
    spec = args.space
    if ":" not in spec:
        if spec not in SEARCH_SPACES:
            raise AnnetteError(f"unknown search space {spec!r}: give one of {', '.join(SEARCH_SPACES)} or "
                               "package.module:function")
        return osr.get_space(spec)
    import importlib
    import sys
    mod_name, _, attr = spec.partition(":")
    if not mod_name or not attr or not all(p.isidentifier() for p in mod_name.split(".") + attr.split(".")):
        raise AnnetteError(f"--space {spec!r}: expected package.module:function")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj: Any = importlib.import_module(mod_name)
    except Exception as e:  # noqa: BLE001 - the user's module
        raise AnnetteError(f"--space: cannot import module {mod_name!r}: {type(e).__name__}: {e}") from None
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise AnnetteError(f"--space: module {mod_name!r} has no attribute {attr!r}")
    if not callable(obj):
        raise AnnetteError(f"--space {spec}: {attr} is not a function")
    if callable(getattr(obj, "suggest", None)):
        return obj
    if args.input_shape is None:
        raise AnnetteError(f"--space {spec}: give the models' input shape with --input-shape, e.g. 1,3,32,32")
    return osr.get_space(obj, args.input_shape)


def _search(args: argparse.Namespace) -> int:
    import time

    from optuna.trial import TrialState
    from ..estimator import latency_definition
    from ..search import optuna_search as osr
    from ..search.storage import fail_stale, mask_url

    if not args.multi_objective and args.latency_ms is None:
        raise AnnetteError("give --latency-ms (the latency budget) or --multi-objective")
    check_output(args.out, "--out")
    check_output_store(args.storage, "--storage")
    space = _space(args)
    objective = osr.load_objective(args.objective, space)  # fail fast on a bad CSV
    common = dict(storage=args.storage, study_name=args.study, seed=args.seed, latency=args.latency)
    t0 = time.perf_counter()
    if args.multi_objective:
        study = osr.pareto_search(space, args.platform, objective, args.trials, latency_ms=args.latency_ms, **common)
    else:
        study = osr.latency_constrained_search(space, args.platform, objective, args.trials, latency_ms=args.latency_ms,
                                               skip_infeasible=args.skip_infeasible, margin=args.margin, **common)
    wall = time.perf_counter() - t0
    fail_stale(study)
    oracle = study.annette_oracle
    trials = study.get_trials(deepcopy=False)
    states = {s: sum(t.state == s for t in trials) for s in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)}
    lat = [t.user_attrs["latency_ms"] for t in trials if "latency_ms" in t.user_attrs]
    budget = args.latency_ms
    feasible = osr.feasible_trials(study, budget)
    obj_name = "synthetic (a deterministic stand-in, NOT accuracy)" if args.objective == "synthetic" else args.objective
    where = "in memory" if not args.storage else mask_url(args.storage)
    print(f"study      {study.study_name} ({where})")
    mode = "maximise objective, latency <= budget (TPE)" if not args.multi_objective else \
        "Pareto front of objective (max) and latency (min) (NSGA-II)"
    print(f"search     {space.name} on {oracle.platform.name}: {mode}")
    print(f"objective  {obj_name}")
    if budget is not None:
        print(f"budget     {budget:g} ms predicted {latency_definition(oracle.platform, args.latency)}")
    print(f"trials     {args.trials} run here in {wall:.1f} s; study total {len(trials)}: "
          f"{states[TrialState.COMPLETE]} complete, {states[TrialState.PRUNED]} pruned, "
          f"{states[TrialState.FAIL]} failed; {len(feasible)} complete within budget")
    if lat:
        print(f"latency    {min(lat):.4f} .. {max(lat):.4f} ms predicted over the study's trials")
    print(f"overhead   {study.annette_overhead_ms:.3f} ms per trial for the latency constraint "
          f"({oracle.misses} estimated, {oracle.calls - oracle.misses} from cache)")
    best = osr.best_feasible(study, 0 if args.multi_objective else args.top, budget)
    if not best:
        msg = "no architecture within the budget" if budget is not None else "no completed trial"
        print(f"\n{msg} yet" + (f" (fastest seen: {min(lat):.4f} ms)" if lat else ""))
    else:
        head = "Pareto front (fastest first)" if args.multi_objective else "best architectures within the budget"
        print(f"\n{head}:")
        w = len(str(len(best)))
        for i, r in enumerate(best[: max(args.top, 1)] if not args.multi_objective else best, 1):
            print(f"{i:>{w}}. objective {r['objective']:8.3f}  latency {r['latency_ms']:.4f} ms  "
                  f"trial {r['trial']:<5} {r['arch']}")
    if args.out:
        rows = osr.trial_rows(study)
        try:
            from ..atomic import atomic_write
            with atomic_write(args.out, "w", newline="") as f:
                w_ = csv.DictWriter(f, fieldnames=["trial", "state", "arch", "latency_ms", "objective", "feasible"],
                                    lineterminator="\n")
                w_.writeheader()
                w_.writerows(rows)
        except OSError as e:
            raise AnnetteError(f"cannot write {args.out}: {e.strerror or e}") from None
        print(f"\n{len(rows)} trials written to {args.out}")
    if args.storage:
        print(f"\nview: {_dashboard_hint(args.storage)}")
    return 0


def _pareto(args: argparse.Namespace) -> int:
    import time

    import numpy as np

    from ..search import pareto

    from ..platform import load_platform

    out = Path(args.out or f"pareto_{args.space}.png")
    check_output(out, "--out", chart=True)  # fail fast: outputs, platforms and the accuracy file first
    check_output(args.csv or out.with_name(out.stem + "_front.csv"), "--csv")
    platforms = [load_platform(p) for p in platform_names(args.platform, default="")]
    if args.accuracy is not None and not os.path.isfile(args.accuracy):
        raise AnnetteError(f"{args.accuracy}: no such accuracy file")
    t0 = time.perf_counter()
    table, front, png, csv_out = pareto.pareto_report(args.space, platforms, out, accuracy=args.accuracy,
                                                      samples=args.samples, seed=args.seed, csv_path=args.csv,
                                                      latency=args.latency)
    wall = time.perf_counter() - t0
    what = "all" if args.space == "nb201" else "sampled"
    print(f"space      {args.space}: {what} {len(table):,} cells, {len(platforms)} platform(s), {wall:.1f} s")
    if table.accuracy is not None:
        n_acc = int(np.count_nonzero(~np.isnan(table.accuracy)))
        print(f"accuracy   {args.accuracy}: {n_acc:,} of {len(table):,} cells matched")
        y, y_name = table.accuracy, "accuracy"
    else:
        y, y_name = table.ops, "ops"
        print("accuracy   none given: fronts of (latency min, ops max), the cells with the most compute per ms")
    for p in platforms:
        lat = table.latency_ms[p.name]
        idx = front[p.name]
        points = len({(float(lat[i]), float(y[i])) for i in idx})
        print(f"\n{p.name}: predicted latency {lat.min():.4f} / {np.median(lat):.4f} / {lat.max():.4f} ms "
              f"(min / median / max); front: {points} points ({len(idx)} cells)")
        if len(idx):
            for label, i in (("fastest", idx[0]), (f"best {y_name}", idx[-1])):
                yv = f"{y[i]:.4g}" if y_name == "accuracy" else f"{y[i] / 1e6:.1f} M ops"
                print(f"  {label:<14}{lat[i]:.4f} ms  {yv:>12}  {table.archs[i]}")
    print(f"\nplot written to {png}\nfront CSV written to {csv_out}")
    return 0
