"""``annette bench``: run benchmark suites on a hardware module, list suites, export and ingest results."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..dburl import mask_url
from ..errors import AnnetteError, require
from .common import check_output, check_output_folder, check_output_store

#: the Python module each built-in hardware module measures with (an optional dependency)
RUNNER_MODULES = {"ort-cpu": "onnxruntime", "openvino": "openvino"}

__all__ = ["add_parser", "add_calibrate_parser", "run", "run_calibrate", "PLATFORM_RUNNERS", "DEFAULT_DB"]

#: measurable platform -> (hardware module, its settings)
PLATFORM_RUNNERS: dict[str, tuple[str, dict[str, Any]]] = {
    "ort-cpu": ("ort-cpu", {}),
    "openvino-cpu": ("openvino", {"device": "CPU"}),
    "ncs2": ("openvino", {"device": "MYRIAD"}),
    "zcu102": ("vitis", {}),
    "zcu102-vai3": ("vitis", {}),
    "zcu102-dnndk": ("vitis", {}),
}
DEFAULT_DB = os.environ.get("ANNETTE_DB", "annette-measurements.sqlite")
#: what ``--db`` says in the help (the default as set, its password masked)
_DB_HELP = ("measurement store: an SQLite file, or a database URL such as postgresql://user:password@host/db "
            "that several workers and machines share (default: {default})")


def _positive_seconds(text: str) -> float:
    """argparse type for ``--timeout``: a finite number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds > 0, got {text!r}")
    return value


