"""Attention and the layout ops of the 2020s' architectures through both front ends: `nn.MultiheadAttention`,
`F.scaled_dot_product_attention`, attention written by hand, `torch.einsum`, stochastic depth and `torch.roll`
trace into the layers a runtime executes, with no `Unknown`, and agree with the ONNX export's reading."""

from __future__ import annotations

import io
from collections import Counter

import numpy as np
import pytest

import onnx
import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

import annette_torch as at
from annette_torch.ir import LayerType as T

#: the layer types that carry an attention block's work; both front ends must count them alike
_COMPUTE = {"FullyConnected", "MatMul", "Softmax", "LayerNorm", "GELU", "Conv", "Concat", "Slice"}


class MHABlock(nn.Module):
    def __init__(self, batch_first: bool = True, need_weights: bool = False) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(64)
        self.attn = nn.MultiheadAttention(64, 4, batch_first=batch_first)
        self.need_weights = need_weights

    def forward(self, x):
        y = self.ln(x)
        return x + self.attn(y, y, y, need_weights=self.need_weights)[0]


class SDPABlock(nn.Module):
    def __init__(self, heads: int = 4) -> None:
        super().__init__()
        self.qkv, self.proj, self.heads = nn.Linear(64, 192), nn.Linear(64, 64), heads

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        return self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, c))


