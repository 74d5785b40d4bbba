"""Single-layer element-wise suites: two-input add, tensor-by-constant ops, activations, batch normalisation."""

from __future__ import annotations

from ...ir import LayerType, Network, NetworkBuilder
from .base import SuiteError
from .layers import add_act, add_input

__all__ = ["CONST_OPS", "build_add", "cost_add", "build_eltwise_const", "cost_elementwise", "build_act",
           "build_bn", "cost_bn"]

T = LayerType

#: the ``eltwise_const`` suite's operations: a tensor and a per-channel constant
CONST_OPS = {"add": T.ADD, "sub": T.SUB, "mul": T.MUL, "div": T.DIV}


def build_add(c: dict) -> Network:
    b = NetworkBuilder("add")
    xs = [add_input(b, c, f"x{j}") for j in range(2)]
    b.same(T.ADD, "add", xs)
    return b.build()


def cost_add(c):
    e = c["c"] * c["h"] * c["w"]
    return e, 3 * e, 0 * e


def build_eltwise_const(c: dict) -> Network:
    """``x (op) C`` with a per-channel constant: how exporters write ``x + 3`` or ``x / 6`` (hard-swish and
    hard-sigmoid written out, normalisation); a one-input layer in the IR, cheaper than a two-input one."""
    try:
        t = CONST_OPS[str(c["op"])]
    except KeyError:
        raise SuiteError(f"unknown op {c['op']!r}; choose from {list(CONST_OPS)}") from None
    b = NetworkBuilder("eltwise_const")
    b.same(t, str(c["op"]), add_input(b, c))
    return b.build()


def cost_elementwise(c):
    """One operation per element of a one-input layer (an activation, a tensor-by-constant op)."""
    e = c["c"] * c["h"] * c["w"]
    return e, 2 * e, 0 * e


def build_act(c: dict) -> Network:
    b = NetworkBuilder("act")
    add_act(b, str(c["act"]), str(c["act"]), add_input(b, c))
    return b.build()


def build_bn(c: dict) -> Network:
    b = NetworkBuilder("bn")
    b.same(T.BATCH_NORM, "bn", add_input(b, c))
    return b.build()


def cost_bn(c):
    e = c["c"] * c["h"] * c["w"]
    return 2 * e, 2 * e, 2 * c["c"]
