"""IR -> ``torch.nn.Module`` back end: `to_module` builds a module whose ``forward`` walks a layer `Network`'s
graph with the weights `to_onnx` uses (same ``seed``), for users who export through torch (quantisers,
``torch.onnx``); for supported layers it computes what the ONNX model does.

torch is imported inside `to_module` only, so importing the export package (the benchmark hot path, which
only needs `to_onnx`) does not load torch.
"""

from __future__ import annotations

import keyword
from typing import Any, Callable

import numpy as np

from ...ir import LayerType, Network
from .geometry import conv_transpose_attrs, matmul_trans_b, permutation, window_attrs
from .plan import CONV, MERGE, ExportError, Layer, Plan, tile_repeats, where
from .weights import check_size, layer_params

__all__ = ["to_module"]

T = LayerType


def to_module(net: Network, seed: int = 0):
    """An ``nn.Module`` whose ``forward`` follows ``net``'s graph, with the weights `to_onnx` uses (same seed).

    ``forward`` takes one tensor per ``Input`` layer, in the network's order, shaped as in the ONNX export
    (``module.input_shapes``), and returns the output of the layer nobody consumes, or a tuple of them in
    layer order. Layers with weights are submodules named after the layer (``.`` replaced by ``_``;
    ``module.layer_names`` maps a submodule name back); the others are torch functions. The module is in
    eval mode. Raises `ExportError` for the layer types `to_onnx` rejects.

    Asymmetric padding (odd totals) is an explicit ``F.pad`` before the layer; for an average pool this
    counts the padded zeros, where ONNX's ``AveragePool`` (``count_include_pad=0``) does not.
    """
    import torch  # lazily: the benchmark hot path (to_onnx) needs no torch
    from torch import nn

    plan = Plan(net)
    check_size(net)
    b = _Builder(net, plan, torch)
    steps: list[tuple[int, list[int], Any]] = []
    for i in plan.order:
        t = LayerType(int(net.types[i]))
        if t == T.INPUT:
            continue
        ps = plan.parents[i]
        params = layer_params(net, plan, i, seed)
        to4 = plan.rank[i] == 4 and plan.rank[ps[0]] == 2 and t not in MERGE and t != T.CONCAT \
            and t not in (T.FULLY_CONNECTED, T.FLATTEN, T.RESHAPE)
        pre = tuple(net.out_shape(ps[0])) if to4 else None
        steps.append((i, ps, (pre, _STEPS[t](b, plan.layer(i, params)))))

    inputs = [i for i in plan.order if net.types[i] == T.INPUT]
    cls = _module_class(nn, _arg_names([net.names[i] for i in inputs]))
    return cls(net, plan, steps, b.modules, {k: b.tensor(v) for k, v in b.buffers.items()}, b.layer_names,
               inputs)


# small picklable callables (closures would do, but these print readably in a debugger)
class _Fn:
    """A torch function of the first input, with fixed extra arguments."""

    def __init__(self, f, *args, **kwargs) -> None:
        self.f, self.args, self.kwargs = f, args, kwargs

    def __call__(self, root, xs):
        return self.f(xs[0], *self.args, **self.kwargs)


class _Method:
    """A tensor method of the first input, with fixed arguments."""

    def __init__(self, name: str, *args, **kwargs) -> None:
        self.name, self.args, self.kwargs = name, args, kwargs

    def __call__(self, root, xs):
        return getattr(xs[0], self.name)(*self.args, **self.kwargs)


class _Slice:
    """The leading ``dst`` entries of every axis of the first input."""

    def __init__(self, dst: tuple[int, ...]) -> None:
        self.dst = dst

    def __call__(self, root, xs):
        return xs[0][tuple(slice(0, d) for d in self.dst)]


class _Pick:
    """Entry ``index`` of the first input's leading axis."""

    def __init__(self, index: int) -> None:
        self.index = index

    def __call__(self, root, xs):
        return xs[0][self.index]


class _Chain:
    """A binary op folded over all inputs, left to right."""

    def __init__(self, op) -> None:
        self.op = op

    def __call__(self, root, xs):
        acc = xs[0]
        for x in xs[1:]:
            acc = self.op(acc, x)
        return acc


