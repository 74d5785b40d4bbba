"""Adapting to a device nobody here can run: `annette adapt` from N measured NAS-Bench-201 cells, judged on
the other cells of the same device.

    python benchmarks/cross_device.py [--base ort-cpu] [--draws 20] [--sizes 3,10,30] [--nb201-dir ../shared/nb201]

The NAS-Bench-201 folder holds the benchmark's index (``nb201_official_index.csv``) and the measured latency
of all 15,625 cells on two devices (``nb201_latency_pixel3_silver4114.csv``: a Pixel 3 and an Intel Xeon
Silver 4114). For N = 3, 10, 30 random cells (adapt needs at least 3; ``--draws`` draws each), the base
platform is adapted to the N measured latencies (`annette_torch.adapt` with ``("nb201:ARCH", latency_ms)``
pairs: it may choose the cell semantics the device follows and per-kind scales) and every other cell is
predicted, built with the semantics the adapted platform records (`nb201.platform_semantics`). Printed per N:
the mean Spearman rho and MAPE over the draws and the mean of their worst quartile, beside the unadapted
base platform (whose MAPE is meaningless across devices, its ranking is not), and what adapt chose.
Only the N sampled cells reach adapt; the device's other cells are the test.
"""

from __future__ import annotations

import argparse
import csv
import logging
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

import annette_torch as at
from annette_torch.search.spaces import nb201

DEVICES = {"pixel3": "pixel3_ms", "silver4114": "silver_4114_ms"}


def load(folder: Path) -> tuple[list[str], dict[str, np.ndarray]]:
    """The cells in the benchmark's index order and each device's measured latency (ms) per cell."""
    with open(folder / "nb201_official_index.csv", encoding="utf-8") as f:
        archs = {int(r["nb201_index"]): r["arch_str"] for r in csv.DictReader(f)}
    with open(folder / "nb201_latency_pixel3_silver4114.csv", encoding="utf-8") as f:
        rows = {int(r["nb201_index"]): r for r in csv.DictReader(f)}
    order = sorted(archs)
    return [archs[i] for i in order], {d: np.array([float(rows[i][c]) for i in order]) for d, c in DEVICES.items()}


def score(pred: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Spearman rho, MAPE and the share within +-10%."""
    err = pred / y - 1
    return float(spearmanr(pred, y)[0]), float(np.mean(np.abs(err))), float(np.mean(np.abs(err) <= 0.1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="ort-cpu", help="platform to adapt (default ort-cpu)")
    ap.add_argument("--draws", type=int, default=20, help="random draws of the N cells (default 20)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the draws (default 0)")
    ap.add_argument("--nb201-dir", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "nb201"))
    ap.add_argument("--sizes", default="3,10,30", help="the N values (default 3,10,30; adapt needs at least 3)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    folder = Path(args.nb201_dir)
    if not (folder / "nb201_official_index.csv").is_file():
        print(f"cross_device: {folder}/nb201_official_index.csv not found; give --nb201-dir", file=sys.stderr)
        return 1
    archs, measured = load(folder)
    if archs != nb201.all_arch_strings():
        print("cross_device: the index file's order differs from annette_torch's NAS-Bench-201 index", file=sys.stderr)
        return 1
    nets = {"pruned": nb201.build_networks(archs)}
    base = at.load_platform(args.base)
    t = time.perf_counter()
    base_pred = at.estimate_many(nets["pruned"], base)
    print(f"base {base.name}: {len(archs):,} cells estimated in {time.perf_counter() - t:.1f} s")
    sizes = [int(s) for s in args.sizes.split(",")]
    rng = np.random.default_rng(args.seed)
    for device, y in measured.items():
        rho, mape, within = score(base_pred, y)
        print(f"\n{device}: unadapted {base.name}: Spearman {rho:.3f}, MAPE {mape:.0%}, within +-10% {within:.0%}")
        print(f"{'N':>4} {'Spearman mean (worst 25%)':>26} {'MAPE mean (worst 25%)':>22} {'within 10%':>11} "
              f"{'adapt s':>8}  chosen (semantics x draws; per-kind scales in how many draws)")
        for n in sizes:
            res, secs, chosen = [], [], []
            for _ in range(args.draws):
                pick = rng.choice(len(archs), n, replace=False)
                t = time.perf_counter()
                ad = at.adapt(base, latencies=[(f"nb201:{archs[i]}", float(y[i])) for i in pick], save=False)
                secs.append(time.perf_counter() - t)
                sem = nb201.platform_semantics(ad.platform)
                chosen.append((sem, ad.kind_scales is not None))
                if sem not in nets:
                    nets[sem] = nb201.build_networks(archs, semantics=sem)
                rest = np.setdiff1d(np.arange(len(archs)), pick)
                pred = at.estimate_many([nets[sem][i] for i in rest], ad.platform)
                res.append(score(pred, y[rest]))
            r = np.array(res)
            q = max(1, len(r) // 4)
            sems = {s: sum(c[0] == s for c in chosen) for s in dict.fromkeys(c[0] for c in chosen)}
            print(f"{n:>4} {r[:, 0].mean():>17.3f} ({np.sort(r[:, 0])[:q].mean():.3f}) {r[:, 1].mean():>13.1%} "
                  f"({np.sort(r[:, 1])[-q:].mean():.1%}) {r[:, 2].mean():>10.0%} {np.median(secs):>8.1f}  "
                  + ", ".join(f"{s} x{c}" for s, c in sems.items()) + f"; kinds {sum(c[1] for c in chosen)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
