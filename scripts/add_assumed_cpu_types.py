"""Give the shipped CPU platform files models for the layer types their sweeps lacked (Softplus, HardSigmoid,
RowBatchNorm, ChannelShuffle, OpenVINO's PlainMaxPool, PlainAvgPool and Pick, ONNX Runtime's ReduceMean), measured
with the benchmark tool on *this* machine; marked as assumed in the files of other machines.

Run from the repository root::

    python scripts/add_assumed_cpu_types.py [--configs 24] [--types RowBatchNorm] [--dry-run]

Why: without a model of their own these types take a file's generic ``Base`` roofline or the model of the type
they fall back to. ONNX Runtime runs Softplus as scalar code (~40 times its Tanh per element): YOLOv4's Mish
made ort-cpu predict a third of the measured time. A BatchNorm over token rows (LeViT's, after every Linear)
runs as one per-column pass, not as a feature map's per-channel planes: priced with the BatchNorm model,
OpenVINO's is ~5x too slow. OpenVINO runs a channel shuffle (view, transpose, view back) as one
``ShuffleChannels`` node, ~1 ns per element, which the files' rules fused into the Concat at no cost (ShuffleNet
V2 priced 35% low). OpenVINO pools a plain tensor (PoolFormer's, after a GroupNorm) ~2.2x slower per element
than a convolution's map, which its files' pool models were measured on. It runs a pick of a fused q / k / v
projection's leading axis (``qkv[i]``) in place, which a Slice model fitted on channel slices of feature maps
priced at up to 11 ms in Swin-T (`fit.generator.IN_PLACE_RATE`: a type that took no time in nearly all of its
measured layers gets a model of no time). A mean over one axis (ReduceMean: the two-step spatial means of
TensorFlow graphs' squeeze-excite blocks) took ~60 us per layer in ONNX Runtime where the ``Base`` roofline, less
the per-layer term, priced it at 0 (MobileNetV3's 26 of them, 1.6 ms of 17). ``annette calibrate`` sweeps these
types now; the shipped files were measured before, so these models are the next best thing, labelled: a model
measured on another machine has an ``origin`` beginning with ``assumed:`` (the per-layer ``model`` column shows
``(assumed)``) that names the machine and runtime it was measured on.

Steps, per platform and type: configurations of the type's suite (`MEASURED`) are measured per layer (the same
hardware module and settings as ``annette calibrate``: one thread), the layer's time is matched back to it, a
roofline is fitted by least squares on log time, and every shipped file of the platform
(``platforms/<name>.json`` and ``platforms/machines/<name>/*.json``) gets it unless it has a model of that
type already. A type only a pattern fold produces (`FOLDED`: ChannelShuffle) comes with its fold, and only for a
runtime whose measured records run the pattern as the fold says (``annette_torch.fit.data.learned_folds``: OpenVINO
does, ONNX Runtime runs a Reshape, a Transpose and a Reshape). A type in `ONLY` (the plain pools) is measured and
added for the runtimes named there only. Files are written atomically.
"""

from __future__ import annotations

import argparse
import glob
import json
import re
import sys
from pathlib import Path
from typing import Callable

import numpy as np

from annette_torch.atomic import write_text
from annette_torch.bench.runners import get_runner
from annette_torch.bench.suites import SUITES
from annette_torch.bench.sweep import measure as measure_config
from annette_torch.cli.bench import PLATFORM_RUNNERS
from annette_torch.fit.data import Measured, learned_folds
from annette_torch.fit.generator import IN_PLACE_RATE, in_place_model
from annette_torch.fit.roofline_fit import fit_refined
from annette_torch.fit.statistical_fit import fit_mixed
from annette_torch.ir import Network
from annette_torch.mapping import FOLDS
from annette_torch.models import LayerFeatures
from annette_torch.platform import Platform
from annette_torch.platform.machine import differing_fields, machine_description
from annette_torch.platform.platform import dumps_platform
from annette_torch.validate.measure import runtime_info

