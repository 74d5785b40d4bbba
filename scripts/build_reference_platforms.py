"""Build the shipped ``zcu102-dnndk`` platform file (the ZCU102 under DNNDK v3.1) from the original ANNETTE release's published models, with its
network-level calibration against the published ZCU102 latencies (ncs2 is fitted from NCS2 reports by
``scripts/build_ncs2_platform.py``).

Run from the repository root: ``python scripts/build_reference_platforms.py [../shared/annette-reference]``.
Every layer model and fusion rule records its origin (file and entry) in the platform file; the file also
carries the DPU's operator support (`ZCU102_SUPPORT`) with the documents it follows.
"""

from __future__ import annotations

import sys
from pathlib import Path

from annette_torch.fit.zcu102_vai3 import a53_host
from annette_torch.platform.annette_compat import layers_from_annette, mapping_from_annette
from annette_torch.platform import Platform

REF = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/annette-reference")
OUT = Path(__file__).resolve().parent.parent / "platforms"

#: B4096: 16 channels in parallel; the DPU's channel limits are 256 * channel_parallel
_CH = 256 * 16
#: activations the DPU applies in a convolution's epilogue (RELU_LEAKYRELU_RELU6 configuration)
_CONV_ACT = ["Relu", "Relu6", "LeakyRelu"]
_CONV = {"kernel": [1, 16], "stride": [1, 4], "c_in": [1, _CH], "c_out": [1, _CH], "dilation_x_c_in": [1, _CH],
         "activations": _CONV_ACT}
_A53 = ("one Arm Cortex-A53 core of the ZCU102's XCZU9EG (UG1182) at the 1.2 GHz the DNNDK board image runs it, "
        "as in the single-thread published latencies")
#: Which layers DNNDK v3.1 runs on the ZCU102's DPU (B4096), which it leaves to the Arm host, and what the host
#: and a switch between them cost (see annette_torch.mapping.support and docs/platform-format.md).
ZCU102_SUPPORT = {
    "origin": (
        "Xilinx PG338 v3.0 (DPU for Convolutional Neural Network v3.0, 2019-08-13; the DPU IP of the DNNDK v3.1 "
        "board images), table of the deep neural network features and parameters the DPU supports, with "
        "channel_parallel = 16 for B4096 (channel limits 256 * 16 = 4096, fully connected input 2048 * 16); "
        "UG1327 v1.6 (DNNDK User Guide): DNNC compiles the supported layers into DPU kernels and leaves the rest "
        "to the Arm CPU. The same engine's later table (UG1414 v1.4.1, DPUCZDX8G_ISA0_B4096, Vitis AI) allows "
        "strides up to 8. Not in the v3.0 table, so on the host: element-wise multiply (PG338 v3.4 lists "
        "Elementwise-Multiply; v3.0 has element-wise sum only), upsampling, channel slices, transposes, LRN, "
        "grouped convolutions other than depthwise and every activation besides ReLU, ReLU6 and LeakyReLU. "
        "Softmax runs on the DPU's softmax module after a kernel (dpuRunSoftmax) over a vector of class scores; a "
        "softmax over a feature map (attention's scores) is not a DPU layer and runs on the host. "
        "BatchNorm is folded by the tool chain, Pad is folded into the "
        "next layer's padding, a mean over the whole feature map (TensorFlow's Mean in SE blocks and heads) is "
        "an average pool, a 1x1 average pool a copy. GlobalPool has no kernel limit: the "
        "calibration networks cf_squeezenet (14x14), cf_reid (5x3) and cf_SPnet (7x4) pool outside the "
        "average-pool table and their published end-to-end latencies, which the end_to_end model fits (its "
        "cpu_tail term: host work after the last convolution), hold wherever DNNDK ran them."),
    "accelerator": {
        "Conv": _CONV,
        "ConvPool": _CONV,
        "DepthwiseConv": {**_CONV, "activations": ["Relu", "Relu6"]},
        "ConvTranspose": {"kernel": [1, 16], "stride": [1, 16], "c_in": [1, _CH], "c_out": [1, _CH],
                          "activations": ["Relu", "LeakyRelu"]},
        "FullyConnected": {"c_in": [1, 2048 * 16]},
        "MaxPool": {"kernel": [1, 8], "stride": [1, 4]},
        "AvgPool": {"kernel": [1, 8], "square": True, "stride": [1, 4]},
        "GlobalPool": {},
        "ReduceMean": {"h_out": [1, 1], "w_out": [1, 1]},
        "Add": {"c_out": [1, _CH], "activations": ["Relu"]},
        "Concat": {},
        "BatchNorm": {},
        "Relu": {},
        "Relu6": {},
        "LeakyRelu": {},
        "Softmax": {"h_out": [1, 1], "w_out": [1, 1]},
        "Pad": {},
    },
    "host": a53_host(_A53, ("Sigmoid", "SiLU", "Tanh", "GELU", "Softplus")),
    "switch": {"ms": 0.1, "bandwidth": 2.5e8, "bit_act": 8,
               "origin": "assumed: one more DPU task launched and waited for through the DNNDK runtime (0.1 ms), "
                         "and the crossing INT8 tensor converted to or from FP32 by one A53 core (4 ns per "
                         "element)"},
}