class HandBlock(SDPABlock):
    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        a = (q @ k.transpose(-2, -1) * (c // self.heads) ** -0.5).softmax(dim=-1)
        return self.proj(F.gelu((a @ v).transpose(1, 2).reshape(b, n, c), approximate="tanh"))


class BmmBlock(SDPABlock):
    """Attention on 3-D (batch x heads, tokens, head dim) tensors with torch.bmm, as older code writes it."""

    def forward(self, x):
        b, n, c = x.shape
        h, d = self.heads, c // self.heads
        q, k, v = self.qkv(x).chunk(3, -1)
        q, k, v = (t.reshape(b, n, h, d).transpose(1, 2).reshape(b * h, n, d) for t in (q, k, v))
        a = torch.softmax(torch.bmm(q, k.transpose(1, 2)) * d ** -0.5, dim=-1)
        return self.proj(torch.bmm(a, v).reshape(b, h, n, d).transpose(1, 2).reshape(b, n, c))


class EinsumBlock(nn.Module):
    def forward(self, q, k):
        return torch.einsum("bhld,bhmd->bhlm", q, k).softmax(-1)


@torch.fx.wrap
def stochastic_depth(x, p: float, mode: str, training: bool = True):  # torchvision's form: an fx leaf
    return x


class ShiftBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        y = stochastic_depth(self.conv(x), 0.1, "row", self.training)
        return torch.roll(x + y, shifts=(2, -3), dims=(2, 3))


CASES = [
    (MHABlock(), [(2, 16, 64)]),
    (MHABlock(batch_first=False, need_weights=True), [(16, 2, 64)]),
    (SDPABlock(), [(2, 16, 64)]),
    (HandBlock(), [(2, 16, 64)]),
    (BmmBlock(), [(2, 16, 64)]),
    (EinsumBlock(), [(2, 4, 16, 8), (2, 4, 24, 8)]),
    (ShiftBlock(), [(1, 8, 16, 16)]),
]


def _via_onnx(model, shapes):
    """The model's ONNX export (opset 20, where GELU is one op; PyTorch's fused inference kernels off: they
    do not export), read by the ONNX front end."""
    buf = io.BytesIO()
    fast = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        torch.onnx.export(model, tuple(torch.zeros(*s) for s in shapes), buf, opset_version=20, dynamo=False)
    finally:
        torch.backends.mha.set_fastpath_enabled(fast)
    return at.from_onnx(onnx.load_from_string(buf.getvalue()))


@pytest.mark.parametrize("model, shapes", CASES, ids=lambda c: type(c).__name__ if isinstance(c, nn.Module) else "")
def test_both_front_ends_read_attention_alike_without_unknown_layers(model, shapes):
    model.eval()
    fx = at.trace(model, shapes[0] if len(shapes) == 1 else shapes)
    ox = _via_onnx(model, shapes)
    assert T.UNKNOWN not in fx.types and T.UNKNOWN not in ox.types
    counts = (Counter(t for t in fx.type_labels() if t in _COMPUTE), Counter(t for t in ox.type_labels() if t in _COMPUTE))
    if type(model) is ShiftBlock:
        assert counts[0] == counts[1] == Counter({"Conv": 1, "Slice": 4, "Concat": 2})
    else:
        assert {k: v for k, v in counts[0].items() if k != "Slice"} == {k: v for k, v in counts[1].items() if k != "Slice"}
    # the matrix products carry the same work (ONNX adds the bias adds and the scale multiplications apart)
    heavy = [T.FULLY_CONNECTED, T.MATMUL]
    assert fx.ops[np.isin(fx.types, heavy)].sum() == pytest.approx(ox.ops[np.isin(ox.types, heavy)].sum(), rel=1e-12)
    # ... and the softmax the same columns: its layer models read the row length from W, as the suites' (1, H, L, S)
    # (an nn.MultiheadAttention's heads were (B * H, L, S) through torch.fx, 4-D through ONNX: 2.4x apart)
    cols = [[tuple(int(n.cols[c][i]) for c in ("n", "c_out", "h_out", "w_out"))
             for i in np.flatnonzero(n.types == T.SOFTMAX)] for n in (fx, ox)]
    assert cols[0] == cols[1]
    assert all(w > 1 for *_, w in cols[0])


def test_multihead_attention_is_its_projections_scores_softmax_and_context():
    net = at.trace(MHABlock().eval(), (2, 16, 64))
    rows = dict(zip(net.names, net.type_labels()))
    assert rows["attn.in_proj"] == "FullyConnected" and rows["attn.out_proj"] == "FullyConnected"
    assert rows["attn.scores"] == rows["attn.context"] == "MatMul" and rows["attn.softmax"] == "Softmax"
    i = net.index("attn.scores")
    assert net.ops[i] == 2 * (2 * 4) * 16 * 16 * 16  # batch x heads, L x head dim x S
    assert net.weights[net.index("attn.in_proj")] == 64 * 192


def test_attention_cost_grows_with_depth():
    """A transformer encoder of depth 12 estimates well above depth 1 (it was one Unknown layer before)."""
    def encoder(depth):
        layer = nn.TransformerEncoderLayer(64, 4, 128, batch_first=True, norm_first=True)
        return nn.TransformerEncoder(layer, depth, enable_nested_tensor=False).eval()
    one, twelve = (at.estimate(encoder(d), "ort-cpu", (1, 65, 64)) for d in (1, 12))
    assert not one.unknown_layers and not twelve.unknown_layers
    assert twelve.device_ms > 8 * one.device_ms
    assert one.network.summary()["MatMul"] == 2 and twelve.network.summary()["LayerNorm"] == 24


@pytest.mark.parametrize("norm_first", [False, True])
def test_an_encoder_layer_is_attention_and_feed_forward_with_norms_and_adds(norm_first):
    """(PyTorch's exporter cannot export an encoder layer in eval mode: its fused kernel, or with the fast
    path off its is_causal argument, fails; so the layers are checked against the layer's definition.)"""
    d, ff, L = 64, 128, 17
    layer = nn.TransformerEncoderLayer(d, 4, ff, batch_first=True, norm_first=norm_first, activation="gelu").eval()
    net = at.trace(layer, (1, L, d))
    assert T.UNKNOWN not in net.types
    assert Counter(net.type_labels()) == Counter({"Input": 1, "LayerNorm": 2, "FullyConnected": 4, "Transpose": 4,
                                                  "MatMul": 2, "Softmax": 1, "GELU": 1, "Add": 2})
    fc = net.types == T.FULLY_CONNECTED
    assert net.weights[fc].sum() == d * 3 * d + d * d + d * ff + ff * d
    labels = net.type_labels()
    first_norm = labels.index("LayerNorm")
    assert (first_norm < labels.index("FullyConnected")) == norm_first  # pre-norm: the norm comes first


class GeluMLP(nn.Module):
    def __init__(self, approximate: str) -> None:
        super().__init__()
        self.fc1, self.fc2, self.approximate = nn.Linear(32, 64), nn.Linear(64, 32), approximate

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(x), approximate=self.approximate))


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_a_written_out_gelu_reads_as_one_layer(approximate, opset):
    """Below opset 20 the exporter writes GELU out (erf or tanh form): the ONNX front end folds it back into the
    one GELU layer the fx front end and the runtimes see."""
    model = GeluMLP(approximate).eval()
    buf = io.BytesIO()
    torch.onnx.export(model, (torch.zeros(1, 8, 32),), buf, opset_version=opset, dynamo=False)
    ox = at.from_onnx(onnx.load_from_string(buf.getvalue()))
    fx = at.trace(model, (1, 8, 32))
    assert ox.summary()["GELU"] == fx.summary()["GELU"] == 1 and T.UNKNOWN not in ox.types
    # the bias adds (MatMul + Add, how nn.Linear on tokens exports) are the Linear layers': the residual is left
    assert ox.summary().get("Mul", 0) == 0 and ox.summary()["Add"] == fx.summary()["Add"] == 1
    i = ox.types.tolist().index(T.GELU)
    assert ox.out_shape(i) == fx.out_shape(fx.types.tolist().index(T.GELU))


