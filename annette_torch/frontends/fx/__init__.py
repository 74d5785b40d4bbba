"""torch.fx front end (`trace`): ``nn.Module`` + input shape -> `Network`, without running the model.

The module is traced symbolically once (``torch.fx.Tracer``, the tracer behind ``symbolic_trace``; the
`GraphModule` code generation that ``symbolic_trace`` adds is skipped because nothing here executes the
graph). The graph is then walked once, computing each node's output shape with analytic rules looked up
by module class, function object or method name. There is no forward pass: the analytic path performs no
torch operation at all.

Nodes without an analytic rule are evaluated alone on the ``meta`` device (shapes only, no data) and
become ``Unknown`` layers carrying ``op=<name>``; one warning lists them. Modules whose ``forward`` cannot
be traced symbolically (control flow on tensor values) are exported to ONNX and read by the ONNX front end;
inputs larger than 256 per spatial dimension are exported at small probe sizes and scaled back by ONNX shape
inference, so the fallback never needs the memory of a full-size forward pass when the probes carry over
(not when ``forward`` branches on tensors: a branch may test the input's shape, so the real shape is
exported when its pass is of a reasonable size).

Mapping to layer types follows what the ONNX front end produces for an ONNX export of the same model, with
layers named after the module's qualified name (``layer1.0.conv1``, attribute ``module``; a module called
twice gives ``layer1.0.relu`` and ``layer1.0.relu_1``) or, for functions and methods, after the fx node
(``add_3``, attribute ``scope``: the module whose ``forward`` made the call). Conventions shared with the
ONNX front end: products with batch dimensions ``[B..., M, K] x [K, N]`` store ``(prod(B), K, M, 1) ->
(prod(B), N, M, 1)``; ``clamp(0, 6)`` is ``Relu6``; a mean or amax over all spatial dimensions is a
``GlobalPool``; ``split``/``chunk``/``unbind`` are one ``Slice`` layer carrying the first piece's shape;
squeeze/unsqueeze/view/reshape are ``Reshape``. Unlike the exporter, BatchNorm is kept as a layer (fusing
it is the mapping pass's job). Ops that export to nothing (dropout, identity, ``contiguous``, dtype casts)
produce no layer; shape queries (``x.size(0)``, ``x.shape[2]``) evaluate to Python ints; tensors that
depend only on parameters, constants and shapes (``zeros_like``) are folded, as the exporter does.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn as nn
from torch.fx import Tracer

from ...errors import ModelLoadError
from ...ir import MAX_ELEMS, Network
from . import rules  # noqa: F401 - registers the analytic rules in the dispatch tables the walker consults
from .onnx_fallback import _onnx_fallback
from .registry import _module_rule
from .values import _first_line, _NeedsOnnx
from .walker import _Walker

__all__ = ["trace"]

log = logging.getLogger(__name__)


def trace(module: nn.Module, input_shape: Sequence[int] | Sequence[Sequence[int]],
          name: str | None = None) -> Network:
    """Convert ``module`` called on tensors of ``input_shape`` into a layer `Network`.

    ``input_shape`` is one shape (``(1, 3, 224, 224)``) or one shape per ``forward`` argument. Shapes are
    derived analytically; the model is never run. If ``torch.fx`` cannot trace ``forward`` (e.g. an ``if``
    on a tensor value) the module is exported to ONNX (which runs it once on zeros; large inputs are run at
    a small probe size and scaled back by ONNX shape inference, unless ``forward`` branches on tensors, which
    may be its input's shape) and converted by `annette_torch.from_onnx`; a warning says where ``forward``
    branched and at which shape the branches were decided. Raises `ModelLoadError` for a bad shape, a
    non-module, or a model that neither path can read.
    """
    if not isinstance(module, nn.Module):
        raise ModelLoadError(f"trace() needs a torch.nn.Module, got {type(module).__name__}; "
                             "for an ONNX file use annette_torch.from_onnx")
    shapes = _parse_shapes(input_shape)
    cls = type(module).__name__
    name = name or cls
    if _module_rule(type(module)) is not None:  # a module with a rule of its own (nn.TransformerEncoder): fx
        return _as_child(module, shapes, name)  # traces a root's forward, so trace a module that calls it
    try:
        graph = Tracer().trace(module)
    except Exception as e:  # noqa: BLE001 - any tracing failure means: try the ONNX route
        return _onnx_fallback(module, shapes, name, f"{type(e).__name__}: {_first_line(e)}")
    walker = _Walker(module, shapes, name)
    try:
        net = walker.run(graph)
    except _NeedsOnnx as e:
        return _onnx_fallback(module, shapes, name, str(e))
    if walker.unknown:
        ops = ", ".join(f"{op} (x{n})" if n > 1 else op for op, n in walker.unknown.items())
        log.warning("trace(%s): no layer model type for %d node(s), typed Unknown (shapes from the meta "
                    "device): %s", cls, sum(walker.unknown.values()), ops)
    return net


class _Caller(nn.Module):
    """Calls its one child on one input: lets a module with a rule of its own be converted by that rule."""

    def __init__(self, child: nn.Module) -> None:
        super().__init__()
        self.m = child

    def forward(self, x: Any) -> Any:
        return self.m(x)


class _Caller2(_Caller):
    def forward(self, x: Any, y: Any) -> Any:  # type: ignore[override]
        return self.m(x, y)


class _Caller3(_Caller):
    def forward(self, x: Any, y: Any, z: Any) -> Any:  # type: ignore[override]
        return self.m(x, y, z)


def _as_child(module: nn.Module, shapes: list[tuple[int, ...]], name: str) -> Network:
    """`trace` of a module converted by its rule: the network of a `_Caller` of it, without the ``m.`` prefix."""
    callers = {1: _Caller, 2: _Caller2, 3: _Caller3}
    if len(shapes) not in callers:
        raise ModelLoadError(f"{name}: give one to three input shapes, got {len(shapes)}")
    net = trace(callers[len(shapes)](module), shapes, name)
    strip = (lambda v: v[2:] if isinstance(v, str) and v.startswith("m.") else ("" if v == "m" else v))
    net.names[:] = [strip(n) or name for n in net.names]
    for key in ("module", "scope"):
        if key in net.attrs:
            net.attrs[key] = [strip(v) for v in net.attrs[key]]
    return net


def _parse_shapes(input_shape: Any) -> list[tuple[int, ...]]:
    def is_int(v: Any) -> bool:
        return isinstance(v, (int, np.integer)) and not isinstance(v, bool)

    def one(s: Any) -> tuple[int, ...]:
        if isinstance(s, np.ndarray):
            s = s.tolist()
        if not isinstance(s, (tuple, list, torch.Size)) or not all(is_int(v) for v in s):
            raise ModelLoadError(f"input_shape must be a sequence of ints such as (1, 3, 224, 224), got {s!r}")
        if len(s) == 0:
            raise ModelLoadError("input_shape is empty; give the full input shape such as (1, 3, 224, 224)")
        if any(v <= 0 for v in s):
            raise ModelLoadError(f"input_shape {list(s)} has a zero or negative dimension; "
                                 "all dimensions (batch included) must be positive")
        if math.prod(int(v) for v in s) > MAX_ELEMS:
            raise ModelLoadError(f"input_shape {list(s)} has more than 2^50 elements; no network has tensors "
                                 "this large")
        return tuple(int(v) for v in s)

    if isinstance(input_shape, np.ndarray):
        input_shape = input_shape.tolist()
    if not isinstance(input_shape, (tuple, list, torch.Size)):
        raise ModelLoadError(f"input_shape must be a shape such as (1, 3, 224, 224) or a list of shapes, "
                             f"got {type(input_shape).__name__}")
    if len(input_shape) == 0:
        raise ModelLoadError("input_shape is empty; give the full input shape such as (1, 3, 224, 224)")
    if all(is_int(v) for v in input_shape):
        return [one(input_shape)]
    return [one(s) for s in input_shape]
