"""Adapting to a device nobody here can run: `annette adapt` from N measured NAS-Bench-201 cells, judged on
the other cells of the same device.

    python benchmarks/cross_device.py [--base ort-cpu] [--draws 5] [--nb201-dir ../shared/nb201]

The NAS-Bench-201 folder holds the benchmark's index (``nb201_official_index.csv``) and the measured latency
of all 15,625 cells on two devices (``nb201_latency_pixel3_silver4114.csv``: a Pixel 3 and an Intel Xeon
Silver 4114). For N = 3, 10, 30 random cells (adapt needs at least 3) (``--draws`` draws each), the base platform is adapted to
the N measured latencies (`annette_torch.adapt` with ``(network, latency_ms)`` pairs) and every other cell
is predicted; the benchmark prints the median and worst Spearman rho and MAPE over the draws, beside the
unadapted base platform (whose MAPE is meaningless across devices, its ranking is not).
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
    ap.add_argument("--draws", type=int, default=5, help="random draws of the N cells (default 5)")
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
    nets = nb201.build_networks(archs)
    base = at.load_platform(args.base)
    t = time.perf_counter()
    base_pred = at.estimate_many(nets, base)
    print(f"base {base.name}: {len(nets):,} cells estimated in {time.perf_counter() - t:.1f} s")
    sizes = [int(s) for s in args.sizes.split(",")]
    rng = np.random.default_rng(0)
    for device, y in measured.items():
        rho, mape, within = score(base_pred, y)
        print(f"\n{device}: unadapted {base.name}: Spearman {rho:.3f}, MAPE {mape:.0%}, within +-10% {within:.0%}")
        print(f"{'N':>4} {'Spearman median (worst)':>26} {'MAPE median (worst)':>22} {'within 10%':>11} {'adapt s':>8}")
        for n in sizes:
            res, secs = [], []
            for _ in range(args.draws):
                pick = rng.choice(len(nets), n, replace=False)
                t = time.perf_counter()
                ad = at.adapt(base, latencies=[(nets[i], float(y[i])) for i in pick], save=False)
                secs.append(time.perf_counter() - t)
                rest = np.setdiff1d(np.arange(len(nets)), pick)
                pred = at.estimate_many([nets[i] for i in rest], ad.platform)
                res.append(score(pred, y[rest]))
            r = np.array(res)
            print(f"{n:>4} {np.median(r[:, 0]):>17.3f} ({r[:, 0].min():.3f}) {np.median(r[:, 1]):>13.1%} "
                  f"({r[:, 1].max():.1%}) {np.median(r[:, 2]):>10.0%} {np.median(secs):>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