# ------------------------------------------------------------------------------------------------------
# a function torch.fx leaves as a leaf (torch.fx.wrap, as torchvision's Swin does): its layers are recovered

def shifted_window_attention(x, qkv_weight, proj_weight, window, shift, heads):
    B, H, W, C = x.shape
    pad_b, pad_r = (window - H % window) % window, (window - W % window) % window
    x = F.pad(x, (0, 0, 0, pad_r, 0, pad_b))
    _, pH, pW, _ = x.shape
    x = torch.roll(x, shifts=(-shift, -shift), dims=(1, 2))
    x = x.view(B, pH // window, window, pW // window, window, C).permute(0, 1, 3, 2, 4, 5).reshape(-1, window * window, C)
    qkv = F.linear(x, qkv_weight).reshape(x.size(0), x.size(1), 3, heads, C // heads).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    attn = (q * (C // heads) ** -0.5).matmul(k.transpose(-2, -1))
    if shift > 0:
        mask = x.new_zeros((pH, pW))
        cnt = 0
        for h in ((0, -window), (-window, -shift), (-shift, None)):
            for w in ((0, -window), (-window, -shift), (-shift, None)):
                mask[h[0]:h[1], w[0]:w[1]] = cnt
                cnt += 1
        mask = mask.view(pH // window, window, pW // window, window).permute(0, 2, 1, 3).reshape(-1, window * window)
        mask = mask.unsqueeze(1) - mask.unsqueeze(2)
        attn = attn + mask.masked_fill(mask != 0, -100.0).repeat(B, 1, 1).unsqueeze(1)
    x = attn.softmax(-1).matmul(v).transpose(1, 2).reshape(x.size(0), x.size(1), C)
    x = F.linear(x, proj_weight)
    x = x.view(B, pH // window, pW // window, window, window, C).permute(0, 1, 3, 2, 4, 5).reshape(B, pH, pW, C)
    x = torch.roll(x, shifts=(shift, shift), dims=(1, 2))
    return x[:, :H, :W, :].contiguous()

torch.fx.wrap("shifted_window_attention")


class ShiftedWindowBlock(nn.Module):
    def __init__(self, shift: int = 3) -> None:
        super().__init__()
        self.qkv, self.proj = nn.Parameter(torch.randn(96, 32)), nn.Parameter(torch.randn(32, 32))
        self.ln, self.shift = nn.LayerNorm(32), shift

    def forward(self, x):
        return x + shifted_window_attention(self.ln(x), self.qkv, self.proj, 7, self.shift, 4)


@pytest.mark.parametrize("shift", [0, 3])
def test_a_wrapped_function_is_recovered_from_its_own_onnx_export(shift):
    """Shifted-window attention written as one fx leaf function (pad, roll, window partition, attention with a
    shift mask) becomes its layers (no Unknown) with the same compute as the whole model's ONNX export."""
    model = ShiftedWindowBlock(shift).eval()
    fx, ox = at.trace(model, (1, 26, 26, 32)), _via_onnx(model, [(1, 26, 26, 32)])
    assert T.UNKNOWN not in fx.types
    heavy = [T.FULLY_CONNECTED, T.MATMUL]
    assert Counter(fx.type_labels())["MatMul"] == 2 and Counter(fx.type_labels())["Softmax"] == 1
    assert fx.ops[np.isin(fx.types, heavy)].sum() == pytest.approx(ox.ops[np.isin(ox.types, heavy)].sum(), rel=1e-12)
    names = [n for n in fx.names if n.startswith("shifted_window_attention.")]
    assert len(names) > 10  # the recovered layers are named after the call
    assert fx.out_shape(len(fx) - 1) == (1, 26, 26, 32)


class Norms(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv, self.gn, self.inorm = nn.Conv2d(3, 8, 3), nn.GroupNorm(2, 8), nn.InstanceNorm2d(8, affine=True)

    def forward(self, x):
        return self.inorm(self.gn(self.conv(x)))


@pytest.mark.parametrize("opset", [17, 20])
def test_group_and_instance_norms_read_as_normalisation_layers(opset):
    model = Norms().eval()
    fx = at.trace(model, (1, 3, 16, 16))
    assert fx.type_labels() == ["Input", "Conv", "LayerNorm", "LayerNorm"]
    buf = io.BytesIO()
    torch.onnx.export(model, (torch.zeros(1, 3, 16, 16),), buf, opset_version=opset, dynamo=False)
    ox = at.from_onnx(onnx.load_from_string(buf.getvalue()))
    assert T.UNKNOWN not in ox.types and ox.summary()["LayerNorm"] >= 2


class _Picks(nn.Module):
    """q, k and v picked from a fused projection's permuted output, by index or by ``unbind(0)``, and the class
    token ``x[:, 0]`` (an entry of the second axis: no pick)."""

    def __init__(self, unbind: bool) -> None:
        super().__init__()
        self.unbind = unbind

    def forward(self, x):
        t = x.reshape(1, 49, 3, 2, 16).permute(2, 0, 3, 1, 4)
        q, k, v = t.unbind(0) if self.unbind else (t[0], t[1], t[2])
        return (q @ k.transpose(-2, -1)) @ v, x[:, 0]


@pytest.mark.parametrize("unbind", [False, True])
def test_leading_axis_picks_are_pick_layers_in_both_front_ends(unbind):
    """``qkv[i]`` / ``qkv.unbind(0)`` (torch.fx) and their ONNX Gather of axis 0 / Split (the ONNX front end) are
    ``Pick`` layers, a contiguous part of the input that OpenVINO runs in place; ``x[:, 0]`` stays a ``Slice``."""
    fx, ox = at.trace(_Picks(unbind), (1, 49, 96)), _via_onnx(_Picks(unbind), [(1, 49, 96)])
    for net in (fx, ox):
        labels = Counter(net.type_labels())
        assert labels["Pick"] == (1 if unbind else 3) and labels["Slice"] == 1, labels
        for i in np.flatnonzero(net.types == T.PICK):  # the first of q, k and v: (1, heads, L, d)
            assert net.out_elems[i] == 2 * 49 * 16
