"""Build the shipped ncs2 platform from the measured NCS2 benchmark_app reports (the ANNETTE flow).

Run from the repository root::

    python scripts/build_ncs2_platform.py [--reports ../shared/ncs2-reports] [--ref ../shared/annette-reference]

Steps: each report is parsed and matched against its ANNETTE graph and stored (``annette bench ingest
--platform ncs2 --graph ...`` into a temporary database), the model generator fits the platform
(`annette_torch.fit.ncs2`), leave-one-network-out and the published ANNETTE model's errors on the same
networks are computed, and ``platforms/ncs2.json`` is written atomically with the MYRIAD plugin's operator
support (`NCS2_SUPPORT`). Top-level keys of the existing file that this build does not produce are kept.
Prints the accuracy table of docs/accuracy.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

from annette_torch.bench.ingest import ingest_benchmark_app
from annette_torch.bench.store import Store
from annette_torch.fit.ncs2 import (ASSUMED, PUBLISHED_TYPES, fit_ncs2, leave_one_network_out,
                                    load_graph_measurements, published_errors, published_platform)
from annette_torch.platform import Platform
from annette_torch.platform.platform import dumps_platform

ROOT = Path(__file__).resolve().parent.parent
#: report file -> ANNETTE graph it measured (../shared/ncs2-reports/README.md)
REPORTS = {
    "tf_resnet50_imagenet_224_224_6.97G_avg_cnt_rep.csv": "tf_resnet50.json",
    "tf_inceptionv1_imagenet_224_224_3G_avg_cnt_rep.csv": "tf_inceptionv1.json",
    "cf_inceptionv3_imagenet_299_299_11.4G_avg_cnt_rep.csv": "cf_inceptionv3.json",
    "cf_inceptionv4_imagenet_299_299_24.5G_avg_cnt_rep.csv": "cf_inceptionv4.json",
}
#: top-level keys this build owns: not carried over from the existing file when the fit does not produce them
BUILT = {"overhead", "fit_report", "end_to_end", "fingerprint", "cache", "support"}
#: the assumed host of a stick: OpenVINO's HETERO plugin runs what MYRIAD lacks on the user's own CPU
_HOST = ("one core of a modest x86 laptop CPU (about 2.5 GHz, AVX2) running OpenVINO's CPU plugin under "
         "HETERO:MYRIAD,CPU")
#: Which layers the MYRIAD plugin runs on the stick and which OpenVINO's HETERO plugin leaves to the host CPU
#: (see annette_torch.mapping.support and docs/platform-format.md).
NCS2_SUPPORT = {
    "origin": (
        "OpenVINO Inference Engine documentation, Supported Devices -> Supported Layers, VPU column (the MYRIAD "
        "plugin; openvinotoolkit/openvino docs/IE_DG/supported_plugins/Supported_Devices.md as of the 2021.4 "
        "and 2022.1 releases; the stick was measured with the 2019 plugin): Convolution (ordinary, dilated, "
        "grouped), Deconvolution, FullyConnected, Gemm, Pooling (AVG, MAX), BatchNormalization, Activation "
        "(ReLU, ReLU6, Leaky ReLU, Sigmoid, TanH, Clamp), Softplus, Eltwise (Sum, Sub, Mul, Div), Concat, "
        "Permute, Interp / Resample, Pad, Crop / StridedSlice, SoftMax, LRN, ReduceMean, MVN, and the "
        "element-wise math of the IR's Elementwise layers (Exp, Log, Erf, Power (pow, sqrt), Abs, Floor, Ceil, "
        "Sign, Activation-ELU, Select (where), Eltwise comparisons, Max / Min): Supported (Neg, Reciprocal, Sin, "
        "Cos and Selu are Not Supported, but an Elementwise layer does not tell them apart: it stays on the stick); "
        "HardSigmoid: Not Supported (runs on the host). 2D layers only (3D convolutions and pools are Not "
        "Supported; the IR holds 2D layers). SiLU, HardSwish and GELU are not rows of the table: the Model "
        "Optimizer writes them with supported layers (Sigmoid and Eltwise-Mul; Clamp and Eltwise; Erf) and "
        "later releases have MYRIAD kernels for them, so they stay on the stick. The layers of attention "
        "networks all run on the stick: MatMul as Gemm (Supported), Softmax as SoftMax (Supported), LayerNorm "
        "as MVN (Supported*, a fixed eps), GELU through Erf (Supported), Transpose as Permute (Supported), "
        "Resize as Interp / Resample (Supported), dilated convolutions as Convolution-Dilated (Supported); "
        "none of them is in the measured networks but the 1000-class SoftMax heads, so their costs are "
        "'assumed: ...' (see each model's origin)."),
    "accelerator": {t: {} for t in (
        "Conv", "DepthwiseConv", "GroupConv", "ConvTranspose", "FullyConnected", "MatMul", "MaxPool", "AvgPool",
        "GlobalPool", "BatchNorm", "Relu", "Relu6", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "Softplus", "SiLU",
        "HardSwish", "GELU", "Add", "Sub", "Mul", "Div", "Concat", "Transpose", "Resize", "Pad", "Slice",
        "Softmax", "LRN", "ReduceMean", "LayerNorm", "Elementwise")},
    "host": {
        "device": f"assumed host: {_HOST}",
        "layers": {"Base": {"model": "roofline", "op_s": 2.0e10, "bandwidth": 1.0e10, "bit_act": 32, "bit_weights": 32,
                            "origin": f"assumed: {_HOST}; FP32, 8 operations per cycle (a quarter of the AVX2 FMA "
                                      "peak), 10 GB/s streamed by one core"}},
    },
    "switch": {"ms": 0.5, "bandwidth": 2.0e8, "bit_act": 16,
               "origin": "assumed: one more MYRIAD infer request and USB round trip per crossing (0.5 ms), the FP16 "
                         "tensor over USB 3.0 at 200 MB/s"},
}
#: what a stick user sees besides the device time (documented, not modelled: no end-to-end measurement)
END_TO_END_NOTE = (
    "latency_ms is the device time (the reports' Total: the sum of the stages the MYRIAD plugin times on the "
    "stick). A synchronous inference on the host also pays the USB transfer of the input and output tensors "
    "and the plugin's request handling; with several infer requests in flight (benchmark_app's throughput "
    "mode) those overlap with the device time. No end-to-end measurement was available, so no end_to_end "
    "model is shipped.")


def description() -> str:
    assumed = ", ".join(sorted(ASSUMED))
    return ("Intel Neural Compute Stick 2 (Myriad X VPU, OpenVINO MYRIAD plugin), FP16: fitted from benchmark_app "
            "per-layer reports of ResNet-50, Inception v1, v3 and v4 measured on a stick (ANNETTE authors); "
            "convolutions, pools, fully connected layers run on the Neural Compute Engine, element-wise layers "
            "(Sum, ReLU, copies, softmax) as SHAVE software stages. Not in the measured networks: "
            f"{', '.join(PUBLISHED_TYPES)} use the published ANNETTE ncs2 model (model origin 'published: ...'; "
            "a depthwise convolution therefore as a roofline at 3.2e11 op/s and 5.7e9 B/s); "
            f"{assumed} are assumed to run as SHAVE stages at the measured rate of the kernel named in their "
            "origin ('assumed: ...'), so an SE block costs its global pool (measured), its 1x1 convolutions "
            "(measured Conv model) and an assumed SHAVE multiply, and a hard-swish an assumed SHAVE activation; "
            "LayerNorm and Softmax as three such passes over their tensor, MatMul at the measured fully connected "
            "bandwidth and the SHAVE convolutions' compute rate, dilated convolutions as ordinary ones. "
            "Operator support from OpenVINO's Supported Layers table (VPU column): layers the MYRIAD plugin lacks "
            "(HardSigmoid) run on the host CPU through the HETERO plugin")


def _table(loo: dict[str, Any], pub: dict[str, Any]) -> str:
    lines = ["| network | measured (ms) | fitted, left out (ms) | error | published model (ms) | error |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, v in loo["networks"].items():
        p = pub["networks"][name]
        lines.append(f"| {name} | {v['measured_ms']:.2f} | {v['estimated_ms']:.2f} | {v['error']:+.1%} | "
                     f"{p['estimated_ms']:.2f} | {p['error']:+.1%} |")
    lines += ["", "| layer type | measured (ms) | fitted, left out (ms) | error | published model (ms) | error |",
              "|---|---:|---:|---:|---:|---:|"]
    for lab, v in sorted(loo["types"].items(), key=lambda kv: -kv[1]["measured_ms"]):
        if v["measured_ms"] < 0.05:
            continue
        p = pub["types"].get(lab, {"estimated_ms": float("nan"), "error": None})
        pe = f"{p['error']:+.1%}" if p.get("error") is not None else "-"
        lines.append(f"| {lab} | {v['measured_ms']:.2f} | {v['estimated_ms']:.2f} | {v['error']:+.1%} | "
                     f"{p['estimated_ms']:.2f} | {pe} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reports", default="../shared/ncs2-reports", type=Path)
    ap.add_argument("--ref", default="../shared/annette-reference", type=Path)
    ap.add_argument("--out", default=ROOT / "platforms" / "ncs2.json", type=Path)
    ap.add_argument("--no-loo", action="store_true", help="skip the leave-one-network-out evaluation")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    warnings.filterwarnings("ignore", message=".*unsupported layer types.*")
    pairs = [(str(args.ref / "graphs" / g), str(args.reports / r)) for r, g in REPORTS.items()]
    pub = published_platform(args.ref)
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "ncs2.sqlite")
        ingest_benchmark_app(pairs, "ncs2", db)
        with Store(db) as st:
            measured = load_graph_measurements(st, "ncs2")
    fit = fit_ncs2(measured, pub)
    report: dict[str, Any] = {"in_sample_error": {k: round(v, 4) for k, v in fit.report["in_sample"].items()},
                              "per_layer_ms": fit.report["per_layer_ms"]}
    if not args.no_loo:
        loo = leave_one_network_out(measured, pub, progress=lambda m: print(m, file=sys.stderr))
        perr = published_errors(measured, pub)
        report["leave_one_network_out_error"] = {k: round(v["error"], 4) for k, v in loo["networks"].items()}
        report["published_model_error"] = {k: round(v["error"], 4) for k, v in perr["networks"].items()}
        print(_table(loo, perr))
    old: dict[str, Any] = {}
    if args.out.is_file():
        old = json.loads(args.out.read_text(encoding="utf-8"))
    meta = {
        "device": "Intel Movidius Myriad X (NCS2), OpenVINO MYRIAD plugin",
        "precision": "fp16",
        "predicts": ("VPU device time per inference (the benchmark_app report's Total), no USB transfer; plus the "
                     "host CPU's time for layers the MYRIAD plugin lacks and the switches to them"),
        "source": {"measurements": "ncs2-reports/*.csv (benchmark_app -report_type average_counters, OpenVINO "
                                   "2019 MYRIAD plugin; embedded-machine-learning/inference_modules 5b792a7)",
                   "graphs": "annette-reference/graphs/{tf_resnet50,tf_inceptionv1,cf_inceptionv3,cf_inceptionv4}.json",
                   "published": "annette-reference/models/layer/ncs2-ref_roofline.json, models/mapping/ov.json",
                   "builder": "scripts/build_ncs2_platform.py"},
        "notes": [
            "op_s in operations per second (2 ops per MAC), bandwidth in bytes per second, time in ms.",
            "Each layer model's origin says how it was made: 'fitted: ...' (from the measurements, with where the "
            "layers ran), 'published: ...' (ANNETTE's ncs2 model, type not measured), 'assumed: ...' (type not "
            "measured, costed like the named measured kernel).",
            "A per-stage overhead (overhead.per_layer_ms) was searched on 0-0.05 ms and is present only when the "
            "data choose more than 0 (fit_report.per_layer_ms); mapping.costs.inserted_input is the input "
            "conversion stage (<Extra> Convert) the plugin runs per inference.",
            END_TO_END_NOTE,
        ],
        "fit_report": report,
    }
    report["input_conversion"] = fit.report["input_conversion"]
    extra = {"overhead": fit.platform.meta["overhead"]} if "overhead" in fit.platform.meta else {}
    d = Platform("ncs2", fit.platform.layers, fit.platform.mapping, description(),
                 {**meta, **extra, "support": NCS2_SUPPORT}).to_dict()
    for k, v in old.items():  # keep what other builds put there
        if k not in d and k not in BUILT:
            d[k] = v
    d = {k: d[k] for k in [*[k for k in d if k not in ("layers", "mapping")], "layers", "mapping"]}
    Platform.from_dict(d, str(args.out))  # validate before writing
    tmp_path = args.out.with_suffix(".json.tmp")
    tmp_path.write_text(dumps_platform(d) + "\n", encoding="utf-8")
    tmp_path.replace(args.out)
    print(f"wrote {args.out}: in-sample error {report['in_sample_error']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
