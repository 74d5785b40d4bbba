"""Speed of annette-torch itself: tracing, single-network estimation, and batch estimation.

Usage: python benchmarks/estimator_speed.py [--quick]

Prints (a) time per network to trace an nn.Module with torch.fx into the IR, next to
torch.fx.symbolic_trace alone (ratio measured in the same run); (b) time to estimate an already-built
ResNet-50-sized Network (derived quantities recomputed each time, mapping included); (c) estimate_many
throughput over >= 1000 small (~30-layer) networks. Absolute times drift on shared machines; the ratios
are the stable figures.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np

import annette_torch as at
from annette_torch.ir import LayerType as T, Network, NetworkBuilder
from annette_torch.platform import load_platform

from timing import best_of  # noqa: E402  (benchmarks/timing.py)


def small_network(rng: np.random.Generator, i: int) -> Network:
    """A ~30-layer CNN with random widths and kernels (NAS-candidate sized)."""
    b = NetworkBuilder(f"cand{i}")
    x = b.input("x", (1, 3, 32, 32))
    for s in range(3):
        w = int(rng.choice([16, 24, 32, 48, 64])) * (s + 1)
        for j in range(3):
            k = int(rng.choice([1, 3, 5]))
            x = b.conv(f"s{s}c{j}", x, w, k, padding=k // 2)
            x = b.same(T.BATCH_NORM, f"s{s}b{j}", x)
            x = b.same(T.RELU, f"s{s}r{j}", x)
        if s < 2:
            x = b.pool(f"s{s}p", x, "max", 2)
    x = b.global_pool("gap", x)
    b.linear("fc", x, 10)
    return b.build()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    ap.add_argument("--platform", default="zcu102")
    args = ap.parse_args()
    rep = 3 if args.quick else 7
    plat = load_platform(args.platform)

    import torch.fx

    from annette_torch import zoo
    print(f"platform {plat.name}; python {sys.version.split()[0]}")
    print("\n(a) tracing an nn.Module into the IR (torch.fx, analytic shapes)")
    print(f"{'model':<16}{'layers':>7}{'fx.symbolic_trace ms':>22}{'annette trace ms':>18}{'ratio':>8}")
    ratios = []
    for name in ("resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0"):
        m = zoo.get(name)
        shape = zoo.INPUT_SHAPES[name]
        t_fx = best_of(lambda: torch.fx.symbolic_trace(m), rep, 3)
        t_tr = best_of(lambda: at.trace(m, shape), rep, 3)
        n = len(at.trace(m, shape))
        ratios.append(t_tr / t_fx)
        print(f"{name:<16}{n:>7}{t_fx * 1e3:>22.2f}{t_tr * 1e3:>18.2f}{t_tr / t_fx:>8.2f}")
    print(f"trace / symbolic_trace: median ratio {statistics.median(ratios):.2f} (target <= 1.5)")

    print("\n(b) estimating an already-built Network (mapping + layer models, caches cleared)")
    r50 = zoo.get("resnet50")
    net = at.trace(r50, zoo.INPUT_SHAPES["resnet50"])

    def one():
        net._cache.clear()
        at.estimate(net, plat)
    t_est = best_of(one, rep, 200)
    print(f"resnet50 ({len(net)} layers): {t_est * 1e3:.3f} ms per estimate (target <= 0.5 ms)")
    cpu, board = load_platform("ort-cpu"), load_platform("zcu102")
    cpu.check_machine()  # warn once here, not inside the timing
    t_cpu = best_of(lambda: (net._cache.clear(), at.estimate(net, cpu)), rep, 200)
    t_board = best_of(lambda: (net._cache.clear(), at.estimate(net, board)), rep, 200)
    print(f"resnet50 on ort-cpu (tree ensembles): {t_cpu * 1e3:.3f} ms per estimate (target <= 0.5 ms), "
          f"{t_cpu / t_board:.1f}x zcu102's {t_board * 1e3:.3f} ms")
    for other in ("ort-cpu", "openvino-cpu"):  # measured CPU platforms: tree-ensemble layer models
        op = at.load_platform(other)

        def one_other(op=op):
            net._cache.clear()
            at.estimate(net, op)
        t_other = best_of(one_other, rep, 100)
        print(f"resnet50 on {other}: {t_other * 1e3:.3f} ms per estimate ({t_other / t_est:.1f}x {plat.name}; "
              "target <= 0.5 ms)")

    print("\n(c) estimate_many over small networks")
    rng = np.random.default_rng(0)
    nets = [small_network(rng, i) for i in range(2000)]
    layers = statistics.mean(len(n) for n in nets)

    def many():
        for n in nets:
            n._cache.clear()
        at.estimate_many(nets, plat)
    t_many = best_of(many, rep, 1)
    print(f"{len(nets)} networks of ~{layers:.0f} layers: {t_many * 1e3:.1f} ms -> "
          f"{len(nets) / t_many:,.0f} networks/s (target >= 20,000)")
    t_fx50 = best_of(lambda: torch.fx.symbolic_trace(r50), rep, 1)
    print(f"\nestimating a built resnet50 costs {t_est / t_fx50:.4f}x of torch.fx.symbolic_trace(resnet50) alone")

    print("\n(d) loading a shipped platform file (parse + validate, no cache)")
    from annette_torch.platform import Platform, platform_dir
    for path in sorted(platform_dir().glob("**/*.json")):
        t_load = best_of(lambda: Platform.load(path), rep, 1)
        print(f"{str(path.relative_to(platform_dir())):<58}{path.stat().st_size / 1e6:6.1f} MB"
              f"{t_load * 1e3:8.1f} ms (target < 100 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