def _at_least_one(text: str) -> int:
    """argparse type for counts such as ``--threads`` and ``-n``: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


#: `annette_torch.bench.suites.reference.REFERENCE_ENV`, named here so that --help imports no suites (a test
#: keeps the two equal)
REFERENCE_ENV = "ANNETTE_REFERENCE_DIR"
#: the environment variables ``annette bench`` reads, as its --help shows them
BENCH_ENVIRONMENT = (
    f"environment: ${REFERENCE_ENV}: the folder of the original ANNETTE reference data (its benchmark-configs/ "
    "and graphs/), which the paper_conv suite reads; without it --list shows that suite as unavailable (default: "
    "shared/annette-reference beside or inside the current folder, or beside the source checkout; a pip install "
    "has none). $ANNETTE_DB: the default --db. $ANNETTE_LOCK_DIR: the folder of this machine's measuring lock "
    "(default: the temporary folder). See docs/cli.md.")


def add_parser(sub: Any) -> None:
    """Add the ``bench`` command and its sub-commands to the CLI's sub-parser set."""
    b = sub.add_parser("bench", help="run benchmark suites on a toolchain and store per-layer measurements",
                       description="Run a benchmark suite on a platform's toolchain (resumable: finished "
                                   "configurations are skipped), or list / export / ingest measurements.",
                       epilog=BENCH_ENVIRONMENT)
    b.add_argument("--list", action="store_true", help="list the benchmark suites")
    b.add_argument("-p", "--platform", help=f"one of {', '.join(PLATFORM_RUNNERS)}")
    b.add_argument("-s", "--suite", action="append", help="suite name (repeat for several; see --list)")
    b.add_argument("--db", default=DEFAULT_DB, help=_DB_HELP.format(default=mask_url(DEFAULT_DB)))
    b.add_argument("--budget", help="stop after this long, e.g. 10m or 2h (configurations run space-filling first)")
    b.add_argument("-n", "--configs", type=_at_least_one, help="number of configurations to sample (default: the suite's)")
    b.add_argument("--sampler", default=None, help="grid, random, sobol or lhs (default: the suite's)")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--iterations", type=int, default=20, help="timed runs per configuration (default 20)")
    b.add_argument("--warmup", type=int, default=3, help="untimed runs first (default 3)")
    b.add_argument("--timeout", type=_positive_seconds, default=120.0, help="seconds per configuration before it counts as hung")
    b.add_argument("--pack", type=int, default=1,
                   help="measure this many single-kernel configurations per compiled model (default 1)")
    b.add_argument("--threads", type=_at_least_one, default=1, help="inference threads (default 1)")
    b.add_argument("--retry-failed", action="store_true", help="measure failed configurations again")
    b.add_argument("--runner", help="custom hardware module as package.module:ClassName")
    b.add_argument("--jobs-dir", default="annette-jobs",
                   help="zcu102: where the per-benchmark job folders are written (default: annette-jobs)")
    b.add_argument("--worker", help="this worker's name in 'annette bench status' (default: <host>-<pid>; job "
                                    "folders: <host>)")
    b.add_argument("--lease", help="how long a claimed configuration stays this worker's without a heartbeat "
                                   "before another worker may take it over, e.g. 60s (default: 60s; job folders: 7d)")
    b.add_argument("--take", type=_at_least_one,
                   help="zcu102 job folders: claim and write at most this many configurations, so that machines "
                        "with their own boards each take a share of one sweep")
    bs = b.add_subparsers(dest="bench_command", metavar="ACTION")
    ex = bs.add_parser("export", help="write the stored measurements as CSV (one row per measured layer)")
    ex.add_argument("--db", default=DEFAULT_DB, help=_DB_HELP.format(default=mask_url(DEFAULT_DB)))
    ex.add_argument("--out", required=True, help="CSV file to write")
    ex.add_argument("-p", "--platform")
    ex.add_argument("-s", "--suite")
    ing = bs.add_parser("ingest", help="store profiler reports copied back from a board (zcu102 job folders; "
                                       "ncs2 benchmark_app reports with --graph)")
    ing.add_argument("reports", nargs="+", metavar="REPORT", help="report files or job folders; with --graph: "
                                                                 "GRAPH REPORT pairs")
    ing.add_argument("-p", "--platform", default="zcu102")
    ing.add_argument("--db", default=DEFAULT_DB, help=_DB_HELP.format(default=mask_url(DEFAULT_DB)))
    ing.add_argument("--graph", action="store_true",
                     help="the arguments are GRAPH REPORT pairs: a network (.onnx or ANNETTE .json) and the "
                          "OpenVINO benchmark_app counters report measured on it (-report_type average_counters "
                          "or detailed_counters)")
    ing.add_argument("--replace", action="store_true", help="with --graph: replace networks already stored")
    st = bs.add_parser("status", help="progress per platform and suite (measured, failed, being measured, "
                                      "remaining) and per worker and machine")
    st.add_argument("--db", default=DEFAULT_DB, help=_DB_HELP.format(default=mask_url(DEFAULT_DB)))
    st.add_argument("-p", "--platform", help="only this platform")


def run(args: argparse.Namespace) -> int:
    """Execute ``annette bench ...``; returns the exit code."""
    from ..bench.store import Store

    cmd = args.bench_command
    if cmd == "export":
        check_output(args.out, "--out")
        with Store(args.db, create=False) as st:
            try:
                n = st.export_csv(args.out, args.platform, args.suite)
            except OSError as e:
                raise AnnetteError(f"cannot write {args.out}: {e.strerror or e}") from None
        print(f"wrote {n} rows to {args.out}")
        return 0
    if cmd == "status":
        from ..bench.claims import progress
        with Store(args.db, create=False) as st:
            print(format_status(progress(st, args.platform), st.label))
        return 0
    if cmd == "ingest":
        return _ingest(args)
    if args.list:
        from ..bench.suites import list_suites
        for name, desc in list_suites().items():
            print(f"{name:<18}{desc}")
        return 0
    if not args.platform or not args.suite:
        raise AnnetteError("give --platform and --suite (or --list, or an action: export, ingest, status)")
    check_output_store(args.db, "--db")
    if not args.runner and PLATFORM_RUNNERS.get(args.platform, ("",))[0] == "vitis":
        check_output_folder(args.jobs_dir, "--jobs-dir")
    return _run_suites(args)


