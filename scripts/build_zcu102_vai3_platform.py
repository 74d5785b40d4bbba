"""Fit the shipped ``zcu102-vai3`` platform (ZCU102, Vitis AI 3.0) from real-board latencies and write it.

Run from the repository root: ``python scripts/build_zcu102_vai3_platform.py [../shared/calibration]``.
Data: ``accel-nasbench/zcu102_nas_candidates.csv`` (VART device time of 500 NAS candidates) and
``zcu102_vitis_ai_3.0_published.csv`` (the Vitis AI 3.0 model zoo's end-to-end latency of 13 networks). The
fit, its cross-validation (5 folds over the NAS candidates, leave-one-out over the zoo networks) and the
comparison with the MACs proxy and the DNNDK ``zcu102-dnndk`` platform are `annette_torch.fit.zcu102_vai3`'s; the
figures go into the file's ``accuracy`` section, and ``benchmarks/accuracy.py --platform zcu102-vai3``
recomputes them. Takes about ten minutes (19 fits).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from annette_torch.fit import zcu102_vai3 as Z
from annette_torch.platform import Platform

CAL = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/calibration")
OUT = Path(__file__).resolve().parent.parent / "platforms" / "zcu102-vai3.json"
NAS_CSV = CAL / "accel-nasbench" / "zcu102_nas_candidates.csv"
ZOO_CSV = CAL / "zcu102_vitis_ai_3.0_published.csv"

DEVICE_MS = ("one inference through the VART runner with the input already pre-processed in memory, one "
             "thread (what Accel-NASBench measured on the board; DPU execution plus the runtime's per-inference "
             "cost)")
LATENCY_MS = ("whole-application latency with one thread (image pre-processing, DPU, post-processing on the A53), "
              "as the Vitis AI 3.0 model zoo publishes it (1000 / fps_1thread); end-to-end terms fitted on the 13 "
              "networks of zcu102_vitis_ai_3.0_published.csv")


def _fmt(m: dict) -> dict:
    return {"mape": round(m["mape"], 4), "within_10": round(m["within_10"], 3), "spearman": round(m["spearman"], 4),
            "n": m["n"]}


def main() -> None:
    t0 = time.perf_counter()
    ds = Z.Dataset.of(Z.load_nas_candidates(NAS_CSV), Z.load_zoo_published(ZOO_CSV))
    fit = Z.fit_all(ds)
    print(f"fitted on {len(ds.nets)} networks in {time.perf_counter() - t0:.0f} s")
    rep = Z.cv_report(NAS_CSV, ZOO_CSV, progress=lambda s: print(f"  cross-validation: {s}", flush=True))
    dev, e2e = Z.predict(ds, fit)
    nas, zoo = ~ds.zoo, ds.zoo
    cal = fit.calibration
    cal.predicts = LATENCY_MS
    cal.loo_mape = round(rep["zoo"]["zcu102-vai3"]["mape"], 4)
    end_to_end = {**cal.to_dict(), "in_sample_mape": round(Z.metrics(e2e[zoo], ds.y[zoo])["mape"], 4)}
    meta = {
        "description": "Xilinx ZCU102, 3 x DPUCZDX8G B4096 @ 281 MHz, INT8 (Vitis AI 3.0): roofline layer models "
                       "fitted on real-board latencies of 500 Accel-NASBench candidates and 13 Vitis AI model-zoo "
                       "networks; operator support from UG1414 v3.0 and PG338",
        "toolchain": "Vitis AI 3.0",
        "device": "Xilinx Zynq UltraScale+ ZCU102 (board 0432055-05), 3 x DPUCZDX8G_ISA1_B4096 @ 281 MHz; a "
                  "single-thread runner uses one of the three cores",
        "precision": "int8",
        "predicts": "device_ms: " + DEVICE_MS + "; latency_ms: " + LATENCY_MS,
        "latency_definitions": {"device_ms": DEVICE_MS, "latency_ms": LATENCY_MS},
        "source": {
            "nas": "Accel-NASBench (Afzal et al. 2024; afzalxo/Accel-NASBench, anb_dataset_jsons.tar.gz, Apache-2.0): "
                   "latency_zcu102 of 500 candidates, DPUCZDX8G_ISA1_B4096, Vitis AI 2.5 (same figures as 3.0 "
                   "per the authors), one thread, VART",
            "zoo": "Xilinx Vitis AI 3.0 model zoo, ModelZoo_VAI3.0_Github.xlsx (Xilinx/Vitis-AI@2057c588), "
                   "fps_1thread of 13 classification networks on ZCU102",
            "fit": "scripts/build_zcu102_vai3_platform.py (annette_torch.fit.zcu102_vai3)",
        },
        "notes": [
            "op_s in operations per second (2 ops per MAC), bandwidth in bytes per second, time in ms.",
            "Only whole networks were measured: every layer model keeps its roofline form and its parameters are "
            "fitted so that the executed layers' sum (plus the per-layer and per-inference launch costs of "
            "'overhead') reproduces the measured latencies; the NAS candidates and the zoo networks are fitted "
            "together, each set weighing half.",
            "Squeeze-excitation pools over maps larger than 56x56 are priced as the A53 summing the map (support."
            "accelerator.GlobalPool kernel [1, 56]): on the board they cost about twice per element what smaller "
            "ones do. This limit is a reading of the measurements, not of Xilinx's documentation.",
            "Sigmoid and SiLU run on the DPU as the hard-sigmoid / hard-swish the Vitis AI quantizers replace them "
            "by, so a network using them is priced as its hard version.",
        ],
        "accuracy": {
            "method": f"{Z.FOLDS}-fold cross-validation over the NAS candidates (device_ms; folds drawn with seed "
                      f"{Z.SEED}, each fold predicted by a fit on the others and all zoo networks) and leave-one-out "
                      "over the zoo networks (latency_ms; layer models and end-to-end terms refitted without the "
                      "network). macs_proxy: latency linear in MACs, validated the same way; zcu102: the DNNDK "
                      "platform (device_ms on the NAS candidates, latency_ms on the zoo networks) as shipped. "
                      "Recomputed by benchmarks/accuracy.py --platform zcu102-vai3.",
            "nas_device_ms": {k: _fmt(v) for k, v in rep["nas"].items()},
            "zoo_latency_ms": {k: _fmt(v) for k, v in rep["zoo"].items()},
            "in_sample": {"nas_device_ms": _fmt(Z.metrics(dev[nas], ds.y[nas])),
                          "zoo_latency_ms": _fmt(Z.metrics(e2e[zoo], ds.y[zoo]))},
        },
        "end_to_end": end_to_end,
    }
    plat = Z.build_platform(fit.params, meta, pool_kernel=Z.POOL_KERNEL)
    plat = Platform.from_dict(plat.to_dict(), "zcu102-vai3")  # what the file will hold, validated
    plat.save(OUT)
    print(f"wrote {OUT}: {plat} in {time.perf_counter() - t0:.0f} s")
    for k, v in meta["accuracy"].items():
        print(f"  {k}: {v}")


if __name__ == "__main__":
    main()
