"""Element-wise math, reductions and broadcasts as architectures of the 2020s write them (cosine attention's
``F.normalize``, a hand-written channels-first LayerNorm's ``pow`` / ``sqrt``, masks built with comparisons and
``where``, a class token ``expand``-ed over the batch): both front ends read them without ``Unknown`` layers and
agree on the types; a ``torch.fx.wrap``-ed function that copies a list argument (torchvision's shifted-window
attention) traces; a bool mask made by one wrapped call reaches the next one as a bool.
"""

from __future__ import annotations

import io
import math
import warnings

import onnx
import pytest
import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F
from onnx import TensorProto, helper

import annette_torch as at
from annette_torch.ir import LayerType as T

#: an op applied to a linear layer's output of shape (1, 16, 32): tokens, as in a transformer
OPS = {
    "exp": lambda x: x.exp(),
    "sqrt_abs": lambda x: x.abs().sqrt(),
    "pow": lambda x: x.pow(2),
    "erf": lambda x: torch.erf(x),
    "log1p": lambda x: torch.log(x.abs() + 1),
    "neg": lambda x: -x,
    "elu": lambda x: F.elu(x),
    "where": lambda x: torch.where(x > 0, x, x * 0.1),
    "masked_fill": lambda x: x.masked_fill(x > 1, -100.0),
    "cumsum": lambda x: x.cumsum(1),
    "normalize": lambda x: F.normalize(x, dim=-1),
    "l2_norm": lambda x: x / x.norm(dim=-1, keepdim=True),
    "sum": lambda x: x - x.sum(-1, keepdim=True),
    "max_dim": lambda x: x - x.max(dim=-1, keepdim=True)[0],
    "topk": lambda x: x.topk(4, dim=-1)[0],
    "square": lambda x: torch.square(x),
    "atan": lambda x: torch.atan(x),
    "mean_tokens": lambda x: x.mean(1),
    "expand": lambda x: x[:, :1].expand(-1, 16, -1) + x,
    "expand_as": lambda x: x.mean(1, keepdim=True).expand_as(x) * x,
    "repeat": lambda x: x.repeat(1, 2, 1),
    "hand_layer_norm": lambda x: (x - x.mean(-1, keepdim=True)) / torch.sqrt(
        (x - x.mean(-1, keepdim=True)).pow(2).mean(-1, keepdim=True) + 1e-6),
}


class _Op(nn.Module):
    def __init__(self, f) -> None:
        super().__init__()
        self.f = f
        self.lin = nn.Linear(32, 32)

    def forward(self, x):
        return self.f(self.lin(x))


def _onnx(model: nn.Module, shape: tuple[int, ...]) -> at.Network:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the exporter's notes on Python conditions over shapes)
        torch.onnx.export(model, torch.randn(*shape), buf, opset_version=17, dynamo=False)
    return at.from_onnx(onnx.load_from_string(buf.getvalue()))


def _types(net: at.Network) -> set[str]:
    return set(net.type_labels()) - {"Input"}


@pytest.mark.parametrize("name", list(OPS))
def test_elementwise_ops_read_alike_and_never_unknown(name):
    model = _Op(OPS[name]).eval()
    traced, exported = at.trace(model, (1, 16, 32)), _onnx(model, (1, 16, 32))
    assert "Unknown" not in _types(traced) and "Unknown" not in _types(exported)
    assert _types(traced) == _types(exported), name  # (the export may share a repeated x - mean: fewer layers)


def test_math_ops_are_elementwise_reductions_reduce_and_broadcasts_copy():
    traced = {name: _types(at.trace(_Op(OPS[name]).eval(), (1, 16, 32))) for name in OPS}
    for name in ("exp", "pow", "erf", "neg", "elu", "where", "masked_fill", "cumsum"):
        assert "Elementwise" in traced[name], name
    for name in ("sum", "l2_norm", "mean_tokens"):
        assert "ReduceMean" in traced[name], name
    for name in ("expand", "expand_as", "repeat"):
        assert "Concat" in traced[name], name


def _model(nodes, out_shape, inputs=(("x", [1, 8, 4, 4]),)):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_onnx_reductions_casts_and_pixel_shuffles():
    nodes = [helper.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=1),
             helper.make_node("ReduceMax", ["s"], ["m"], axes=[1], keepdims=1),  # over channels: no pooling
             helper.make_node("Cast", ["m"], ["c"], to=TensorProto.FLOAT),
             helper.make_node("Expand", ["c", "shape"], ["y"])]
    inits = [helper.make_tensor("axes", TensorProto.INT64, [1], [1]),
             helper.make_tensor("shape", TensorProto.INT64, [4], [1, 8, 4, 4])]
    net = at.from_onnx(_with_init(nodes, [1, 8, 4, 4], inits))
    assert net.type_labels() == ["Input", "ReduceMean", "ReduceMean", "Concat"]  # (the cast is no layer)
    assert net.out_shape(3) == (1, 8, 4, 4)
    shuffle = at.from_onnx(_model([helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2)], [1, 2, 8, 8]))
    assert shuffle.type_labels() == ["Input", "Transpose"] and shuffle.out_shape(1) == (1, 2, 8, 8)