class _WithBuffer:
    """A binary op of the first input and a constant registered as a module buffer."""

    def __init__(self, op, buffer: str) -> None:
        self.op, self.buffer = op, buffer

    def __call__(self, root, xs):
        return self.op(xs[0], getattr(root, self.buffer))


class _Cat:
    """Concatenation of all inputs along the channels."""

    def __init__(self, torch) -> None:
        self.cat = torch.cat

    def __call__(self, root, xs):
        return self.cat(list(xs), 1)


class _Call:
    """A submodule applied to the first input."""

    def __init__(self, m) -> None:
        self.m = m

    def __call__(self, root, xs):
        return self.m(xs[0])


class _Flattened(_Call):
    """A submodule applied to the first input flattened to 2-D."""

    def __init__(self, m, torch) -> None:
        super().__init__(m)
        self.flatten = torch.flatten

    def __call__(self, root, xs):
        return self.m(self.flatten(xs[0], 1))


class _Padded(_Call):
    """A submodule applied after an explicit (asymmetric) ``F.pad`` with ``fill``."""

    def __init__(self, m, pads, fill: float) -> None:
        super().__init__(m)
        import torch.nn.functional as F
        self.pad, self.pads, self.fill = F.pad, pads, fill

    def __call__(self, root, xs):
        return self.m(self.pad(xs[0], self.pads, value=self.fill))


class _Cropped(_Call):
    """A transposed convolution whose output is cropped by asymmetric padding."""

    def __init__(self, m, pads) -> None:
        super().__init__(m)
        self.pads = pads

    def __call__(self, root, xs):
        hb, he, wb, we = self.pads
        y = self.m(xs[0])
        return y[:, :, hb:y.shape[2] - he, wb:y.shape[3] - we]


class _Builder:
    """What the step builders of one `to_module` call share: torch, the network, and the submodules, constant
    buffers and submodule names made so far."""

    def __init__(self, net: Network, plan: Plan, torch: Any) -> None:
        self.net, self.plan = net, plan
        self.torch, self.nn, self.F = torch, torch.nn, torch.nn.functional
        self.modules: dict[str, Any] = {}
        self.buffers: dict[str, np.ndarray] = {}
        self.layer_names: dict[str, str] = {}

    def tensor(self, a: np.ndarray):
        return self.torch.from_numpy(np.ascontiguousarray(a))

    def attr_name(self, i: int) -> str:
        """Layer ``i``'s submodule name: its name with ``.`` as ``_``, made unique."""
        name = self.net.names[i]
        a = name.replace(".", "_") or f"layer{i}"
        while a in self.modules or a in self.buffers or a in self.layer_names and self.layer_names[a] != name:
            a += "_"
        self.layer_names[a] = name
        return a

    def add(self, i: int, m: Any, **values: np.ndarray) -> Any:
        """Register ``m`` as layer ``i``'s submodule, its parameters and buffers (``weight=...``) set to ``values``."""
        with self.torch.no_grad():
            for k, v in values.items():
                getattr(m, k).copy_(self.tensor(v))
        self.modules[self.attr_name(i)] = m
        return m


# ------------------------------------------------------------------------------------------------------
# step builders: builder(b, layer) -> the callable that computes the layer's output from its inputs


def _window(b: _Builder, layer: Layer) -> Any:
    """Convolutions and pooling; asymmetric padding is an explicit ``F.pad`` before the layer."""
    net, nn, i, t = b.net, b.nn, layer.i, layer.t
    a = window_attrs(net, i, allow_ceil=t not in CONV)
    hb, wb, he, we = a["pads"]
    sym = hb == he and wb == we
    pad = (hb, wb) if sym else (0, 0)
    if t in CONV:
        m = b.add(i, nn.Conv2d(int(net.c_in[i]), int(net.c_out[i]), a["kernel"], a["strides"], pad, a["dilations"],
                               max(int(net.groups[i]), 1), bias=True), weight=layer.params["W"], bias=layer.params["B"])
        fill = 0.0
    elif t == T.MAX_POOL:
        m = b.add(i, nn.MaxPool2d(a["kernel"], a["strides"], pad, a["dilations"], ceil_mode=a["ceil"]))
        fill = float("-inf")
    else:
        m = b.add(i, nn.AvgPool2d(a["kernel"], a["strides"], pad, ceil_mode=a["ceil"], count_include_pad=False))
        fill = 0.0
    return _Call(m) if sym else _Padded(m, (wb, we, hb, he), fill)


