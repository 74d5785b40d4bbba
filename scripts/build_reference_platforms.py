"""Build the shipped zcu102 platform file from the original ANNETTE release's published models, with its
network-level calibration against the published ZCU102 latencies (ncs2 is fitted from NCS2 reports by
``scripts/build_ncs2_platform.py``).

Run from the repository root: ``python scripts/build_reference_platforms.py [../shared/annette-reference]``.
Every layer model and fusion rule records its origin (file and entry) in the platform file.
"""

from __future__ import annotations

import sys
from pathlib import Path

from annette_torch.platform.annette_compat import layers_from_annette, mapping_from_annette
from annette_torch.platform import Platform

REF = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/annette-reference")
OUT = Path(__file__).resolve().parent.parent / "platforms"

SPECS = {
    "zcu102": dict(
        layers="dnndk-ref_roofline.json", mapping="dnndk.json",
        description="Xilinx ZCU102, DPU B4096 @ ~287 MHz, INT8 (DNNDK): published ANNETTE refined-roofline "
                    "parameters; predicts DPU execution time",
        meta={"device": "Xilinx Zynq UltraScale+ ZCU102, DPU B4096 (DNNDK v3.1)", "precision": "int8",
              "predicts": "DPU execution time per inference (no CPU pre/post-processing)"},
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
        path = OUT / f"{name}.json"
        plat.save(path)
        print(f"wrote {path}: {plat}")


if __name__ == "__main__":
    main()