ROOT = Path(__file__).resolve().parent.parent
#: layer-type key of the platform file -> (suite, the measured layers' names in it (a regular expression), which
#: configurations)
MEASURED: dict[str, tuple[str, str, Callable[[dict], bool]]] = {
    "Softplus": ("act", "softplus", lambda c: c["act"] == "softplus"),
    "HardSigmoid": ("act", "hardsigmoid", lambda c: c["act"] == "hardsigmoid"),
    "RowBatchNorm": ("linear_bn", "bn", lambda c: True),
    "ChannelShuffle": ("shuffle", r"u\d+_shuffle_view_back", lambda c: True),
    "PlainMaxPool": ("maxpool", "pool", lambda c: c.get("lead", "none") == "none"),
    "PlainAvgPool": ("avgpool", "pool", lambda c: c.get("lead", "none") == "none"),
    "Pick": ("pick", "[qkv]", lambda c: True),
    "ReduceMean": ("reduce", "reduce", lambda c: True),
}
#: types measured for some runtimes only: a pool of a plain tensor is typed apart only without layout costs, as
#: OpenVINO's files have (`annette_torch.mapping.layout.map_kernel_types`; the suite's pool reads the graph input, a
#: plain tensor); ONNX Runtime runs q, k and v picks as one Split, which its profile charges to one of the three (a
#: per-layer model of them is ill-posed; its Slice model prices the copy), OpenVINO runs them in place. OpenVINO's
#: means over one axis fit no model (60 layers on an AMD EPYC with AVX-512: cross-validated error 54%, where its
#: Base roofline priced the transformer-era networks' reductions within their measured latencies)
ONLY = {"PlainMaxPool": ("openvino-cpu",), "PlainAvgPool": ("openvino-cpu",), "Pick": ("openvino-cpu",),
        "ReduceMean": ("ort-cpu",)}
#: types only a pattern fold produces: the fold (`annette_torch.mapping.folds`) a file needs with the model
FOLDED = {"ChannelShuffle": "shuffle"}
#: smallest layer measured: smaller ones take about the profiler's 1 us resolution
MIN_ELEMENTS = 16384
PLATFORMS = ("ort-cpu", "openvino-cpu")
#: layers from which the roofline gets a statistical correction (a mixed model, as ``annette calibrate`` fits):
#: OpenVINO's channel shuffle takes 0.5 to 1.2 ns per element, slowest for few channels on a large map
MIN_MIXED = 60


def _elements(suite: str, c: dict) -> int:
    if suite == "shuffle":
        return int(c["c"] * c["hw"] * c["hw"])
    if suite == "pick":
        return int(c["w"] * c["l"] * c["h"] * c["d"])
    return int(c["l"] * c["f"]) if suite == "linear_bn" else int(c["c"] * c["h"] * c["w"])