def _conv_transpose(b: _Builder, layer: Layer) -> Any:
    net, i = b.net, layer.i
    kw = conv_transpose_attrs(net, i)
    hb, wb, he, we = kw["pads"]
    m = b.add(i, b.nn.ConvTranspose2d(int(net.c_in[i]), int(net.c_out[i]), kw["kernel_shape"], kw["strides"],
                                      (hb, wb) if (hb, wb) == (he, we) else 0, kw.get("output_padding", 0),
                                      kw["group"], True, kw["dilations"]),
              weight=layer.params["W"], bias=layer.params["B"])
    return _Call(m) if (hb, wb) == (he, we) else _Cropped(m, (hb, he, wb, we))


def _fully_connected(b: _Builder, layer: Layer) -> Any:
    """``nn.Linear`` on a 2-D input, on the flattened input, or over the rows of a token tensor."""
    i = layer.i
    rows = len(layer.dst) > 2 and b.net.attr("shape", i) is not None
    if rows and b.net.attr("bias", i) is False:  # nn.Linear(..., bias=False), as the ONNX export's lone MatMul
        m = b.add(i, b.nn.Linear(int(b.net.c_in[i]), int(b.net.c_out[i]), bias=False), weight=layer.params["W"])
    else:
        m = b.add(i, b.nn.Linear(int(b.net.c_in[i]), int(b.net.c_out[i])), weight=layer.params["W"],
                  bias=layer.params["B"])
    return _Call(m) if rows or b.plan.rank[layer.parents[0]] == 2 else _Flattened(m, b.torch)


class _MatMul:
    """The product of the two inputs, the second one's last two axes swapped first when ``trans_b``."""

    def __init__(self, torch, trans_b: bool) -> None:
        self.matmul, self.trans_b = torch.matmul, trans_b

    def __call__(self, root, xs):
        return self.matmul(xs[0], xs[1].transpose(-2, -1) if self.trans_b else xs[1])


def _matmul(b: _Builder, layer: Layer) -> Any:
    shapes = [b.plan.shape(p) for p in layer.parents]
    return _MatMul(b.torch, matmul_trans_b(b.net, layer.i, layer.dst, *shapes))


def _softmax(b: _Builder, layer: Layer) -> Any:
    axis = b.net.attr("axis", layer.i)
    return _Call(b.add(layer.i, b.nn.Softmax(dim=1 if axis is None else int(axis))))


def _batch_norm(b: _Builder, layer: Layer) -> Any:
    c, p = int(b.net.c_out[layer.i]), layer.params
    m = b.nn.BatchNorm2d(c, eps=1e-5) if b.plan.rank[layer.i] == 4 else b.nn.BatchNorm1d(c, eps=1e-5)
    return _Call(b.add(layer.i, m, weight=p["scale"], bias=p["bias"], running_mean=p["mean"], running_var=p["var"]))


def _layer_norm(b: _Builder, layer: Layer) -> Any:
    return _Call(b.add(layer.i, b.nn.LayerNorm(int(layer.dst[-1]), eps=1e-5), weight=layer.params["scale"],
                       bias=layer.params["bias"]))


def _activation(b: _Builder, layer: Layer) -> Any:
    return _Call(b.add(layer.i, _TORCH_ACT[layer.t](b.nn, b.net, layer.i)))


def _global_pool(b: _Builder, layer: Layer) -> Any:
    pool = b.nn.AdaptiveMaxPool2d if str(b.net.attr("pool", layer.i) or "avg") == "max" else b.nn.AdaptiveAvgPool2d
    return _Call(b.add(layer.i, pool(1)))