def _runner_for(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    if args.runner:
        return args.runner, {}
    if args.platform not in PLATFORM_RUNNERS:
        raise AnnetteError(f"platform {args.platform!r} cannot be measured here (measurable: "
                           f"{', '.join(PLATFORM_RUNNERS)}; or give --runner package.module:Class)")
    name, kw = PLATFORM_RUNNERS[args.platform]
    kw = dict(kw)
    if name in ("ort-cpu", "openvino"):
        kw["threads"] = args.threads
    return name, kw


def _configs(args: argparse.Namespace, suite_name: str) -> list[dict[str, Any]]:
    from ..bench.suites import SUITES
    if suite_name not in SUITES:
        raise AnnetteError(f"unknown suite {suite_name!r} (see 'annette bench --list')")
    suite = SUITES[suite_name]
    kw: dict[str, Any] = {"seed": args.seed}
    if args.sampler:
        kw["sampler"] = args.sampler
    if args.configs is not None:
        kw["n"] = args.configs
    return suite.configs(**kw)


def _lease(args: argparse.Namespace, default: float) -> float:
    """``--lease`` in seconds (``default`` when not given)."""
    from ..bench.sweep import parse_budget
    value = parse_budget(args.lease, "--lease") if args.lease else default
    assert value is not None
    return value


def _run_suites(args: argparse.Namespace) -> int:
    from ..bench.claims import LEASE_S
    from ..bench.store import Store
    from ..bench.sweep import parse_budget, run_sweep

    budget = parse_budget(args.budget)
    runner, kw = _runner_for(args)
    if runner == "vitis":
        return _write_jobs(args)
    if kw.get("device") == "MYRIAD":
        _check_myriad()
    if runner in RUNNER_MODULES:  # checked here: the sweep's worker process would only say it failed to start
        require(f"'annette bench --platform {args.platform}'", RUNNER_MODULES[runner])
    lease = _lease(args, LEASE_S)
    status = 0
    with Store(args.db) as st:
        for suite in args.suite:
            configs = _configs(args, suite)
            res = run_sweep(st, args.platform, suite, configs, runner, kw, iterations=args.iterations,
                            warmup=args.warmup, timeout_s=args.timeout, budget_s=budget, pack=args.pack,
                            retry_failed=args.retry_failed, progress=True, worker=args.worker, lease_s=lease)
            others = f", {res.by_others} by other workers" if res.by_others else ""
            line = (f"{args.platform}/{suite}: {res.measured} measured, {res.failed} failed, {res.skipped} already "
                    f"stored{others}, {res.seconds:.1f} s ({res.per_second:.2f} configurations/s) -> {st.label}")
            print(line)
            if res.stopped_by_budget:
                print("budget used up; run the same command again to continue")
            if res.interrupted:
                print("interrupted; everything measured so far is stored; run the same command again to resume")
                return 130
            if budget is not None:
                budget = max(budget - res.seconds, 1e-9)
    return status


#: what `_check_myriad` says when no stick can be measured here
NO_MYRIAD = ("ncs2: {why}; measuring needs OpenVINO 2019 R1 - 2022.3 (the last release with the MYRIAD plugin) "
             "and an attached stick. Instead: export the suite's networks, run 'benchmark_app -m MODEL -d MYRIAD "
             "-report_type average_counters' where the stick is, then 'annette bench ingest --platform ncs2 --graph "
             "MODEL REPORT ...' (docs/ncs2-benchmarking.md)")


def _check_myriad() -> None:
    """Stop before measuring on the NCS2 unless OpenVINO lists a MYRIAD device (one error line if not)."""
    try:
        import openvino as ov
    except ImportError:
        raise AnnetteError(NO_MYRIAD.format(why="OpenVINO is not installed")) from None
    version = str(getattr(ov, "__version__", "") or "?").split("-")[0]
    try:
        devices = list(ov.Core().available_devices)
    except Exception as e:  # noqa: BLE001 - a broken plugin set is reported the same way
        raise AnnetteError(NO_MYRIAD.format(why=f"OpenVINO {version} cannot list its devices ({e})")) from None
    if not any(d.startswith("MYRIAD") for d in devices):
        raise AnnetteError(NO_MYRIAD.format(why=f"OpenVINO {version} has no MYRIAD device (devices: "
                                                f"{', '.join(devices) or 'none'})"))


#: how long a configuration written as a job folder stays claimed: until ingested, or this long
JOB_LEASE_S = 7 * 86400.0


def _write_jobs(args: argparse.Namespace) -> int:
    """zcu102: write one job folder per configuration for the vendor toolchain and the board.

    Configurations already in the store are skipped; the others are claimed for this machine (its name, or
    ``--worker``; lease: ``--lease``, default a week) before their folders are written, so that machines with
    their own boards share one sweep (``--take N`` each), the same command again writes the same folders, and
    ``annette bench ingest`` ends the claims.
    """
    import json

    from ..atomic import write_text
    from ..bench.claims import add_plan, claim, release, this_machine
    from ..bench.export import to_onnx
    from ..bench.runners import get_runner
    from ..bench.runners.vitis import write_run_params
    from ..bench.store import Store
    from ..bench.suites import SUITES

    os.makedirs(args.jobs_dir, exist_ok=True)  # its parent exists (checked): only the folder itself is made
    runner = get_runner("vitis", workdir=args.jobs_dir)
    lease = _lease(args, JOB_LEASE_S)
    worker = args.worker or this_machine()
    n = stored = busy = 0
    with Store(args.db) as st:
        for suite in args.suite:
            configs = _configs(args, suite)
            add_plan(st, args.platform, suite, [c["config_id"] for c in configs])
            for c in configs:
                if args.take is not None and n >= args.take:
                    break
                got = claim(st, args.platform, suite, [c["config_id"]], worker, this_machine(), lease_s=lease,
                            again=True)
                stored, busy = stored + len(got.stored), busy + len(got.busy)
                if not got.claimed:
                    continue
                try:
                    job = runner.prepare(to_onnx(SUITES[suite].build(c)))
                    write_run_params(job, args.iterations, args.warmup)
                    write_text(os.path.join(str(job), "annette-job.json"),
                               json.dumps({"platform": args.platform, "suite": suite, "config": c}, indent=1))
                except BaseException:  # no folder: give the claim back rather than hold it for the lease
                    release(st, args.platform, suite, got.claimed, worker)
                    raise
                n += 1
    skipped = [f"{k} {what}" for k, what in ((stored, "already stored"), (busy, "claimed by other workers")) if k]
    print(f"wrote {n} job folders under {args.jobs_dir}" + (f" ({', '.join(skipped)})" if skipped else "")
          + f"; see docs/zcu102-benchmarking.md, then 'annette bench ingest --platform {args.platform} "
          f"--db {mask_url(args.db)} {args.jobs_dir}/*'")
    return 0


def _ingest(args: argparse.Namespace) -> int:
    """Store reports copied back from a board, matched against the benchmark networks they came from."""
    from ..bench.ingest import ingest_benchmark_app, ingest_reports
    check_output_store(args.db, "--db")
    if args.graph:
        if len(args.reports) % 2:
            raise AnnetteError("--graph takes GRAPH REPORT pairs: an odd number of paths was given")
        pairs = list(zip(args.reports[::2], args.reports[1::2]))
        stored, kept = ingest_benchmark_app(pairs, args.platform, args.db, replace_stored=args.replace)
        print(f"ingested {stored} network(s) into {mask_url(args.db)}"
              + (f"; {kept} already stored (--replace to store them again)" if kept else ""))
        return 0
    n_ok, n_fail, n_kept = ingest_reports(args.reports, args.platform, args.db)
    print(f"ingested {n_ok} benchmark(s) into {mask_url(args.db)}"
          + (f"; {n_kept} already stored" if n_kept else "") + (f"; {n_fail} could not be read" if n_fail else ""))
    return 0 if n_ok or n_kept or not n_fail else 1


def _ago(seconds: float) -> str:
    """'12 s ago', '5 min ago', '3 h ago', '2 d ago'."""
    s = max(seconds, 0.0)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if s >= size:
            return f"{s / size:.0f} {unit} ago"
    return f"{s:.0f} s ago"


def _table(head: tuple[str, ...], rows: list[tuple[str, ...]], right: set[int]) -> list[str]:
    """Rows of cells as aligned text lines (columns in ``right`` right-aligned)."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(head)]

    def fmt(cells: tuple[str, ...]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return [fmt(head)] + [fmt(r) for r in rows]


def format_status(prog: Any, label: str) -> str:
    """``annette bench status``: one table per platform and suite, one per worker, one per machine."""
    out = [f"measurement store {label}"]
    if not prog.suites:
        return out[0] + ": nothing stored yet"
    dash = "-"
    out += [""] + _table(
        ("platform", "suite", "planned", "measured", "failed", "measuring", "remaining"),
        [(e.platform, e.suite, dash if e.planned is None else str(e.planned), str(e.ok), str(e.failed),
          str(e.measuring), dash if e.remaining is None else str(e.remaining)) for e in prog.suites],
        {2, 3, 4, 5, 6})
    if prog.workers:
        out += [""] + _table(("worker", "machine", "measured", "failed", "measuring", "last activity"),
                             [(w.worker, w.machine, str(w.ok), str(w.failed), str(w.measuring),
                               _ago(prog.now - w.last) if w.last else dash) for w in prog.workers], {2, 3, 4})
        out += [""] + _table(("machine", "workers", "measured", "failed", "measuring", "last activity"),
                             [(m.machine, str(m.workers), str(m.ok), str(m.failed), str(m.measuring),
                               _ago(prog.now - m.last) if m.last else dash) for m in prog.machines], {1, 2, 3, 4})
    return "\n".join(out)


def add_calibrate_parser(sub: Any) -> None:
    """Add ``annette calibrate``."""
    c = sub.add_parser("calibrate", help="measure a CPU platform on this machine and fit its platform file",
                       description="Run the benchmark suites on this machine, fit the mapping and layer models, "
                                   "calibrate end to end on calibration networks, and write a platform file.")
    c.add_argument("-p", "--platform", required=True, help="ort-cpu or openvino-cpu")
    c.add_argument("--quick", action="store_true", help="a smaller plan (<= 10 minutes on 2 cores)")
    c.add_argument("--out", help="platform file to write (default: <platform>.json in your platform folder, "
                                 "which the platform's name then loads; see 'annette platforms')")
    c.add_argument("--db", help="measurement store, an SQLite file or a database URL (default: "
                                "annette-calibrate-<platform>.sqlite; resumable)")
    c.add_argument("--budget", help="time limit for the benchmark suites, e.g. 30m")


def run_calibrate(args: argparse.Namespace) -> int:
    """Execute ``annette calibrate``."""
    from ..bench.sweep import parse_budget
    from ..fit.calibrate import run_calibration

    check_output(args.out, "--out")
    check_output_store(args.db, "--db")
    rep = run_calibration(args.platform, quick=args.quick, out=args.out, db=args.db,
                          budget_s=parse_budget(args.budget), progress=lambda m: print(m, file=sys.stderr))
    e2e = rep["end_to_end"]
    from ..platform import resolve_platform

    loads = resolve_platform(args.platform) == os.path.abspath(rep["out"])
    print(f"wrote {rep['out']}: {rep['layer_models']} layer models, {rep['rules']} fusion rules; measurements in "
          f"{mask_url(rep['db'])}"
          + (f"; '-p {args.platform}' now loads it" if loads else f"; use it with '-p {rep['out']}'"))
    print(f"end-to-end calibration on {e2e['networks']} networks: leave-one-out MAPE {e2e['loo_mape']:.1%} "
          f"(layer sum alone {e2e['layers_only_mape']:.1%})")
    rc = rep.get("recheck")
    if rc and rc["checked"]:
        print(f"measured again (far slower than the fit predicted): {rc['checked']} configurations, "
              f"{len(rc['replaced'])} faster the second time and replaced")
    print(f"time: benchmarks {rep['seconds_bench']:.0f} s, fitting {rep['seconds_fit']:.0f} s, "
          f"total {rep['seconds_total']:.0f} s")
    return 0
