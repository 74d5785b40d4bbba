"""The standard measurement format every toolchain's profile is parsed into, before and after matching."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["NodeRecord", "LayerRecord", "FUSED", "NOT_FUSED", "POSSIBLY_FUSED", "INSERTED"]

NOT_FUSED = "not-fused"
FUSED = "fused"
POSSIBLY_FUSED = "possibly-fused"
INSERTED = "inserted"  # a node the toolchain added (layout reorder, precision convert): no original layer


@dataclass
class NodeRecord:
    """One executed node of a toolchain's profile, timings per iteration in ms (parser output).

    ``layers`` names the original layers the node executes as far as the report says (e.g. ONNX Runtime
    names a fused Conv+Relu node after the surviving node; OpenVINO lists absorbed layers as NOT_RUN).
    """

    node: str
    node_type: str
    exec_kind: str = ""
    median_ms: float = 0.0
    min_ms: float = 0.0
    std_ms: float = 0.0
    layers: tuple[str, ...] = ()
    status: str = "executed"  # "executed" | "not-run" (absorbed by another node)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class LayerRecord:
    """One original layer after matching: its fused flag, the node that executed it, and its time.

    ``time_ms`` is the executing node's median time on the layer that survived fusion and 0 on absorbed
    layers; ``absorbed`` lists the layers fused into this one, ``params`` keeps absorbed layers' parameters
    (e.g. the pool kind and size of a pool fused into a convolution). Inserted toolchain nodes appear as
    records with ``fused == INSERTED`` and ``layer_type`` = the node type.
    """

    layer: str
    layer_type: str
    fused: str
    fused_into: str = ""
    node: str = ""
    node_type: str = ""
    exec_kind: str = ""
    time_ms: float = 0.0
    min_ms: float = 0.0
    std_ms: float = 0.0
    absorbed: tuple[str, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