def _clip(b: _Builder, layer: Layer) -> Any:
    lo, hi = b.net.attr("clip_min", layer.i), b.net.attr("clip_max", layer.i)
    return _Fn(b.torch.clamp, min=None if lo is None else float(lo), max=None if hi is None else float(hi))


def _merge(b: _Builder, layer: Layer) -> Any:
    """A binary op of the inputs, or of the one input and a constant buffer."""
    torch = b.torch
    op = {T.ADD: torch.add, T.MUL: torch.mul, T.SUB: torch.sub, T.DIV: torch.div}[layer.t]
    if len(layer.parents) == 1:
        name = b.attr_name(layer.i) + "_C"
        b.buffers[name] = layer.params["C"]
        return _WithBuffer(op, name)
    return _Chain(op)


def _concat(b: _Builder, layer: Layer) -> Any:
    reps = tile_repeats(layer)
    return _Cat(b.torch) if reps is None else _Method("repeat", *reps)  # (one input tiled: an expand or repeat)


def _flatten(b: _Builder, layer: Layer) -> Any:
    return _reshape(b, layer) if layer.flattens_leading else _Fn(b.torch.flatten, 1)


def _reshape(b: _Builder, layer: Layer) -> Any:
    return _Method("reshape", tuple(int(v) for v in layer.dst))


def _transpose(b: _Builder, layer: Layer) -> Any:
    return _Method("permute", tuple(permutation(b.net, layer.i, layer.src, layer.dst)))


def _resize(b: _Builder, layer: Layer) -> Any:
    src, dst = layer.src, layer.dst
    if src[:2] != dst[:2]:
        raise ExportError(f"{where(b.net, layer.i)}: to_module resizes spatial dimensions only")
    if str(b.net.attr("mode", layer.i) or "nearest") in ("bilinear", "linear"):
        return _Fn(b.F.interpolate, size=(int(dst[2]), int(dst[3])), mode="bilinear", align_corners=False)
    return _Fn(b.F.interpolate, size=(int(dst[2]), int(dst[3])), mode="nearest")


