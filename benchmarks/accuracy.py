"""Accuracy of annette-torch's platform models: predicted vs measured whole-network latency.

Usage:
  python benchmarks/accuracy.py --platform ort-cpu|openvino-cpu [--db measurements.sqlite]
         [--cache accuracy-cache.sqlite] [--variants-dir DIR] [--quick] [--plots DIR] [--per-network]
  python benchmarks/accuracy.py --platform ort-cpu|openvino-cpu --adapt [--with-calibrate quick,full]
  python benchmarks/accuracy.py --platform zcu102-dnndk
  python benchmarks/accuracy.py --platform zcu102-vai3 [--calibration-dir ../shared/calibration]

ort-cpu / openvino-cpu: builds the validation set (zoo architectures, the ANNETTE reference graphs that
convert and export, random NAS-Bench-101 cells; none of them used in fitting), measures each network's
end-to-end latency with the platform's runtime settings (1 thread; the fastest of 3 rounds -- passes over all
networks, as `annette calibrate` measures its calibration networks -- of the median of 30 runs; the end-to-end
calibration networks are measured in the same passes, interleaved, so a drift of the machine's speed during
the run moves validation and calibration alike; cached in
--cache, so a re-run or an interrupted run measures only what is missing; start a new cache after changing
the protocol), predicts every
network with every platform variant and prints, side by side, MAPE, share within +-10 % and Spearman rho on
real architectures, on NAS cells and overall, plus the measurement noise floor (spread of the repeat
medians). Variants: the platform files ``<variant>.json`` in --variants-dir, else
``annette_torch.fit.generator.fit_variants(--db, platform)`` (flops, roofline, refined, statistical, mixed,
mixed+mapping). --quick: networks up to 4 GOPs, 10 NAS cells, 20 runs per repeat.

--adapt: the learning curve of ``annette adapt`` on the validation networks: the shipped file adapted from
N = 0, 1, 3, 5, 14 networks measured here (in the same passes as the validation networks, so a
drift of the machine's speed moves both alike), with the wall time of a real ``annette adapt`` run for each
(``--with-calibrate quick,full`` adds ``annette calibrate`` runs beside it).

zcu102-dnndk: the leave-one-out report of the network-level calibration against the published end-to-end
latencies (``annette_torch.fit.calibrate_network.loo_report``), then a hold-out check: the shipped
platform's ``latency_ms`` against the published latencies (same table of the Xilinx model zoo, same board and
DNNDK release) of the reference-graph networks outside its calibration set (``benchmarks/data/
zcu102_holdout_published.csv``, each row citing its source line).

zcu102-vai3: the cross-validated accuracy of the Vitis AI 3.0 platform's fit
(``annette_torch.fit.zcu102_vai3.cv_report``): 5-fold over the 500 Accel-NASBench candidates (``device_ms``)
and leave-one-out over the 13 model-zoo networks (``latency_ms``), each fold refitting the layer models and
end-to-end terms without its networks; beside the MACs proxy validated the same way and the DNNDK ``zcu102-dnndk``
platform on the same networks; then whether the shipped file's ``accuracy`` section holds the same figures.
Takes about ten minutes (18 fits).
"""

from __future__ import annotations

import argparse
import csv
import logging
import os
import pathlib
import sys
import time

import numpy as np

import annette_torch as at
from annette_torch import validate as V  # noqa: E402
from annette_torch.errors import AnnetteError  # noqa: E402

#: median spread between a network's rounds above which a run is too noisy to judge the models by (clean
#: runs on the 2-core VMs: 3-6%; runs during a spell of steps in the machine's speed: 17-27%)
NOISY_SPREAD = 0.10
#: Report order of the model generator's variants (others follow, sorted).
VARIANT_ORDER = ("flops", "roofline", "refined", "statistical", "mixed", "mixed+mapping")


def ordered(names):
    known = [v for v in VARIANT_ORDER if v in names]
    return known + sorted(v for v in names if v not in VARIANT_ORDER)


