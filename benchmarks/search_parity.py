"""Does a constrained search of the Accel-NASBench space cost the same on `zcu102-vai3` as on `zcu102-dnndk`?

Usage: python benchmarks/search_parity.py [--trials 2000] [--rounds 3] [--quick]

1. The latency oracle of a search (IR build + estimate per new candidate) over the same ``--trials`` random
   candidates of the ``anb`` space on both platforms, interleaved over ``--rounds`` rounds with fresh oracles;
   each platform's best round counts (the least disturbed by other load on the machine).
2. A latency-constrained TPE search of ``--trials`` trials (synthetic objective, budget at each platform's median
   predicted latency) on each platform, wall time, best of two runs in alternating order.

Printed: per-candidate cost on each platform and the ratio vai3 / dnndk measured in the same run. Target: ratio
<= 1.0 (within noise: <= 1.05). Absolute times drift on shared machines; the ratio is the figure.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import optuna

from annette_torch.platform import load_platform
from annette_torch.search.oracle import LatencyOracle
from annette_torch.search.optuna_search import latency_constrained_search, synthetic_accuracy
from annette_torch.search.spaces.registry import get_space

PLATFORMS = ("zcu102-dnndk", "zcu102-vai3")


def candidates(n: int, seed: int = 0) -> list:
    """``n`` candidates of the anb space drawn by Optuna's random sampler (distinct architectures)."""
    space = get_space("anb")
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    out = []
    for _ in range(n):
        t = study.ask()
        out.append(space.suggest(t))
        study.tell(t, 0.0)
    return out


def oracle_cost(archs: list, platform: str) -> float:
    """Seconds a fresh oracle takes to predict every candidate once (IR build + estimate per candidate)."""
    oracle = LatencyOracle("anb", load_platform(platform))
    t0 = time.perf_counter()
    for a in archs:
        oracle(a)
    return time.perf_counter() - t0


def search_wall(platform: str, trials: int, archs: list) -> tuple[float, float]:
    """Wall seconds of a latency-constrained TPE search of ``trials`` trials, and its budget (ms)."""
    oracle = LatencyOracle("anb", load_platform(platform))
    budget = statistics.median(oracle(a) for a in archs[:100])
    t0 = time.perf_counter()
    latency_constrained_search("anb", platform, synthetic_accuracy("anb"), trials, latency_ms=budget, seed=0)
    return time.perf_counter() - t0, budget


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="300 candidates, 2 rounds, a 300-trial search")
    args = ap.parse_args()
    if args.quick:
        args.trials, args.rounds = 300, 2
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    archs = candidates(args.trials)
    for p in PLATFORMS:  # warm up: templates, platform tables, first-call costs
        oracle_cost(archs[:20], p)
    best = {p: float("inf") for p in PLATFORMS}
    for r in range(args.rounds):
        for p in (PLATFORMS if r % 2 == 0 else PLATFORMS[::-1]):
            best[p] = min(best[p], oracle_cost(archs, p))
    print(f"anb space, {len(archs)} candidates, latency oracle (IR build + estimate), best of {args.rounds} rounds:")
    for p in PLATFORMS:
        print(f"  {p:14s} {1e3 * best[p] / len(archs):7.3f} ms per candidate")
    ratio = best["zcu102-vai3"] / best["zcu102-dnndk"]
    print(f"  ratio zcu102-vai3 / zcu102-dnndk: {ratio:.2f} (target <= 1.0; within noise <= 1.05)")
    walls = {p: (float("inf"), 0.0) for p in PLATFORMS}
    for r in range(2):
        for p in (PLATFORMS if r % 2 == 0 else PLATFORMS[::-1]):
            walls[p] = min(walls[p], search_wall(p, args.trials, archs))
    print(f"\nlatency-constrained TPE search, {args.trials} trials, budget = median predicted latency, best of 2:")
    for p, (wall, budget) in walls.items():
        print(f"  {p:14s} {wall:7.1f} s  (budget {budget:.2f} ms)")
    print(f"  ratio zcu102-vai3 / zcu102-dnndk: {walls['zcu102-vai3'][0] / walls['zcu102-dnndk'][0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
