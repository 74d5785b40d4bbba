"""``annette adapt``: refit a platform's network-level terms to this machine (measured here) or to a board
(from the user's latencies CSV), keeping its layer and mapping models."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

__all__ = ["add_parser", "run"]


def _networks(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {n}")
    return n


def add_parser(sub: Any) -> None:
    """Register ``annette adapt``."""
    a = sub.add_parser(
        "adapt", help="fit a platform to this machine or a board from a few end-to-end latencies (seconds)",
        description="Keep a platform's layer and mapping models and refit its network-level terms (the base "
                    "file's terms times one factor, or scale, per-layer and per-inference cost fitted afresh, "
                    "where their out-of-sample error is clearly lower; leave-one-family-out where the networks span "
                    "families): for ort-cpu / openvino-cpu by measuring calibration networks on this machine "
                    "(and a few micro-kernels of the layer kinds carrying their time, whose measured-over-modelled "
                    "factors become per-kind scales where that predicts left-out networks better); "
                    "for a board (zcu102, ncs2, or a platform file) from latencies you measured, given as a CSV "
                    "with columns model,input_shape,latency_ms; a model is a zoo name, an .onnx / ANNETTE .json file, package.module:callable, or a search-space candidate "
                    "SPACE:ARCH[:CLASSES] (nb201, nb101, mbv2, anb, vit, hybrid; e.g. "
                    "nb201:|nor_conv_3x3~0|+...|:100).")
    a.add_argument("-p", "--platform", required=True, metavar="P", help="platform name or platform .json file")
    a.add_argument("-n", "--networks", type=_networks, default=None, metavar="N",
                   help="calibration networks to measure here (default 14, four of them large; never the validation networks)")
    a.add_argument("--latencies", metavar="CSV", help="model,input_shape,latency_ms rows measured on the board "
                                                      "(model: zoo name, file, module:callable or SPACE:ARCH[:CLASSES])")
    a.add_argument("--out", metavar="FILE", help="platform file to write (default: <platform>.json in your "
                                                 "platform folder, which the name then loads)")
    a.add_argument("--no-sweep", action="store_true",
                   help="measuring here: skip the short micro-kernel sweep (~30 s) that rescales the layer kinds "
                        "carrying the networks' time, kept unless it predicts the networks left out worse")


def run(args: argparse.Namespace) -> int:
    """Execute ``annette adapt``."""
    from ..errors import AnnetteError
    from ..fit.adapt import DEFAULT_NETWORKS, MAX_ROUNDS, ROUNDS, adapt
    from .common import check_output

    check_output(args.out, "--out")

    if args.latencies and args.networks is not None:
        raise AnnetteError("adapt: give either --networks (measure here) or --latencies (a board), not both")
    res = adapt(args.platform, networks=args.networks or DEFAULT_NETWORKS, latencies=args.latencies,
                out=args.out, progress=sys.stderr.isatty(), sweep=False if args.no_sweep else None)
    print(res.table())
    loo = "n/a (too few networks)" if math.isnan(res.loo_mape) else f"{res.loo_mape:.1%}"
    if res.expected():  # (by kind, leave-one-out; the family check that chose the terms beside it)
        expect = f"expected error on other networks: {res.by_kind()} (leave-one-out)"
        if res.unlike():
            expect += f"; on a family unlike these: {res.by_kind(unlike=True)} ({res.check}, which chose the terms)"
    else:
        expect = f"{res.check} {loo} (what other networks can expect)"
    print(f"\n{len(res.names)} networks: MAPE {res.mape_before:.1%} with {res.base}, {res.mape_after:.1%} adapted; "
          f"{expect}; refitted: {res.fitted()}")
    if res.family_mape:
        print(f"by family, each predicted from the others: {res.by_family()}")
    if res.median_spread is not None:
        print(f"measured: fastest of {ROUNDS} to {MAX_ROUNDS} rounds per network; its two fastest rounds differ "
              f"by {res.median_spread:.1%} at the median" + (" (noisy: see the warning above)" if res.noisy else ""))
    from ..platform import resolve_platform

    loads = resolve_platform(res.platform.name) == res.path
    print(f"wrote {res.path} in {res.seconds:.0f} s" + (f"; '-p {res.platform.name}' now loads it" if loads else
                                                        f"; use it with '-p {res.path}'"))
    return 0