def get_variants(args) -> dict:
    """{variant: Platform} from --variants-dir, else from the model generator."""
    if args.variants_dir:
        d = pathlib.Path(args.variants_dir)
        files = {p.stem: p for p in sorted(d.glob("*.json"))}
        if not files:
            raise SystemExit(f"accuracy: no <variant>.json platform files in {d}")
        return V.load_variants({k: files[k] for k in ordered(files)})
    try:
        from annette_torch.fit.generator import fit_variants
    except ImportError:
        raise SystemExit("accuracy: annette_torch.fit.generator.fit_variants is not available; give "
                         "--variants-dir DIR with <variant>.json platform files") from None
    if not os.path.isfile(args.db):
        raise SystemExit(f"accuracy: measurement store {args.db} not found (run `annette bench` first, or give "
                         "--variants-dir)")
    t = time.perf_counter()
    res = fit_variants(args.db, args.platform)
    variants = res[0] if isinstance(res, tuple) else res  # ({variant: Platform}, report) or {variant: Platform}
    print(f"fitted {len(variants)} variants from {args.db} in {time.perf_counter() - t:.1f} s")
    return V.load_variants({k: variants[k] for k in ordered(variants)})


HOLDOUT_ZCU102 = pathlib.Path(__file__).resolve().parent / "data" / "zcu102_holdout_published.csv"


def zcu102_holdout() -> None:
    """The shipped zcu102-dnndk platform's latency_ms against published latencies of networks it was not calibrated on."""
    from scipy.stats import spearmanr

    from annette_torch.bench.suites import reference_dir
    from annette_torch.estimator import estimate
    from annette_torch.fit.calibrate_network import load_published_zcu102
    from annette_torch.platform import load_platform

    if reference_dir() is None:
        print("hold-out: skipped (../shared/annette-reference not found)")
        return
    plat = load_platform("zcu102-dnndk")
    fitted_on = set(plat.end_to_end.fitted_on if plat.end_to_end is not None else ())
    with open(HOLDOUT_ZCU102, encoding="utf-8") as f:
        notes = {r["graph"]: r["note"] for r in csv.DictReader(f)}
    rows = []
    for g, net, pub in load_published_zcu102(table=HOLDOUT_ZCU102):
        if g in fitted_on:
            raise SystemExit(f"{HOLDOUT_ZCU102}: {g} is in the platform's calibration set")
        est = estimate(net, plat)
        rows.append((g, pub, est.device_ms, est.latency_ms, notes[g]))
    print(f"\nhold-out: {plat.source} (calibrated on {len(fitted_on)} networks) against the published latencies of "
          f"{len(rows)} others")
    print(f"{'graph':22s} {'published ms':>12s} {'device ms':>10s} {'latency ms':>10s} {'error':>8s}")
    for g, pub, dev, lat, note in rows:
        print(f"{g:22s} {pub:12.2f} {dev:10.2f} {lat:10.2f} {100 * (lat / pub - 1):+7.1f}%" + (f"  ({note})" if note else ""))
    pub = np.array([r[1] for r in rows])
    lat = np.array([r[3] for r in rows])
    err = lat / pub - 1
    print(f"hold-out: MAPE {100 * np.mean(np.abs(err)):.1f}%, within +-10% {int(np.sum(np.abs(err) <= 0.1))} of "
          f"{len(rows)}, Spearman {spearmanr(pub, lat)[0]:.3f}")


def zcu102_report() -> int:
    """Leave-one-out table of the zcu102-dnndk network-level calibration against the published latencies."""
    from scipy.stats import spearmanr

    from annette_torch.fit.calibrate_network import loo_report

    rep = loo_report()
    rows = rep["rows"]
    print("zcu102-dnndk: network-level calibration against the published end-to-end latencies, leave-one-out")
    print(f"{'graph':22s} {'measured ms':>11s} {'layer model':>11s} {'LOO pred':>9s} {'LOO err':>8s}")
    for r in rows:
        print(f"{r['graph']:22s} {r['measured_ms']:11.2f} {r['layer_model_ms']:11.2f} {r['loo_pred_ms']:9.2f} "
              f"{100 * r['loo_error']:+7.1f}%")
    err = np.array([r["loo_error"] for r in rows])
    rho = spearmanr([r["measured_ms"] for r in rows], [r["loo_pred_ms"] for r in rows])[0]
    print(f"uncalibrated MAPE {100 * rep['uncalibrated_mape']:.1f}%, in sample {100 * rep['in_sample_mape']:.1f}%")
    print(f"leave-one-out: MAPE {100 * rep['loo_mape']:.1f}%, within +-10% {100 * np.mean(np.abs(err) <= 0.1):.0f}%, "
          f"Spearman {rho:.3f}")
    print(f"calibration: {rep['calibration'].coef}")
    zcu102_holdout()
    return 0


