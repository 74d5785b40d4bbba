"""Graph generator back ends: a layer `Network` -> ONNX model (`to_onnx`, module ``onnx``) or
``torch.nn.Module`` (`to_module`, module ``torch``), with the same graph, shapes and seeded weights.

Shared by both: ``plan`` (exportable types, order, tensor ranks, `ExportError`), ``geometry`` (operator
attributes from the IR columns) and ``weights`` (deterministic per-layer weights).
"""

from __future__ import annotations

from .onnx import node_layers, to_onnx
from .plan import EXPORTABLE, ExportError
from .torch import to_module

__all__ = ["to_onnx", "to_module", "node_layers", "ExportError", "EXPORTABLE"]
