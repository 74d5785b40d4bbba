"""Benchmark-tool throughput: measured configurations per second on ort-cpu, single-kernel vs packed.

Usage: python benchmarks/bench_throughput.py [--configs 60] [--pack 4] [--suite conv]

Runs the same sampled configurations of a suite (default ``conv``, Sobol order) into fresh databases once
one model per configuration and once ``--pack`` configurations per compiled model, through the real sweep
(worker process, matcher, SQLite), and prints configurations per second for both. Then measures every
configuration a second time in the same run and reports the repeatability of the per-layer medians
(relative difference between the two measurements: median and 90th percentile).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

from annette_torch.bench.store import Store
from annette_torch.bench.suites import SUITES
from annette_torch.bench.sweep import run_sweep


def times(db: Path) -> dict[tuple[str, str], float]:
    with Store(db) as st:
        return {(cid, L.layer): L.time_ms for _, cid, _, L in st.layer_records("ort-cpu")
                if L.fused == "not-fused" and L.time_ms > 0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="conv")
    ap.add_argument("--configs", type=int, default=60)
    ap.add_argument("--pack", type=int, default=4)
    ap.add_argument("--iterations", type=int, default=20)
    args = ap.parse_args()
    cfgs = SUITES[args.suite].configs(n=args.configs, seed=0)
    tmp = Path(tempfile.mkdtemp())
    rates = {}
    for label, pack, db in (("single", 1, tmp / "a.sqlite"), (f"packed x{args.pack}", args.pack, tmp / "b.sqlite"),
                            ("single (repeat)", 1, tmp / "c.sqlite")):
        with Store(db) as st:
            r = run_sweep(st, "ort-cpu", args.suite, cfgs, "ort-cpu", {"threads": 1}, iterations=args.iterations,
                          warmup=3, pack=pack, progress=False)
        rates[label] = r
        print(f"{label:<16}{r.measured:>4} configs in {r.seconds:6.1f} s = {r.per_second:6.2f} configs/s"
              f"  ({r.failed} failed)")
    a, c = times(tmp / "a.sqlite"), times(tmp / "c.sqlite")
    common = sorted(set(a) & set(c))
    rel = np.array([abs(a[k] - c[k]) / a[k] for k in common])
    big = np.array([abs(a[k] - c[k]) / a[k] for k in common if a[k] >= 0.1])
    print(f"\nrepeatability over {len(common)} layers measured twice (median of {args.iterations} iterations each):")
    print(f"  all layers: median {np.median(rel) * 100:.1f}%, p90 {np.percentile(rel, 90) * 100:.1f}%")
    if big.size:
        print(f"  layers >= 0.1 ms ({big.size}): median {np.median(big) * 100:.1f}%, "
              f"p90 {np.percentile(big, 90) * 100:.1f}%, within 5%: {np.mean(big <= 0.05) * 100:.0f}%")
    print(f"\npacked / single throughput: {rates[f'packed x{args.pack}'].per_second / rates['single'].per_second:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
