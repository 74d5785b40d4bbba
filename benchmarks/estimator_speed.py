"""Speed of annette-torch itself: tracing, single-network estimation, and batch estimation.

Usage: python benchmarks/estimator_speed.py [--quick]

Prints (a) time per network to trace an nn.Module with torch.fx into the IR, next to
torch.fx.symbolic_trace alone (ratio measured in the same run); (b) time to estimate an already-built
ResNet-50-sized Network (derived quantities recomputed each time, mapping included), and a traced ViT-B/16
against it; (c) estimate_many
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

    print("\n(b) estimating an already-built ResNet-50 Network (mapping included, derived quantities recomputed)")
    r50 = zoo.get("resnet50")
    net = at.trace(r50, zoo.INPUT_SHAPES["resnet50"])
    names = ("zcu102", "ncs2", "ort-cpu", "openvino-cpu")
    plats = {n: load_platform(n) for n in names}
    for p in plats.values():
        p.check_machine()  # warn once here, not inside the timing

    def timed(p, cold: bool, n=net) -> float:
        def one():
            n._cache.clear()
            if cold:  # what an unseen network's layers cost
                p.tables.forget()
            at.estimate(n, p).latency_ms
        return best_of(one, rep, 200)

    def by_name(n: str) -> float:
        def one():
            net._cache.clear()
            at.estimate(net, n).latency_ms
        return best_of(one, rep, 200)
    warm = {n: timed(p, False) for n, p in plats.items()}
    cold = {n: timed(p, True) for n, p in plats.items()}
    named = {n: by_name(n) for n in names}
    print(f"{'platform':<14}{'repeated ms':>12}{'unseen ms':>11}{'by name / object':>18}{'/ zcu102 (repeated)':>21}")
    for n in names:
        print(f"{n:<14}{warm[n] * 1e3:>12.3f}{cold[n] * 1e3:>11.3f}{named[n] / warm[n]:>18.2f}"
              f"{warm[n] / warm['zcu102']:>21.2f}")
    print("targets: zcu102 <= 0.3 ms, ort-cpu and openvino-cpu <= 0.5 ms; by name within 10% of a loaded platform. "
          "'repeated': the layer configurations were estimated before in this process (tree ensembles remember "
          "them, as in a search); 'unseen': every configuration is new")
    t_est = warm[plat.name] if plat.name in warm else timed(plat, False)

    print("\n(b2) a traced ViT-B/16 (213 layers) against the traced ResNet-50 (176), repeated, in the same run")
    vit = at.trace(zoo.get("vit_b16"), zoo.INPUT_SHAPES["vit_b16"])
    for n, p in plats.items():
        print(f"{n:<14}ViT-B/16 / ResNet-50 {timed(p, False, vit) / timed(p, False):.2f}x (target <= 1)")

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

    print("\n(e) a fresh process: `annette --help`, and importing annette_torch plus the first estimate by name")
    import subprocess
    import time
    code = ("import time; t = time.perf_counter(); import annette_torch as at; from annette_torch.ir import "
            "NetworkBuilder as B; b = B('n'); x = b.input('x', (1, 3, 224, 224)); b.conv('c', x, 64, 3, padding=1); "
            "n = b.build(); t1 = time.perf_counter(); at.estimate(n, 'zcu102').latency_ms; "
            "print((time.perf_counter() - t1) * 1e3, (t1 - t) * 1e3)")
    import os
    # as after an install: bytecode compiled once (an environment with PYTHONDONTWRITEBYTECODE compiles every
    # module in every process); the first run below writes it
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    firsts, helps, lists = [], [], []
    subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, env=env)
    for _ in range(rep):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "annette_torch.cli", "bench", "--list"], capture_output=True, check=True,
                       env=env)
        lists.append(time.perf_counter() - t0)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env=env).stdout.split()
        firsts.append(float(out[0]))
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "annette_torch.cli", "--help"], capture_output=True, check=True, env=env)
        helps.append(time.perf_counter() - t0)
    print(f"annette --help: {min(helps):.2f} s (target < 0.5 s); annette bench --list: {min(lists):.2f} s; first "
          f"estimate in a process: {min(firsts):.1f} ms (target < 50 ms; the platform file loaded)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