def _with_init(nodes, out_shape, inits):
    model = _model(nodes, out_shape)
    model.graph.initializer.extend(inits)
    return model


# ------------------------------------------------------------------------------------------------------
# wrapped functions: torchvision's Swin V2 cosine window attention, in its style


def cosine_window_attention(x, qkv_weight, proj_weight, bias, window_size: list[int], num_heads: int,
                            shift_size: list[int], logit_scale):
    """Window attention as torchvision writes it: the shift list copied and zeroed where a window covers the map,
    cosine similarities (``F.normalize``) scaled by a clamped, exponentiated learned temperature."""
    B, H, W, C = x.shape
    shift_size = shift_size.copy()  # (fx hands the call an immutable list: copying it must work)
    if window_size[0] >= H:
        shift_size[0] = 0
    if window_size[1] >= W:
        shift_size[1] = 0
    if sum(shift_size) > 0:
        x = torch.roll(x, shifts=(-shift_size[0], -shift_size[1]), dims=(1, 2))
    n = (H // window_size[0]) * (W // window_size[1])
    x = x.view(B, H // window_size[0], window_size[0], W // window_size[1], window_size[1], C)
    x = x.permute(0, 1, 3, 2, 4, 5).reshape(B * n, window_size[0] * window_size[1], C)
    qkv = F.linear(x, qkv_weight).reshape(x.size(0), x.size(1), 3, num_heads, C // num_heads).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    attn = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
    attn = attn * torch.clamp(logit_scale, max=math.log(100.0)).exp() + bias
    x = F.softmax(attn, dim=-1).matmul(v).transpose(1, 2).reshape(x.size(0), x.size(1), C)
    x = F.linear(x, proj_weight)
    x = x.view(B, H // window_size[0], W // window_size[1], window_size[0], window_size[1], C)
    x = x.permute(0, 1, 3, 2, 4, 5).reshape(B, H, W, C)
    if sum(shift_size) > 0:
        x = torch.roll(x, shifts=(shift_size[0], shift_size[1]), dims=(1, 2))
    return x


torch.fx.wrap("cosine_window_attention")


class CosineWindowBlock(nn.Module):
    def __init__(self, dim: int = 32, heads: int = 2, window: int = 4, shift: int = 2) -> None:
        super().__init__()
        self.window, self.shift, self.heads = [window, window], [shift, shift], heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim, bias=False)
        self.logit_scale = nn.Parameter(torch.log(10 * torch.ones(heads, 1, 1)))
        self.cpb_mlp = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, heads, bias=False))
        self.register_buffer("coords", torch.rand(window * window, window * window, 2))
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        bias = 16 * torch.sigmoid(self.cpb_mlp(self.coords).permute(2, 0, 1).unsqueeze(0))  # (constant: folded)
        return x + self.norm(cosine_window_attention(x, self.qkv.weight, self.proj.weight, bias, self.window,
                                                     self.heads, self.shift, self.logit_scale))


def test_a_wrapped_window_attention_copying_its_list_argument_traces_without_unknown_layers():
    model = CosineWindowBlock().eval()
    traced, exported = at.trace(model, (1, 8, 8, 32)), _onnx(model, (1, 8, 8, 32))
    assert traced.unknown_ops() == [] and exported.unknown_ops() == []
    assert sorted(traced.type_labels()) == sorted(exported.type_labels())
    assert {"MatMul", "Softmax", "ReduceMean", "Concat"} <= set(traced.type_labels())  # (the temperature: folded)
    with torch.no_grad():
        assert model(torch.randn(1, 8, 8, 32)).shape == (1, 8, 8, 32)


def positive(x):
    return x > 0


def leaky_where(mask, x):
    return torch.where(mask, x, 0.1 * x)


torch.fx.wrap("positive")
torch.fx.wrap("leaky_where")


class TwoWrappedCalls(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        y = self.lin(x)
        return leaky_where(positive(y), y)


def test_a_bool_mask_from_one_wrapped_call_reaches_the_next_as_a_bool():
    """Each wrapped call is recovered from its own ONNX export: the second one's export runs on a bool mask (on a
    float one, ``where`` fails, and the trace with it)."""
    net = at.trace(TwoWrappedCalls().eval(), (1, 4, 8))
    assert net.unknown_ops() == []
    assert net.type_labels() == ["Input", "FullyConnected", "Elementwise", "Mul", "Elementwise"]
