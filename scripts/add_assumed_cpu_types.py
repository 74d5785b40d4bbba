"""Give the shipped CPU platform files models for the activation types their sweeps lacked (Softplus,
HardSigmoid), measured with the benchmark tool on *this* machine and marked as assumed for theirs.

Run from the repository root::

    python scripts/add_assumed_cpu_types.py [--configs 24] [--dry-run]

Why: without a model of their own these types take a file's generic ``Base`` roofline, and ONNX Runtime runs
Softplus as scalar code (~40 times its Tanh per element): YOLOv4's Mish made ort-cpu predict a third of the
measured time. ``annette calibrate`` sweeps both types now; the shipped files were measured on other
machines, so these models are the next best thing, labelled: their ``origin`` begins with ``assumed:`` (the
per-layer ``model`` column shows ``(assumed)``) and names the machine and runtime they were measured on.

Steps, per platform: the ``act`` suite's configurations of each kind are measured per layer (the same
hardware module and settings as ``annette calibrate``: one thread), the activation's time is matched back
to its layer, a roofline is fitted by least squares on log time, and every shipped file of the platform
(``platforms/<name>.json`` and ``platforms/machines/<name>/*.json``) gets it unless it has a model of that
type already. Files are written atomically.
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
from pathlib import Path

import numpy as np

from annette_torch.atomic import write_text
from annette_torch.bench.runners import get_runner
from annette_torch.bench.suites import SUITES
from annette_torch.bench.suites.layers import ACT_TYPES
from annette_torch.bench.sweep import measure as measure_config
from annette_torch.cli.bench import PLATFORM_RUNNERS
from annette_torch.fit.roofline_fit import fit_refined
from annette_torch.ir import Network
from annette_torch.models import LayerFeatures
from annette_torch.platform import Platform
from annette_torch.platform.machine import machine_description
from annette_torch.platform.platform import dumps_platform
from annette_torch.validate.measure import runtime_info

ROOT = Path(__file__).resolve().parent.parent
#: act-suite kind -> layer-type key of the platform file
KINDS = {"softplus": "Softplus", "hardsigmoid": "HardSigmoid"}
#: smallest layer measured: smaller ones take about the profiler's 1 us resolution
MIN_ELEMENTS = 16384
PLATFORMS = ("ort-cpu", "openvino-cpu")


def measure(platform: str, kind: str, n: int) -> tuple[LayerFeatures, np.ndarray]:
    """Per-layer times (ms) of ``n`` act-suite configurations of ``kind``, and their layers' features, measured
    as ``annette calibrate`` measures (the platform's hardware module, one thread)."""
    name, kw = PLATFORM_RUNNERS[platform]
    runner = get_runner(name, **{**kw, "threads": 1})
    suite = SUITES["act"]
    configs = [c for c in suite.configs(n=80 * n, seed=0)
               if c["act"] == kind and c["c"] * c["h"] * c["w"] >= MIN_ELEMENTS][:n]
    times = [{r.layer: r for r in measure_config("act", c, runner).layers}[kind].time_ms for c in configs]
    net, _ = Network.concat([suite.build(c) for c in configs])
    return LayerFeatures.from_network(net, np.flatnonzero(net.types == ACT_TYPES[kind])), np.array(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=24, help="configurations measured per type and platform")
    ap.add_argument("--dry-run", action="store_true", help="measure and print, write nothing")
    args = ap.parse_args(argv)
    machine = machine_description()
    for platform in PLATFORMS:
        info = runtime_info(platform)
        runtime = f"{info['runtime']} {info['version']}, 1 thread"
        models = {}
        for kind, key in KINDS.items():
            X, y = measure(platform, kind, args.configs)
            model, _ = fit_refined(X, y, dims=())
            pred = model.predict(X)
            mre = float(np.mean(np.abs(pred / y - 1)))
            per_elem = float(np.median(y * 1e6 / X.ops)) if (X.ops > 0).all() else float("nan")
            print(f"{platform} {key}: {len(y)} configs, {per_elem:.2f} ns per element (median), fit error {mre:.1%}")
            d = model.to_dict()
            d["origin"] = (f"assumed: not measured on this file's machine; {len(y)} act-suite layers measured on "
                           f"{machine} ({runtime}) with annette-torch's benchmark tool "
                           f"(scripts/add_assumed_cpu_types.py), fitted as a roofline, mean error {mre:.1%}")
            models[key] = d
        files = [ROOT / "platforms" / f"{platform}.json",
                 *sorted(Path(p) for p in glob.glob(str(ROOT / "platforms" / "machines" / platform / "*.json")))]
        for path in files:
            d = json.loads(path.read_text(encoding="utf-8"))
            added = [k for k in models if k not in d["layers"]]
            for k in added:
                d["layers"][k] = models[k]
            if added and not args.dry_run:
                Platform.from_dict(d, str(path))  # still a valid platform
                write_text(path, dumps_platform(d) + "\n")
            print(f"  {path.relative_to(ROOT)}: {'added ' + ', '.join(added) if added else 'has them already'}"
                  + (" (dry run)" if args.dry_run and added else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