def _pad(b: _Builder, layer: Layer) -> Any:
    diff = [o - s_ for s_, o in zip(layer.src, layer.dst)]
    flat: list[int] = []
    for d in reversed(diff):
        flat += [d // 2, d - d // 2]
    return _Fn(b.F.pad, tuple(flat))


def _pick(b: _Builder, layer: Layer) -> Any:
    """One entry of the leading axis (``qkv[i]``); pieces of it keeping the axis (a split along it) a slice."""
    if tuple(layer.dst) != tuple(layer.src[1:]):
        return _slice(b, layer)
    return _Pick(int(b.net.attr("index", layer.i) or 0))


def _slice(b: _Builder, layer: Layer) -> Any:
    src, dst = layer.src, layer.dst
    if len(src) != len(dst) or any(o > s_ for s_, o in zip(src, dst)):
        raise ExportError(f"{where(b.net, layer.i)}: output {list(b.net.out_shape(layer.i))} is no slice of input "
                          f"{list(b.net.out_shape(layer.parents[0]))}")
    return _Slice(tuple(int(d) for d in dst))


def _reduce_mean(b: _Builder, layer: Layer) -> Any:
    axes = [a for a, (s_, o) in enumerate(zip(layer.src, layer.dst)) if o == 1 and s_ != 1]
    if not axes:
        raise ExportError(f"{where(b.net, layer.i)}: output {list(b.net.out_shape(layer.i))} is no mean over axes "
                          f"of input {list(b.net.out_shape(layer.parents[0]))}")
    return _Method("mean", tuple(axes), keepdim=True)


def _act_factories() -> dict[LayerType, Any]:
    """Parameter-free layers as ``nn`` submodule factories ``(nn, net, i) -> module``."""
    return {
        T.RELU: lambda nn, net, i: nn.ReLU(),
        T.RELU6: lambda nn, net, i: nn.ReLU6(),
        T.LEAKY_RELU: lambda nn, net, i: nn.LeakyReLU(float(net.attr("alpha", i) or 0.01)),
        T.SIGMOID: lambda nn, net, i: nn.Sigmoid(),
        T.SILU: lambda nn, net, i: nn.SiLU(),
        T.HARDSWISH: lambda nn, net, i: nn.Hardswish(),
        T.HARDSIGMOID: lambda nn, net, i: nn.Hardsigmoid(),
        T.GELU: lambda nn, net, i: nn.GELU(),
        T.TANH: lambda nn, net, i: nn.Tanh(),
        T.SOFTPLUS: lambda nn, net, i: nn.Softplus(),
        T.LRN: lambda nn, net, i: nn.LocalResponseNorm(int(net.attr("size", i) or 5)),
        T.DROPOUT: lambda nn, net, i: nn.Dropout(),
    }


_TORCH_ACT = _act_factories()
#: The step builder of every exportable layer type but ``Input``.
_STEPS: dict[LayerType, Callable[[_Builder, Layer], Any]] = {
    **{t: _window for t in CONV},
    T.MAX_POOL: _window,
    T.AVG_POOL: _window,
    T.CONV_TRANSPOSE: _conv_transpose,
    T.FULLY_CONNECTED: _fully_connected,
    T.MATMUL: _matmul,
    T.SOFTMAX: _softmax,
    T.BATCH_NORM: _batch_norm,
    T.LAYER_NORM: _layer_norm,
    **{t: _activation for t in _TORCH_ACT},
    T.GLOBAL_POOL: _global_pool,
    T.CLIP: _clip,
    **{t: _merge for t in MERGE},
    T.CONCAT: _concat,
    T.FLATTEN: _flatten,
    T.RESHAPE: _reshape,
    T.TRANSPOSE: _transpose,
    T.RESIZE: _resize,
    T.PAD: _pad,
    T.SLICE: _slice,
    T.PICK: _pick,
    T.REDUCE_MEAN: _reduce_mean,
}
_MODULE_CLASSES: dict[tuple[str, ...], type] = {}


def _arg_names(names: list[str]) -> tuple[str, ...]:
    """``forward`` argument names: the input layers' names where they are identifiers, else ``x0``, ``x1``..."""
    out: list[str] = []
    for k, n in enumerate(names):
        a = n if n.isidentifier() and not keyword.iskeyword(n) and n not in ("self",) else f"x{k}"
        out.append(a if a not in out else f"x{k}")
    return tuple(out) if len(set(out)) == len(out) else tuple(f"x{k}" for k in range(len(names)))


def _module_class(nn, arg_names: tuple[str, ...]) -> type:
    """The module class whose ``forward`` takes the named arguments ``arg_names`` (torch.fx needs named
    arguments, not ``*args``)."""
    cls = _MODULE_CLASSES.get(arg_names)
    if cls is not None:
        return cls

    class NetworkModule(nn.Module):
        """A `Network` as an ``nn.Module`` (built by `annette_torch.bench.export.to_module`)."""

        def __init__(self, net, plan, steps, modules, buffers, layer_names, inputs) -> None:
            super().__init__()
            for k, m in modules.items():
                self.add_module(k, m)
            for k, b in buffers.items():
                self.register_buffer(k, b)
            self.network_name = net.name
            self.layer_names = layer_names
            self.input_shapes = [tuple(plan.shape(i)) for i in inputs]
            self._inputs = inputs
            self._steps = steps
            self._outputs = plan.outputs
            self.eval()

        def _run(self, xs):
            env = dict(zip(self._inputs, xs))
            for i, ps, (pre, fn) in self._steps:
                args = [env[p] for p in ps]
                if pre is not None:
                    args[0] = args[0].reshape(pre)
                env[i] = fn(self, args)
            outs = tuple(env[i] for i in self._outputs)
            return outs[0] if len(outs) == 1 else outs

    args = ", ".join(arg_names)
    scope: dict[str, Any] = {}
    exec(f"def forward(self, {args}):\n    return self._run(({args}{',' if len(arg_names) == 1 else ''}))\n",
         scope)
    NetworkModule.forward = scope["forward"]
    _MODULE_CLASSES[arg_names] = NetworkModule
    return NetworkModule