def zcu102_vai3_report(calibration_dir: str | None) -> int:
    """Cross-validated figures of the zcu102-vai3 fit beside the MACs proxy and the DNNDK platform, and whether the
    shipped file records the same ones."""
    from annette_torch.bench.suites import reference_dir
    from annette_torch.fit import zcu102_vai3 as Z
    from annette_torch.platform import load_platform

    if calibration_dir is None:
        ref = reference_dir()
        if ref is None:
            print("zcu102-vai3: ../shared/calibration not found; give --calibration-dir", file=sys.stderr)
            return 1
        calibration_dir = os.path.join(os.path.dirname(str(ref)), "calibration")
    nas_csv = os.path.join(calibration_dir, "accel-nasbench", "zcu102_nas_candidates.csv")
    zoo_csv = os.path.join(calibration_dir, "zcu102_vitis_ai_3.0_published.csv")
    t = time.perf_counter()
    rep = Z.cv_report(nas_csv, zoo_csv, progress=lambda s: print(f"  refit without {s}", file=sys.stderr, flush=True))
    print(f"zcu102-vai3: cross-validated accuracy ({time.perf_counter() - t:.0f} s)")
    print("\nzoo networks, latency_ms, leave-one-out:")
    ref_col = next((k for k in rep["zoo_rows"][0] if k.endswith("_ms") and k not in
                    ("measured_ms", "loo_pred_ms", "macs_proxy_ms")), None)
    print(f"{'network':50s} {'published':>9s} {'LOO pred':>9s} {'err':>7s} {'MACs':>7s}" + (f" {ref_col[:-3]:>8s}" if ref_col else ""))
    for r in rep["zoo_rows"]:
        line = (f"{r['network']:50s} {r['measured_ms']:9.2f} {r['loo_pred_ms']:9.2f} "
                f"{100 * (r['loo_pred_ms'] / r['measured_ms'] - 1):+6.1f}% {r['macs_proxy_ms']:7.2f}")
        print(line + (f" {r[ref_col]:8.2f}" if ref_col else ""))
    shipped = load_platform("zcu102-vai3").meta.get("accuracy", {})
    same = True
    for key, title, rec in (("nas", "NAS candidates, device_ms, 5-fold", "nas_device_ms"),
                            ("zoo", "zoo networks, latency_ms, leave-one-out", "zoo_latency_ms")):
        print(f"\n{title}:")
        print(f"{'model':14s} {'MAPE':>7s} {'within 10%':>10s} {'Spearman':>9s} {'n':>4s}")
        for model, m in rep[key].items():
            print(f"{model:14s} {100 * m['mape']:6.1f}% {100 * m['within_10']:9.0f}% {m['spearman']:9.3f} {m['n']:4d}")
            old = shipped.get(rec, {}).get(model)
            if old is not None and (abs(old["mape"] - m["mape"]) > 5e-4 or abs(old["spearman"] - m["spearman"]) > 5e-4):
                same = False
    print("\nshipped platform file: " + ("records the same figures" if same else
                                          "records DIFFERENT figures (rerun scripts/build_zcu102_vai3_platform.py)"))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--platform", required=True, choices=["ort-cpu", "openvino-cpu", "zcu102", "zcu102-dnndk", "zcu102-vai3"])
    ap.add_argument("--calibration-dir", help="zcu102-vai3: folder of the board data (default ../shared/calibration)")
    ap.add_argument("--db", default="measurements.sqlite", help="benchmark store the variants are fitted from")
    ap.add_argument("--cache", default="accuracy-cache.sqlite", help="whole-network measurement cache (SQLite)")
    ap.add_argument("--variants-dir", help="folder of <variant>.json platform files (instead of fitting)")
    ap.add_argument("--quick", action="store_true", help="networks <= 4 GOPs, 10 NAS cells, 20 runs per repeat")
    ap.add_argument("--plots", metavar="DIR", help="write pred-vs-measured and roofline PNGs here")
    ap.add_argument("--csv", metavar="FILE", help="write the per-network table as CSV")
    ap.add_argument("--per-network", action="store_true", help="print every network's measured and predicted ms")
    ap.add_argument("--kinds", default="zoo,reference,nb101", help="comma-separated subset of zoo,reference,nb101,modern (modern: the architectures of the 2020s, "
                         "reported apart)")
    ap.add_argument("--n-nb101", type=int, help="NAS-Bench-101 cells (default 50; 10 with --quick)")
    ap.add_argument("--seed", type=int, default=V.VALIDATION_SEED, help="seed of the NAS-cell sample")
    ap.add_argument("--max-gops", type=float, help="leave out networks above this size (default: none; 4 with --quick)")
    ap.add_argument("--runs", type=int, help="timed inferences per repeat (default 30; 20 with --quick)")
    ap.add_argument("--repeats", type=int, default=1, help="consecutive repeats per network and round (default 1)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="passes over all networks; each network's fastest counts (default 3)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--remeasure-above", type=float, default=10.0, metavar="PCT",
                    help="measure a network once more when its repeat spread exceeds PCT %% (default 10; 0 = off)")
    ap.add_argument("--no-calibrate", action="store_true",
                    help="compare the layer models' sums as they are (default: every variant gets the same end-to-end "
                         "calibration: scale, per-layer dispatch, constant, fitted on calibration networks that are "
                         "not in the validation set)")
    ap.add_argument("--shipped", metavar="FILE", help="also compare this (already calibrated) platform file")
    ap.add_argument("--adapt", action="store_true",
                    help="learning curve of 'annette adapt': the shipped file (--shipped, default the platform's "
                         "shipped default file) adapted from N = 0, 1, 3, 5, 14 networks measured here")
    ap.add_argument("--with-calibrate", default="", metavar="PLANS",
                    help="with --adapt: also run 'annette calibrate' with these plans (quick,full) and score them")
    ap.add_argument("-v", "--verbose", action="store_true", help="log which networks are skipped and why")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.verbose:
        logging.getLogger("annette_torch.validate").setLevel(logging.INFO)
    else:  # reference graphs that are skipped anyway need no warnings about their unsupported layers
        logging.getLogger("annette_torch.frontends").setLevel(logging.ERROR)

    if args.platform == "zcu102-dnndk":
        return zcu102_report()
    if args.platform in ("zcu102", "zcu102-vai3"):  # (zcu102: the current toolchain's platform, zcu102-vai3)
        try:
            return zcu102_vai3_report(args.calibration_dir)
        except AnnetteError as e:
            print(f"accuracy: {e}", file=sys.stderr)
            return 1

    n_nb101 = args.n_nb101 if args.n_nb101 is not None else (10 if args.quick else 50)
    max_gops = args.max_gops if args.max_gops is not None else (4.0 if args.quick else None)
    runs = args.runs if args.runs is not None else (20 if args.quick else 30)
    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())

    try:
        variants = {} if args.adapt else get_variants(args)
        t = time.perf_counter()
        nets = V.validation_networks(kinds, n_nb101=n_nb101, seed=args.seed, max_gops=max_gops)
        t_build = time.perf_counter() - t
        counts = {k: sum(v.kind == k for v in nets) for k in kinds}
        print(f"validation set: {len(nets)} networks ({', '.join(f'{k} {n}' for k, n in counts.items())}), "
              f"built in {t_build:.1f} s")
        print(f"variants: {', '.join(variants)}")

        from tqdm import tqdm
        errors: dict[str, str] = {}
        stats: dict[str, int] = {}
        # calibration networks interleaved with the validation networks in every round: a drift of the
        # machine's speed during the run then moves both alike instead of biasing the calibration
        cal = (sum(adapt_sets(adapt_base(args)).values(), []) if args.adapt else
               [] if args.no_calibrate else calibration_set())
        bar = tqdm(total=len(nets) + len(cal), unit="net", file=sys.stderr, dynamic_ncols=True,
                   desc=f"measuring on {args.platform}")

        def progress(v, m, cached):
            bar.set_postfix_str(f"{v.name} {m.median_ms:.2f} ms" if m is not None else f"{v.name} failed")
            bar.update(1)

        t = time.perf_counter()
        with V.MeasurementCache(args.cache) as cache:
            measured = V.measure_all(interleave(nets, cal), args.platform, cache, runs=runs, repeats=args.repeats,
                                     warmup=args.warmup, progress=progress, errors=errors, stats=stats,
                                     rounds=args.rounds,
                                     remeasure_above=args.remeasure_above / 100 if args.remeasure_above > 0 else None)
        bar.close()
        t_meas = time.perf_counter() - t
        new_s = sum(m.seconds for name, m in measured.items())
        print(f"measured {stats['measured']} networks ({stats['remeasured']} again for a spread above "
              f"{args.remeasure_above:g}%), {stats['cached']} from cache {args.cache}, {stats['failed']} failed: "
              f"{t_meas:.1f} s wall; measuring all {len(measured)} uncached takes {new_s:.0f} s "
              f"({runs} runs x {args.repeats} repeats x {args.rounds} rounds, {args.warmup} warm-up)")
        for name, msg in errors.items():
            print(f"  failed: {name}: {msg}")
        free = max((os.cpu_count() or 1) - 1, 1)
        busy = sorted(n for n, m in measured.items() if m.busy == m.busy and m.busy >= free)
        if busy:
            print(f"WARNING: {len(busy)} of {len(measured)} networks were measured while other processes kept the "
                  f"machine busy (load average - 1 >= {free}), so every repeat may be slowed alike (the spread "
                  f"does not show it): {', '.join(busy[:8])}{' ...' if len(busy) > 8 else ''}. "
                  "Re-measure on an idle machine (a new --cache).")
        spreads = sorted(m.spread for m in measured.values())
        if spreads and spreads[len(spreads) // 2] > NOISY_SPREAD:
            print(f"WARNING: the median spread between rounds is {spreads[len(spreads) // 2]:.0%} (above "
                  f"{NOISY_SPREAD:.0%}): the machine's speed moved during the run and each network keeps its "
                  "fastest round, so the comparison below mostly shows that noise. Re-measure in a quiet "
                  "stretch (a new --cache).")

        cal_meas = {c.name: measured.pop(c.name) for c in cal if c.name in measured}
        walls: dict[str, float] = {}
        if args.adapt:
            variants, walls = adapt_curve(args, cal_meas)
        elif not args.no_calibrate:
            variants = calibrate_variants(variants, cal, cal_meas)
        if args.shipped:
            variants["shipped"] = at.load_platform(args.shipped)
        cmp = V.compare(variants, nets, measured)
    except AnnetteError as e:
        print(f"accuracy: {e}", file=sys.stderr)
        return 1

    print()
    print(f"{args.platform}: predicted vs measured whole-network latency "
          f"(real = zoo + ANNETTE reference graphs, nb101 = NAS-Bench-101 cells)")
    print(cmp.format())
    if "modern" in cmp.kinds and any(k != "modern" for k in cmp.kinds):
        print("\nclassic (zoo, reference graphs, NAS cells) and transformer-era (modern) networks:")
        print(classic_vs_modern(cmp))
    if walls:
        print("\nwall time to produce each file on this machine: "
              + ", ".join(f"{k} {v:.0f} s" for k, v in walls.items()))
    if args.per_network:
        print()
        cols = list(cmp.predicted)
        print(f"{'network':28s} {'meas ms':>9s} {'spread%':>7s} {'busy':>5s} " + " ".join(f"{c[:13]:>13s}" for c in cols))
        for r in cmp.rows():
            print(f"{r['network'][:28]:28s} {r['measured_ms']:9.3f} {r['spread_pct']:7.2f} {r['busy']:5.2f} "
                  + " ".join(f"{r[c]:13.3f}" if abs(r[c]) < 1e8 else f"{r[c]:13.3g}" for c in cols))
    if args.csv:
        rows = cmp.rows()
        with open(args.csv, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["network"])
            w.writeheader()
            w.writerows(rows)
        print(f"per-network table -> {args.csv}")
    if args.plots:
        write_plots(args, cmp, variants)
    return 0


#: networks measured by each point of the ``--adapt`` learning curve (0: the file as shipped; 14: the default)
ADAPT_CURVE = (0, 1, 3, 5, 14)


def adapt_base(args) -> str:
    """The platform file ``--adapt`` adapts: ``--shipped`` or the platform's shipped file."""
    from annette_torch.platform import platform_dir

    return args.shipped or str(platform_dir() / f"{args.platform}.json")


def adapt_sets(base: str) -> dict[int, list]:
    """The networks ``annette adapt`` of ``base`` measures for each N of `ADAPT_CURVE` (covering the types the file
    models; `adaptation_networks`), as measurable networks named ``adapt<N>/<name>``, so that they are measured in
    the validation networks' own passes."""
    from annette_torch.fit.calibrate import _validation_hashes, adaptation_networks, modelled_types

    cover = modelled_types(at.load_platform(base))
    return {n: [CalibrationNet(f"adapt{n}/{c.name}", "calibration", c, (1, 3, 224, 224))
                for c in adaptation_networks(n, exclude_hashes=_validation_hashes(), cover=cover)]
            for n in ADAPT_CURVE[1:]}


def adapt_curve(args, meas: dict) -> tuple[dict, dict]:
    """The shipped file adapted from N calibration networks for each N of `ADAPT_CURVE`, fitted on their
    measurements taken interleaved with the validation networks' (``meas``: a drift of the machine's speed
    then moves both alike); the wall time of each point is that of a real ``annette adapt`` run, measuring.
    Optionally ``annette calibrate`` runs (``--with-calibrate``)."""
    import tempfile

    import numpy as np

    from annette_torch.fit.adapt import adapt
    from annette_torch.fit.kind_sweep import measure_factors

    shipped = adapt_base(args)
    variants, walls = {"shipped (N=0)": at.load_platform(shipped)}, {"shipped (N=0)": 0.0}
    # each N as the command runs it (with its micro-kernel sweep); the largest N also without. The real run
    # (its wall time) sweeps; the run on the interleaved measurements takes the factors it measured
    for n, sweep in [(n, True) for n in ADAPT_CURVE[1:]] + [(ADAPT_CURVE[-1], False)]:
        found: dict = {}
        swept = (lambda raw, ests: found.update(measure_factors(raw, args.platform, ests)) or found) if sweep \
            else False
        wall = adapt(shipped, networks=n, save=False, sweep=swept).seconds
        res = adapt(shipped, networks=n, save=False, sweep=(lambda raw, ests: found) if sweep else False,
                    measure=lambda nets, n=n: np.array([meas[f"adapt{n}/{x.name}"].median_ms for x in nets]))
        key = f"adapt N={n}" + ("" if sweep else " no sweep")
        variants[key], walls[key] = res.platform, wall
        print(f"  {key}: {wall:.1f} s, in-sample MAPE {res.mape_after:.1%}, refitted: {res.fitted()}"
              + (f"; expected {res.by_kind()} (leave-one-out)" if res.expected() else "")
              + (f"; by family {res.by_family()} ({res.by_kind(unlike=True)})" if res.family_mape else ""))
    for plan in [p.strip() for p in args.with_calibrate.split(",") if p.strip()]:
        from annette_torch.fit.calibrate import run_calibration

        with tempfile.TemporaryDirectory() as tmp:
            t = time.perf_counter()
            rep = run_calibration(args.platform, quick=plan == "quick", out=os.path.join(tmp, "p.json"),
                                  db=os.path.join(tmp, "m.sqlite"))
            key = f"calibrate {plan}"
            variants[key], walls[key] = at.load_platform(rep["out"]), time.perf_counter() - t
    return variants, walls


def calibration_set() -> list:
    """The end-to-end calibration networks (`annette_torch.fit.calibrate.calibration_networks`, never validation
    networks) as measurable networks."""
    from annette_torch.fit.calibrate import _validation_hashes, calibration_networks

    return [CalibrationNet(n.name, "calibration", n, (1, 3, 224, 224)) for n in
            calibration_networks(45, exclude_hashes=_validation_hashes())]


class CalibrationNet(V.ValidationNet):
    """A calibration network as measurable: a transformer-era one through the ONNX export of its module (as
    ``annette calibrate`` measures it), any other through the IR."""

    def to_onnx(self):
        from annette_torch.fit.calibration_modern import measurable

        model = measurable(self.network)
        return super().to_onnx() if model is self.network else model


def classic_vs_modern(cmp) -> str:
    """Per variant, the classic networks' (zoo, reference graphs, NAS cells) and the transformer-era networks'
    (kind ``modern``) MAPE, share within +-10 % and Spearman rho, side by side."""
    from annette_torch.validate.accuracy import metrics

    kinds = np.asarray(cmp.kinds, dtype=object)
    groups = {"classic": kinds != "modern", "modern": kinds == "modern"}
    w = max(len(v) for v in cmp.predicted) + 2
    lines = [" " * w + "".join(f"| {g + f' (n={int(k.sum())})':^25s}" for g, k in groups.items()),
             f"{'variant':<{w}s}" + f"| {'MAPE%':>7s} {'±10%':>7s} {'rho':>7s} " * len(groups)]
    for v, pred in cmp.predicted.items():
        cells = []
        for k in groups.values():
            m = metrics(pred[k], cmp.measured_ms[k])
            cells.append(f"| {m['mape_pct']:7.1f} {m['within10_pct']:7.0f} {m['spearman']:7.3f} ")
        lines.append(f"{v:<{w}s}" + "".join(cells))
    return "\n".join(lines)


def interleave(a: list, b: list) -> list:
    """``a`` and ``b`` merged evenly (each keeps its order), so both are measured over the same stretch of time:
    every item sorted by its relative position within its own list."""
    keyed = [((i + 0.5) / len(a), 0, i) for i in range(len(a))] + [((k + 0.5) / len(b), 1, k) for k in range(len(b))]
    return [(a, b)[side][j] for _, side, j in sorted(keyed)]


def calibrate_variants(variants: dict, cal: list, meas: dict, origin: str = "end-to-end calibration") -> dict:
    """Give every variant the same network-level calibration, fitted on the calibration networks' measurements
    (a variant file that is already calibrated is calibrated anew from its raw layer-model sums); ``origin``: what
    the fitted terms record they come from."""
    from annette_torch.fit.calibrate import with_overhead, without_overhead

    names = [c.name for c in cal if c.name in meas]
    y = [meas[n].median_ms for n in names]
    out = {}
    for k, plat in variants.items():
        plat = without_overhead(plat)
        terms = [at.estimate(c.network, plat).terms for c in cal if c.name in meas]
        out[k], loo = with_overhead(plat, terms, y, names, origin)
        print(f"  {k}: end-to-end calibration on {len(names)} calibration networks, LOO MAPE {loo:.1%}")
    return out


def write_plots(args, cmp, variants) -> None:
    from annette_torch.plots import plot_pred_vs_measured, plot_roofline
    out = pathlib.Path(args.plots)
    groups = ["nb101" if k == "nb101" else "real" for k in cmp.kinds]
    p = plot_pred_vs_measured({v: (cmp.predicted[v], cmp.measured_ms) for v in cmp.predicted},
                              out / f"pred_vs_measured-{args.platform}.png", groups=groups,
                              title=f"{args.platform}: predicted vs measured ({len(cmp.names)} networks)")
    print(f"plot -> {p}")
    key = next((k for k in ("roofline", "refined", "mixed+mapping", "mixed") if k in variants), next(iter(variants)))
    layers = None
    if os.path.isfile(args.db):
        try:
            layers = V.store_layer_points(args.db, args.platform)
            if not len(layers["ops"]):
                layers = None
        except AnnetteError as e:
            print(f"  (no measured layers from {args.db}: {e})")
    p = plot_roofline(variants[key], layers, out / f"roofline-{args.platform}.png",
                      title=f"{args.platform}: roofline of variant '{key}'"
                            + (f", layers measured in {os.path.basename(args.db)}" if layers is not None else ""))
    print(f"plot -> {p}")


if __name__ == "__main__":
    sys.exit(main())
