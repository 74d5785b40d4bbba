"""Speed of the NAS-Bench-201 direct builder + batch estimation: all 15,625 cells -> Networks -> estimate_many.

Usage: python benchmarks/nb201_speed.py [--platform zcu102] [--repeat 3]

Prints, per round, the time to build all 15,625 networks (first round cold: cell templates not cached, and
the ~1.7 GB the estimator touches is new to the process), to estimate them with ``estimate_many`` and the
total (target <= 2 s), then ``estimate_all``, which estimates only the 9,445 distinct pruned cells. The
platform file is loaded before timing. Times drift on shared machines: the best warm round is the stable
figure.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


from annette_torch import estimate_many  # noqa: E402
from annette_torch.platform import load_platform  # noqa: E402
from annette_torch.search.spaces import nb201  # noqa: E402

TARGET_S = 2.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--platform", default="zcu102")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    plat = load_platform(args.platform)
    archs = nb201.all_arch_strings()
    print(f"platform {plat.name}; {len(archs)} NB201 cells (C=16, N=5, input 1x3x32x32)")
    print(f"{'round':<8}{'build s':>9}{'estimate s':>12}{'total s':>10}{'layers':>10}")
    totals, times = [], None
    for r in range(args.repeat):
        t0 = time.perf_counter()
        nets = nb201.build_networks(archs)
        t1 = time.perf_counter()
        times = estimate_many(nets, plat)
        t2 = time.perf_counter()
        totals.append(t2 - t0)
        label = "cold" if r == 0 else f"warm{r}"
        print(f"{label:<8}{t1 - t0:>9.3f}{t2 - t1:>12.3f}{t2 - t0:>10.3f}{sum(len(n) for n in nets):>10}")
        del nets
    t0 = time.perf_counter()
    loop = [nb201.build_network(a) for a in archs]
    t_loop = time.perf_counter() - t0
    del loop
    print(f"build_network one arch at a time (warm): {t_loop:.3f} s")
    dedup = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        all_times = nb201.estimate_all(plat)
        dedup.append(time.perf_counter() - t0)
    assert times is not None and np.allclose(all_times, times), "estimate_all disagrees with estimate_many"
    print(f"estimate_all (9,445 distinct cells, build included): best {min(dedup):.3f} s")
    cold, warm = totals[0], min(totals[1:], default=totals[0])
    verdict = lambda t: "met" if t <= TARGET_S else "MISSED"  # noqa: E731
    print(f"all 15,625 -> estimate_many: cold (first call in the process) {cold:.3f} s ({verdict(cold)}), "
          f"warm best {warm:.3f} s ({verdict(warm)}); target <= {TARGET_S} s")
    print(f"latency range {times.min():.3f}..{times.max():.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
