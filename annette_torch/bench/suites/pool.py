"""Single-layer pooling suites (max and average pool, no padding): builders, analytic cost, validity."""

from __future__ import annotations

from ...ir import Network, NetworkBuilder
from .layers import add_input, add_lead, pool_out

__all__ = ["build_maxpool", "build_avgpool", "cost_pool", "valid_pool"]


def _build_pool(c: dict, kind: str) -> Network:
    b = NetworkBuilder(f"{kind}pool")
    b.pool("pool", add_lead(b, c, add_input(b, c)), kind, int(c["k"]), int(c["s"]))
    return b.build()


def build_maxpool(c: dict) -> Network:
    return _build_pool(c, "max")


def build_avgpool(c: dict) -> Network:
    return _build_pool(c, "avg")


def cost_pool(c):
    ho, wo = pool_out(c["h"], c["k"], c["s"]), pool_out(c["w"], c["k"], c["s"])
    return 2 * ho * wo * c["c"] * c["k"] ** 2, c["c"] * (c["h"] * c["w"] + ho * wo), 0 * c["c"]


def valid_pool(c):
    return (c["k"] <= c["h"]) & (c["k"] <= c["w"])
