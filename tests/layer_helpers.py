"""Helpers shared by the front-end tests: a network's layer types, and the index of its only layer of a type."""

from __future__ import annotations

from annette_torch.ir import LayerType as T


def types_of(net) -> list[T]:
    return [T(int(t)) for t in net.types]


def only(net, type_: T) -> int:
    idx = [i for i, t in enumerate(types_of(net)) if t == type_]
    assert len(idx) == 1, f"expected one {type_.label}, got {net.type_labels()}"
    return idx[0]