SPECS = {
    "zcu102": dict(
        layers="dnndk-ref_roofline.json", mapping="dnndk.json",
        description="Xilinx ZCU102, DPU B4096 @ ~287 MHz, INT8 (DNNDK): published ANNETTE refined-roofline "
                    "parameters; predicts DPU execution time. Operator support from Xilinx PG338 v3.0 and UG1327 "
                    "v1.6: layers the DPU cannot run execute on the Arm Cortex-A53 host",
        meta={"device": "Xilinx Zynq UltraScale+ ZCU102, DPU B4096 (DNNDK v3.1)", "precision": "int8",
              "predicts": "DPU execution time per inference (no CPU pre/post-processing), plus the Arm host's time "
                          "for layers the DPU cannot run and the switches to them"},
        support=ZCU102_SUPPORT,
    ),
}


def calibrate_zcu102(plat: Platform) -> Platform:
    """Add the network-level calibration against the published end-to-end latencies (Xilinx model zoo)."""
    from annette_torch.fit.calibrate_network import loo_report

    rep = loo_report(plat)
    cal = rep["calibration"]
    cal.predicts = ("whole-application latency with one thread (DPU plus host pre/post-processing), as in the "
                    "Xilinx AI-Model-Zoo README; calibrated on ../shared/calibration/zcu102_dnndk_e2e_published.csv")
    d = plat.to_dict()
    d["end_to_end"] = {**cal.to_dict(), "loo_mape": round(rep["loo_mape"], 4),
                       "in_sample_mape": round(rep["in_sample_mape"], 4),
                       "uncalibrated_mape": round(rep["uncalibrated_mape"], 4)}
    print(f"zcu102 end-to-end calibration: LOO MAPE {rep['loo_mape']:.1%} (layer models alone "
          f"{rep['uncalibrated_mape']:.1%})")
    return Platform.from_dict(d, "zcu102")


#: the DNNDK model's shipped name (``zcu102`` names the current toolchain's platform, zcu102-vai3)
DNNDK_ALIAS = "zcu102-dnndk"


def write_dnndk_alias(plat: Platform) -> Platform:
    """``zcu102-dnndk``: the DNNDK v3.1 platform under a name that keeps meaning DNNDK whichever toolchain
    ``zcu102`` names, with its toolchain release and latency definitions stated."""
    d = plat.to_dict()
    d["name"] = DNNDK_ALIAS
    extra = {"toolchain": "DNNDK v3.1",
             "latency_definitions": {
                 "device_ms": "the DPU's execution time per inference from the published ANNETTE layer models (no "
                              "CPU pre/post-processing), plus the Arm host's time for layers the DPU cannot run",
                 "latency_ms": d["end_to_end"]["predicts"]}}
    head = {k: d[k] for k in ("schema", "schema_version", "name", "description")}
    alias = Platform.from_dict({**head, **extra, **{k: v for k, v in d.items() if k not in head}}, DNNDK_ALIAS)
    alias.save(OUT / f"{DNNDK_ALIAS}.json")
    print(f"wrote {OUT / f'{DNNDK_ALIAS}.json'}: {alias}")
    return alias


def main() -> None:
    for name, spec in SPECS.items():
        layers = layers_from_annette(REF / "models" / "layer" / spec["layers"])
        mapping = mapping_from_annette(REF / "models" / "mapping" / spec["mapping"])
        plat = Platform(name, layers, mapping, spec["description"], {
            **spec["meta"],
            "source": {"layers": f"annette-reference/models/layer/{spec['layers']}",
                       "mapping": f"annette-reference/models/mapping/{spec['mapping']}",
                       "paper": "Wess et al., ANNETTE, IEEE Access 2021",
                       "license": "original data Apache-2.0 (embedded-machine-learning/annette)"},
            "notes": [
                "op_s in operations per second (2 ops per MAC), bandwidth in bytes per second, time in ms.",
                "Layer types without an entry use the first present key of their fallback chain "
                "(e.g. MaxPool -> Pool -> Base, ConvPool -> Conv); the original sent them to Base with zero "
                "operations.",
                "Refined roofline: per-dimension efficiency 1/((1-alpha)+alpha/u), u = n/(ceil(n/s)*s), "
                "h = output height (the original used the output width for Conv).",
            ],
        })
        if name == "zcu102":
            plat = calibrate_zcu102(plat)
        if "support" in spec:  # after the calibration: its networks run on the DPU alone
            plat = Platform.from_dict({**plat.to_dict(), "support": spec["support"]}, name)
        if name == "zcu102":  # shipped under its toolchain's name: `zcu102` itself is the current toolchain's
            write_dnndk_alias(plat)
            continue
        path = OUT / f"{name}.json"
        plat.save(path)
        print(f"wrote {path}: {plat}")


if __name__ == "__main__":
    main()