def measure(platform: str, key: str, n: int) -> tuple[LayerFeatures, np.ndarray, tuple[str, ...]]:
    """Per-layer times (ms) of ``n`` configurations of type ``key``'s suite, their layers' features and the pattern
    folds their records support, measured as ``annette calibrate`` measures (the platform's hardware module, one
    thread)."""
    suite_name, layer, select = MEASURED[key]
    name, kw = PLATFORM_RUNNERS[platform]
    runner = get_runner(name, **{**kw, "threads": 1})
    suite = SUITES[suite_name]
    configs = [c for c in suite.configs(n=80 * n, seed=0)
               if select(c) and _elements(suite_name, c) >= MIN_ELEMENTS][:n]
    results = [measure_config(suite_name, c, runner) for c in configs]
    nets = [suite.build(c) for c in configs]
    records = [{r.layer: r for r in res.layers} for res in results]
    folds, _ = learned_folds([Measured(suite_name, c["config_id"], nt, rec, [])
                              for c, nt, rec in zip(configs, nets, records)])
    pattern = re.compile(layer)
    times = [rec[name].time_ms for nt, rec in zip(nets, records) for name in nt.names if pattern.fullmatch(name)]
    net, _ = Network.concat(nets)
    rows = np.flatnonzero([pattern.fullmatch(name) is not None for name in net.names])
    return LayerFeatures.from_network(net, rows), np.array(times), folds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=24, help="configurations measured per type and platform")
    ap.add_argument("--types", default=",".join(MEASURED), help=f"types to add (default {','.join(MEASURED)})")
    ap.add_argument("--dry-run", action="store_true", help="measure and print, write nothing")
    args = ap.parse_args(argv)
    keys = [k.strip() for k in args.types.split(",") if k.strip()]
    unknown = [k for k in keys if k not in MEASURED]
    if unknown:
        ap.error(f"unknown type(s) {', '.join(unknown)}; choose from {', '.join(MEASURED)}")
    machine = machine_description()
    for platform in PLATFORMS:
        info = runtime_info(platform)
        runtime = f"{info['runtime']} {info['version']}, 1 thread"
        models, folds = {}, {}
        for key in keys:
            if platform not in ONLY.get(key, PLATFORMS):
                continue
            X, y, learned = measure(platform, key, args.configs)
            if key in FOLDED and FOLDED[key] not in learned:
                print(f"{platform} {key}: {info['runtime']} does not run the pattern as one node (no "
                      f"'{FOLDED[key]}' fold): not added")
                continue
            if key in FOLDED:
                folds[key] = FOLDED[key]
            measured = (f"{len(y)} {MEASURED[key][0]}-suite layers measured on {machine} ({runtime}) with "
                        "annette-torch's benchmark tool (scripts/add_assumed_cpu_types.py)")
            idle = float(np.mean(y <= 0))
            if idle >= IN_PLACE_RATE:
                print(f"{platform} {key}: {len(y)} layers, {idle:.0%} of them took no time: in place")
                models[key] = {**in_place_model().to_dict(), "origin": f"{measured}: {idle:.0%} took no time, "
                                                                       "run in place"}
                continue
            model, _ = fit_refined(X, y, dims=())
            how = "a roofline"
            if len(y) >= MIN_MIXED:
                model, rep = fit_mixed(X, y, model)
                how = f"a mixed model (cross-validated error {rep['cv_mape'][rep['chosen']]:.1f}%)"
            pred = model.predict(X)
            mre = float(np.mean(np.abs(pred / y - 1)))
            per, unit = (X.ops, "operation") if (X.ops > 0).all() else (X.out_elems, "output element")
            print(f"{platform} {key}: {len(y)} layers, {float(np.median(y * 1e6 / per)):.2f} ns per {unit} "
                  f"(median), {how}, fit error {mre:.1%}")
            d = model.to_dict()
            d["origin"] = f"{measured}, fitted as {how}, mean error {mre:.1%}"
            models[key] = d
        if not models:
            continue
        files = [ROOT / "platforms" / f"{platform}.json",
                 *sorted(Path(p) for p in glob.glob(str(ROOT / "platforms" / "machines" / platform / "*.json")))]
        for path in files:
            d = json.loads(path.read_text(encoding="utf-8"))
            here = not differing_fields(d.get("fingerprint") or {}) and bool(d.get("fingerprint"))
            added = [k for k in models if k not in d["layers"]]
            for k in added:
                if k in folds:  # (in `FOLDS` order, as a fitted file lists them)
                    have = set(d["mapping"].get("folds", ())) | {folds[k]}
                    d["mapping"]["folds"] = [f for f in FOLDS if f in have]
                origin = models[k]["origin"]
                d["layers"][k] = {**models[k], "origin": origin if here else
                                  f"assumed: not measured on this file's machine; {origin}"}
            if added and not args.dry_run:
                Platform.from_dict(d, str(path))  # still a valid platform
                write_text(path, dumps_platform(d) + "\n")
            print(f"  {path.relative_to(ROOT)} ({'this machine' if here else 'assumed'}): "
                  f"{'added ' + ', '.join(added) if added else 'has them already'}"
                  + (" (dry run)" if args.dry_run and added else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
