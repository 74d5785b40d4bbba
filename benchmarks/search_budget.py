"""Do architectures a latency-constrained search reports as feasible really meet the budget when measured?

Usage: python benchmarks/search_budget.py --platform PLATFORM.json [--runtime ort-cpu] [--space nb101]
       [--trials 150] [--top 25] [--quantile 0.5]

Runs a latency-constrained TPE search (synthetic objective: not accuracy) on the predicted latency of a
measurable platform (a calibrated ort-cpu / openvino-cpu platform file), with the budget at the given
quantile of the predicted latency of random architectures, then measures the ``--top`` best feasible
architectures end to end on the runtime (same settings as the platform) and reports the share truly under
the budget, with each architecture's predicted and measured latency.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np


import annette_torch as at  # noqa: E402
from annette_torch.validate import measure_latency  # noqa: E402
from annette_torch.search.optuna_search import best_feasible, latency_constrained_search  # noqa: E402
from annette_torch.search.spaces.registry import get_space  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--platform", required=True, help="calibrated platform file (or name)")
    ap.add_argument("--runtime", default="ort-cpu", choices=("ort-cpu", "openvino-cpu"))
    ap.add_argument("--space", default="nb101")
    ap.add_argument("--trials", type=int, default=150)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--quantile", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--margin", type=float, default=0.0,
                    help="search margin: enforce predicted latency <= budget x (1 - margin)")
    args = ap.parse_args()
    plat = at.load_platform(args.platform)
    space = get_space(args.space)
    import optuna
    rng_study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=args.seed))
    lat = []
    for _ in range(60):
        t = rng_study.ask()
        try:
            arch = space.suggest(t)
            lat.append(at.estimate(space.network(arch), plat).device_ms)
        except Exception:  # invalid NB101 cell: skip
            pass
    budget = float(np.quantile(lat, args.quantile))
    print(f"{plat.name}: budget {budget:.3f} ms = {args.quantile:.0%} quantile of {len(lat)} random {args.space} "
          f"architectures' predicted latency")
    study = latency_constrained_search(args.space, plat, "synthetic", args.trials, latency_ms=budget, seed=args.seed,
                                       margin=args.margin)
    print(f"search margin {args.margin:.0%}: predicted latency <= {budget * (1 - args.margin):.3f} ms enforced")
    rows = best_feasible(study, k=args.top)
    print(f"{len(rows)} feasible architectures reported; measuring them on {args.runtime}")
    under = 0
    for r in rows:
        net = space.network(space.decode(r["arch"]) if hasattr(space, "decode") else r["arch"])
        m = measure_latency(net, args.runtime, runs=30, repeats=3, warmup=5)
        ok = m.median_ms <= budget
        under += ok
        print(f"  predicted {r['latency_ms']:7.3f}  measured {m.median_ms:7.3f} (spread {m.spread:.1%})  "
              f"{'under' if ok else 'OVER '}  {r['arch'][:60]}")
    share = under / max(len(rows), 1)
    print(f"\n{under}/{len(rows)} = {share:.0%} of the reported architectures are truly under the budget "
          f"(target >= 95%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
