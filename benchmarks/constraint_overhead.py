"""Time `LatencyConstraint` adds to an Optuna trial: a cached architecture (target <= 1 ms) and a new traced
ResNet-18-sized model (target <= 10 ms), with `torch.fx.symbolic_trace` of the same model measured in the
same run as the machine's yardstick. ``python benchmarks/constraint_overhead.py [--repeats N]``."""

from __future__ import annotations

import argparse
import statistics
import time

import optuna
import torch
import torch.fx
import torch.nn as nn

from annette_torch import zoo
from annette_torch.search import LatencyConstraint


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    torch.set_num_threads(1)
    c = LatencyConstraint("zcu102", latency_ms=10.0, input_shape=(1, 3, 224, 224))
    study = optuna.create_study()
    models = []
    for i in range(args.repeats + 1):
        m = zoo.get("resnet18")
        m.fc = nn.Linear(512, 10 + i)  # a new architecture each time
        models.append(m)
    c(study.ask(), models[0])  # warm-up: imports, platform tables
    new, fx, cached = [], [], []
    for m in models[1:]:
        t0 = time.perf_counter()
        torch.fx.symbolic_trace(m)
        fx.append(time.perf_counter() - t0)
        trial = study.ask()
        t0 = time.perf_counter()
        c(trial, m)
        new.append(time.perf_counter() - t0)
    for _ in range(args.repeats * 10):
        trial = study.ask()
        t0 = time.perf_counter()
        c(trial, models[0])
        cached.append(time.perf_counter() - t0)
    med = {k: 1e3 * statistics.median(v) for k, v in (("cached", cached), ("new", new), ("fx", fx))}
    print(f"cached architecture   {med['cached']:.3f} ms per trial  (target 1 ms: ratio {med['cached'] / 1.0:.2f})")
    print(f"new ResNet-18         {med['new']:.2f} ms per trial  (target 10 ms: ratio {med['new'] / 10.0:.2f}; "
          f"{med['new'] / med['fx']:.2f}x torch.fx.symbolic_trace alone, {med['fx']:.2f} ms)")


if __name__ == "__main__":
    main()
