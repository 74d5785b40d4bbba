"""Recalibrate a platform file's end-to-end terms on calibration networks pooled over several runs.

A file from `annette calibrate` carries the speed of the machine at the moment it measured its calibration
networks; this shared VM drifts by up to ~8% within half an hour, which moves every prediction of the file
alike. `benchmarks/accuracy.py` measures the same 45 calibration networks in every run (its --cache); the
median of each network's latency over several runs reflects the machine's typical speed. Layer models,
mapping and cache model stay as they are; only ``overhead`` (scale, depthwise scale, per-layer, per-network) is
refitted.

Usage:
  python benchmarks/pooled_calibration.py --platform ort-cpu --file platforms/ort-cpu.json \\
         --cache runA.sqlite runB.sqlite runC.sqlite --out ort-cpu.json
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # annette_torch from a source checkout

import annette_torch as at  # noqa: E402
from annette_torch import validate as V  # noqa: E402
from annette_torch.errors import AnnetteError  # noqa: E402


def pooled_latencies(platform: str, caches: list[str], nets: list) -> np.ndarray:
    """Each network's median latency (ms) over the caches; exits unless every cache measured every network."""
    key = V.machine_key(platform)
    per_run = []
    for path in caches:
        if not pathlib.Path(path).is_file():
            raise SystemExit(f"pooled_calibration: cache {path} not found")
        with V.MeasurementCache(path) as cache:
            per_run.append({n.name: m.median_ms for n in nets
                            if (m := cache.get(platform, n.name, n.fingerprint, key)) is not None})
    missing = sorted({n.name for n in nets} - set.intersection(*(set(r) for r in per_run)))
    if missing:
        raise SystemExit(f"pooled_calibration: {len(missing)} calibration networks are not in every cache "
                         f"(measured with another protocol or machine?): {', '.join(missing[:5])}")
    return np.array([np.median([r[n.name] for r in per_run]) for n in nets])


def main() -> int:
    from accuracy import calibration_set  # the same 45 networks benchmarks/accuracy.py measures

    from annette_torch.fit.calibrate import with_overhead, without_overhead
    from annette_torch.errors import check_writable
    from annette_torch.platform import Platform

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--platform", required=True, choices=["ort-cpu", "openvino-cpu"])
    ap.add_argument("--file", required=True, help="platform file whose layer models are kept")
    ap.add_argument("--cache", required=True, nargs="+", help="accuracy.py measurement caches (one per run)")
    ap.add_argument("--out", required=True, help="platform file to write")
    args = ap.parse_args()
    try:
        check_writable(args.out)
        base = without_overhead(Platform.load(args.file))
        nets = calibration_set()
        y = pooled_latencies(args.platform, args.cache, nets)
        terms = [at.estimate(n.network, base).terms for n in nets]
        plat, loo = with_overhead(base, terms, y, [n.name for n in nets],
                                  origin=f"end-to-end calibration on {len(nets)} calibration networks (never the "
                                         f"validation set), each the median over {len(args.cache)} accuracy runs "
                                         "of its fastest-of-3-rounds latency")
    except AnnetteError as e:
        print(f"pooled_calibration: {e}", file=sys.stderr)
        return 1
    plat.save(args.out)
    o = plat.meta["overhead"]
    dw = f" (depthwise {o['depthwise_scale']:.3f})" if "depthwise_scale" in o else ""
    print(f"wrote {args.out}: scale {o['scale']:.3f}{dw}, per layer {1e3 * o['per_layer_ms']:+.2f} us, per network "
          f"{o['per_network_ms']:.4f} ms; leave-one-out MAPE {loo:.1%} on {len(nets)} networks x "
          f"{len(args.cache)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
