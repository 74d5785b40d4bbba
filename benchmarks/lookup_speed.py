"""Speed of the latency lookup used inside NAS training loops.

Usage: python benchmarks/lookup_speed.py [--blocks 20] [--threads N]

Builds a `LatencyTable` for the first ``--blocks`` blocks of the MobileNetV2 / ProxylessNAS space at
224x224 on zcu102 (7 candidates per block), then times, per call (best of several rounds):
(a) `LatencyTable.expected` forward + backward w.r.t. the architecture logits (target: <= 100 us for a
20-block supernet), (b) its forward alone under ``torch.no_grad``, (c) `LatencyTable.exact` of one
architecture, and (d) building the table. Absolute times drift on shared machines.
"""

from __future__ import annotations

import argparse

import torch


from annette_torch.search.spaces import mbv2  # noqa: E402

from timing import best_of  # noqa: E402  (benchmarks/timing.py)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=20)
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    blocks = list(mbv2.BLOCKS[: args.blocks])

    t_build = best_of(lambda: mbv2.latency_table("zcu102", blocks=blocks), repeat=3, number=5)
    table = mbv2.latency_table("zcu102", blocks=blocks)
    alpha = torch.zeros(table.lat.shape, requires_grad=True)

    def fwd_bwd() -> None:
        alpha.grad = None
        table.expected(alpha).backward()

    def fwd() -> None:
        with torch.no_grad():
            table.expected(alpha)

    choices = [b.ops[-1] for b in blocks]
    t_fb = best_of(fwd_bwd)
    t_f = best_of(fwd)
    t_exact = best_of(lambda: table.exact(choices), number=20000)
    print(f"latency table: {table}  (torch {torch.__version__}, {torch.get_num_threads()} thread(s))")
    print(f"expected() forward+backward, {table.n_blocks} blocks x {table.lat.shape[1]} candidates: "
          f"{t_fb * 1e6:7.1f} us   (target <= 100 us: {'met' if t_fb <= 100e-6 else 'MISSED'})")
    print(f"expected() forward only (no_grad):                       {t_f * 1e6:7.1f} us")
    print(f"exact(choices) of one architecture:                      {t_exact * 1e6:7.2f} us")
    print(f"building the table ({sum(len(b.ops) for b in blocks)} candidates + stem + head):         "
          f"{t_build * 1e3:7.2f} ms")


if __name__ == "__main__":
    main()
