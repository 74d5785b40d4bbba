"""torch.fx front end: layer types, hand-computed ops/weights, shapes against a real forward pass, fallbacks
and errors."""

from __future__ import annotations

import logging
import operator

import numpy as np
import pytest
import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F
from torch.fx.passes.shape_prop import ShapeProp

from annette_torch.errors import ModelLoadError
from annette_torch.estimator import estimate
from annette_torch.frontends.fx import trace
from annette_torch.ir import LayerType as T
from annette_torch.ir import to_nchw

try:
    from layer_helpers import only, types_of
    from models import (FunctionalNet, TinyMobileNetV2, TinyResNet, TinySqueezeNet,
                        TinyVGG)
except ImportError:  # tests/ imported as a package
    from tests.layer_helpers import only, types_of
    from tests.models import (FunctionalNet, TinyMobileNetV2, TinyResNet, TinySqueezeNet,
                              TinyVGG)

LOGGER = "annette_torch.frontends.fx"


def single(layer: nn.Module, shape) -> tuple:
    """Trace a one-layer model; return (network, index of the layer)."""
    net = trace(nn.Sequential(layer), shape)
    assert net.names[0] == "input" and types_of(net)[0] == T.INPUT
    assert len(net) == 2, net.names
    return net, 1


def real_shapes(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> tuple[dict, dict]:
    """Output shapes of a real forward pass: per leaf module (hooks, in call order) and per fx node name."""
    per_module: dict[str, list] = {}
    handles = []
    tracer = fx.Tracer()
    for qn, m in model.named_modules():
        if qn and tracer.is_leaf_module(m, qn):
            def hook(mod, args, out, qn=qn):
                per_module.setdefault(qn, []).append(out)
            handles.append(m.register_forward_hook(hook))
    gm = fx.symbolic_trace(model)
    with torch.no_grad():
        ShapeProp(gm).propagate(*inputs)  # runs the model (and so the hooks): test side only
    for h in handles:
        h.remove()
    per_node = {n.name: n.meta.get("tensor_meta") for n in gm.graph.nodes}
    return per_module, per_node


def ir_fold(type_: T, shape) -> tuple[int, int, int, int]:
    """The IR's NCHW view of a real output shape (products of rank > 2 keep features in C, rows in H)."""
    s = tuple(shape)
    if type_ in (T.FULLY_CONNECTED, T.MATMUL) and len(s) > 2:
        return (int(np.prod(s[:-2])), s[-1], s[-2], 1)
    return to_nchw(s)


def check_against_forward(model: nn.Module, *shapes, expect_layers: int | None = None):
    """Every layer's output shape equals the real forward pass's; every leaf module call is a layer or skipped."""
    model.eval()
    net = trace(model, shapes[0] if len(shapes) == 1 else list(shapes))
    per_module, per_node = real_shapes(model, tuple(torch.randn(s) for s in shapes))
    seen: dict[str, int] = {}
    mods = net.attrs.get("module", [None] * len(net))
    checked = 0
    for i, name in enumerate(net.names):
        t = types_of(net)[i]
        if t == T.INPUT:
            continue
        if mods[i] is not None:
            k = seen.get(mods[i], 0)
            seen[mods[i]] = k + 1
            out = per_module[mods[i]][k]
            out = out[0] if isinstance(out, tuple) else out
            assert name == (mods[i] if k == 0 else f"{mods[i]}_{k}")
            real = out.shape
        else:
            meta = per_node[name]
            if not hasattr(meta, "shape"):  # split / chunk: the layer carries the first piece's shape
                meta = meta[0]
            real = meta.shape
        assert net.out_shape(i) == ir_fold(t, real), f"{name} ({t.label}): {net.out_shape(i)} vs {tuple(real)}"
        checked += 1
    # each leaf module was called as often as it has layers (identity-like modules have none)
    for qn, outs in per_module.items():
        m = model.get_submodule(qn)
        if not isinstance(m, (nn.Dropout, nn.Identity)):
            assert seen.get(qn, 0) == len(outs), qn
    if expect_layers is not None:
        assert len(net) == expect_layers
    assert checked > 0
    return net


# --------------------------------------------------------------------------------------------------
# single layers: hand-computed ops and weights


def test_conv_ops_weights():
    net, i = single(nn.Conv2d(3, 16, 3, stride=2, padding=1), (1, 3, 32, 32))
    assert types_of(net)[i] == T.CONV
    assert net.out_shape(i) == (1, 16, 16, 16)
    assert net.weights[i] == 16 * 3 * 3 * 3
    assert net.ops[i] == 2 * (16 * 16 * 16) * 3 * 9
    assert (net.kh[i], net.kw[i], net.sh[i], net.sw[i], net.ph[i], net.pw[i]) == (3, 3, 2, 2, 2, 2)
    assert net.names[i] == "0" and net.attr("module", i) == "0"


def test_depthwise_and_group_conv():
    net, i = single(nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False), (1, 16, 8, 8))
    assert types_of(net)[i] == T.DEPTHWISE_CONV
    assert net.weights[i] == 16 * 9
    assert net.ops[i] == 2 * 16 * 64 * 9
    assert net.groups[i] == 16
    net, i = single(nn.Conv2d(16, 32, 3, padding=1, groups=4), (1, 16, 8, 8))
    assert types_of(net)[i] == T.GROUP_CONV
    assert net.weights[i] == 32 * 4 * 9
    assert net.ops[i] == 2 * 32 * 64 * 4 * 9


def test_conv_variants():
    net, i = single(nn.Conv2d(4, 4, 3, dilation=2, padding="same"), (1, 4, 10, 12))
    assert net.out_shape(i) == (1, 4, 10, 12) and (net.ph[i], net.pw[i], net.dh[i]) == (4, 4, 2)
    net, i = single(nn.Conv1d(4, 8, 3), (2, 4, 20))
    assert net.out_shape(i) == (2, 8, 18, 1) and (net.kh[i], net.kw[i]) == (3, 1)
    assert net.ops[i] == 2 * 2 * 8 * 18 * 4 * 3
    net, i = single(nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1), (1, 8, 8, 8))
    assert types_of(net)[i] == T.CONV_TRANSPOSE
    assert net.out_shape(i) == (1, 4, 16, 16)
    assert net.weights[i] == 8 * 4 * 16
    assert net.ops[i] == 2 * 64 * 8 * 4 * 16


def test_linear_ops_weights():
    net, i = single(nn.Linear(100, 10), (4, 100))
    assert types_of(net)[i] == T.FULLY_CONNECTED
    assert (net.c_in[i], net.c_out[i]) == (100, 10)
    assert net.weights[i] == 1000 and net.ops[i] == 2 * 4 * 10 * 100
    # 3-D input [B, T, F]: same weights, ops for every row
    net, i = single(nn.Linear(100, 10), (2, 5, 100))
    assert (net.c_in[i], net.c_out[i]) == (100, 10)
    assert net.weights[i] == 1000 and net.ops[i] == 2 * 2 * 5 * 10 * 100


def test_pool_ops():
    net, i = single(nn.MaxPool2d(3, 2, 1), (1, 8, 15, 15))
    assert types_of(net)[i] == T.MAX_POOL and net.out_shape(i) == (1, 8, 8, 8)
    assert net.ops[i] == 2 * (8 * 8 * 8) * 9 and net.weights[i] == 0  # 2 ops per window element
    for k, s, p, size in [(3, 2, 0, 14), (3, 2, 1, 14), (2, 2, 0, 7), (3, 3, 1, 10)]:
        net, i = single(nn.MaxPool2d(k, s, p, ceil_mode=True), (1, 2, size, size))
        real = F.max_pool2d(torch.zeros(1, 2, size, size), k, s, p, ceil_mode=True).shape
        assert net.out_shape(i) == tuple(real), (k, s, p, size)
        net, i = single(nn.AvgPool2d(k, s, p, ceil_mode=True), (1, 2, size, size))
        real = F.avg_pool2d(torch.zeros(1, 2, size, size), k, s, p, ceil_mode=True).shape
        assert net.out_shape(i) == tuple(real) and types_of(net)[i] == T.AVG_POOL
    net, i = single(nn.AdaptiveAvgPool2d(1), (2, 8, 7, 7))
    assert types_of(net)[i] == T.GLOBAL_POOL and net.out_shape(i) == (2, 8, 1, 1)
    assert net.ops[i] == 2 * (2 * 8 * 7 * 7) and net.attr("pool", i) == "avg"  # 2 ops per input element
    net, i = single(nn.AdaptiveMaxPool2d((1, 1)), (2, 8, 7, 7))
    assert types_of(net)[i] == T.GLOBAL_POOL and net.attr("pool", i) == "max"
    net, i = single(nn.AdaptiveAvgPool2d((2, 2)), (1, 8, 8, 8))
    assert types_of(net)[i] == T.AVG_POOL and net.out_shape(i) == (1, 8, 2, 2)
    assert (net.kh[i], net.kw[i], net.sh[i], net.sw[i]) == (4, 4, 4, 4)


@pytest.mark.parametrize("layer, type_", [
    (nn.ReLU(), T.RELU), (nn.ReLU6(), T.RELU6), (nn.LeakyReLU(0.2), T.LEAKY_RELU), (nn.Sigmoid(), T.SIGMOID),
    (nn.SiLU(), T.SILU), (nn.Hardswish(), T.HARDSWISH), (nn.Hardsigmoid(), T.HARDSIGMOID), (nn.GELU(), T.GELU),
    (nn.Tanh(), T.TANH), (nn.Softmax(dim=1), T.SOFTMAX), (nn.Hardtanh(), T.CLIP), (nn.BatchNorm2d(4), T.BATCH_NORM),
    (nn.Flatten(), T.FLATTEN), (nn.Upsample(scale_factor=2), T.RESIZE), (nn.ZeroPad2d((1, 2, 3, 4)), T.PAD),
    (nn.LayerNorm(6), T.LAYER_NORM),
])
def test_module_types(layer, type_):
    shape = (2, 4, 5, 6)
    net, i = single(layer, shape)
    assert types_of(net)[i] == type_
    assert net.out_shape(i) == to_nchw(layer(torch.zeros(shape)).shape)


def test_identity_and_dropout_make_no_layer():
    net = trace(nn.Sequential(nn.Conv2d(3, 4, 1), nn.Dropout(), nn.Identity(), nn.ReLU()), (1, 3, 4, 4))
    assert types_of(net) == [T.INPUT, T.CONV, T.RELU]
    assert net.parents(2) == [1]


# --------------------------------------------------------------------------------------------------
# reference architectures: every layer's shape against a real forward pass


@pytest.mark.parametrize("model", [TinyResNet, TinyMobileNetV2, TinyVGG, TinySqueezeNet, FunctionalNet],
                         ids=lambda m: m.__name__)
def test_reference_models_match_forward(model):
    check_against_forward(model(), (2, 3, 64, 64))


def test_tiny_resnet_structure():
    net = check_against_forward(TinyResNet(), (1, 3, 32, 32))
    assert net.summary() == {"Input": 1, "Conv": 10, "BatchNorm": 10, "Relu": 9, "MaxPool": 1, "Add": 4,
                             "GlobalPool": 1, "Flatten": 1, "FullyConnected": 1}
    # module names map costs back to submodules; the shared ReLU gets one layer per call
    for n in ("conv1", "layer1.0.conv1", "layer2.0.downsample.0", "fc", "layer1.0.relu", "layer1.0.relu_1"):
        net.index(n)
    i = net.index("layer1.0.relu_1")
    assert net.attr("module", i) == "layer1.0.relu"
    add = net.parents(i)[0]
    assert types_of(net)[add] == T.ADD and len(net.parents(add)) == 2
    # a function call records the module whose forward() made it
    assert net.names[add] == "add" and net.attr("scope", add) == "layer1.0" and net.attr("module", add) is None
    assert net.total_weights == sum(p.numel() for n, p in TinyResNet().named_parameters()
                                    if "bn" not in n and "downsample.1" not in n and not n.endswith("bias")) \
        + 2 * sum(m.num_features for m in TinyResNet().modules() if isinstance(m, nn.BatchNorm2d))


def test_mobilenet_types():
    net = trace(TinyMobileNetV2(), (1, 3, 32, 32))
    s = net.summary()
    assert s["DepthwiseConv"] == 4 and s["Relu6"] == 8 and s["Add"] == 1 and s["GlobalPool"] == 1
    assert "Dropout" not in s


def test_resnet50_sized_model():
    from annette_torch import zoo
    model = zoo.get("resnet50")
    net = trace(model, (1, 3, 224, 224))
    assert net.summary()["Conv"] == 53 and net.summary()["Add"] == 16
    # 2 x MACs of ResNet-50 (4.09 GMACs) and its 25.5 M weights (biases, BN excluded from the conv/fc part)
    assert abs(net.total_ops - 2 * 4.09e9) / (2 * 4.09e9) < 0.03
    conv_fc = np.isin(net.types, [T.CONV, T.FULLY_CONNECTED])
    assert net.weights[conv_fc].sum() == sum(m.weight.numel() for m in model.modules()
                                             if isinstance(m, (nn.Conv2d, nn.Linear)))


class Attention(nn.Module):
    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.pos = nn.Parameter(torch.zeros(1, 1, dim))

    def forward(self, x):
        b, c, h, w = x.shape
        t = x.flatten(2).transpose(1, 2) + self.pos
        q, k, v = self.qkv(self.norm(t)).reshape(b, h * w, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        a = torch.matmul(q, k.transpose(-2, -1)) * (c // self.heads) ** -0.5
        a = a.softmax(dim=-1)
        y = (a @ v).transpose(1, 2).reshape(b, h * w, c)
        t = t + self.proj(y)
        t = t + self.mlp(t)
        return t[:, 0], t.permute(0, 2, 1).contiguous().view(b, c, h, w)


def test_attention_block_matches_forward():
    net = check_against_forward(Attention(), (2, 16, 4, 4))
    s = net.summary()
    assert s["MatMul"] == 2 and s["FullyConnected"] == 4 and s["Softmax"] == 1 and s["LayerNorm"] == 1
    # the positional parameter is a constant operand: one input edge, no layer for it
    add = net.index("add")
    assert types_of(net)[add] == T.ADD and len(net.parents(add)) == 1
    # q @ k^T: [2, 2, 16, 8] x [2, 2, 8, 16] -> 2 x MACs = 2 * (2*2) * 16 * 16 * 8
    mm = net.index("matmul")
    assert net.ops[mm] == 2 * 4 * 16 * 16 * 8
    # 3-D linear: c_in = in_features, ops for all B * T rows
    qkv = net.index("qkv")
    assert (net.c_in[qkv], net.c_out[qkv]) == (16, 48) and net.ops[qkv] == 2 * 2 * 16 * 48 * 16


class MultiInput(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(7, 4)

    def forward(self, img, vec, scale: float = 2.0):
        g = self.conv(img).mean((2, 3), keepdim=True).squeeze(-1).squeeze(-1)
        return g * self.fc(vec) * scale


def test_multiple_inputs_and_defaults():
    net = check_against_forward(MultiInput(), (2, 3, 8, 8), (2, 7))
    assert [n for n, t in zip(net.names, types_of(net)) if t == T.INPUT] == ["img", "vec"]
    assert types_of(net)[net.index("mean")] == T.GLOBAL_POOL


def test_functional_net_details():
    net = trace(FunctionalNet(), (2, 3, 32, 32))
    assert types_of(net)[net.index("mean")] == T.GLOBAL_POOL
    assert types_of(net)[net.index("view")] == T.RESHAPE
    assert types_of(net)[net.index("chunk")] == T.SLICE
    # x * 0.5: an element-wise op with one tensor input
    i = net.index("mul_1")
    assert types_of(net)[i] == T.MUL and len(net.parents(i)) == 1
    # the two chunk pieces both come from the one Slice layer
    add = net.index("add")
    assert net.parents(add) == [net.index("chunk"), net.index("chunk")]


class MatrixTranspose(nn.Module):
    def forward(self, x):
        return x.t() + torch.t(x).t().t()


def test_matrix_transpose_has_its_rule(caplog):
    """``x.t()`` and ``torch.t(x)`` are Transpose layers from the analytic rule, not Unknown ones."""
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        net = check_against_forward(MatrixTranspose(), (3, 5))
    assert [types_of(net)[net.index(n)] for n in ("t", "t_1", "t_2", "t_3")] == [T.TRANSPOSE] * 4
    assert net.out_shape(net.index("add")) == to_nchw((5, 3))
    assert [r for r in caplog.records if r.name == LOGGER] == []


def test_no_forward_pass():
    model = TinyResNet()
    calls = []
    for m in model.modules():
        if not list(m.children()):  # leaf modules: the tracer records them without calling them
            m.register_forward_pre_hook(lambda mod, args: calls.append(mod))
    trace(model, (1, 3, 32, 32))
    assert calls == []


# --------------------------------------------------------------------------------------------------
# unknown ops, fallbacks and errors


class WithUnknown(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.norm = nn.GRU(8, 8, batch_first=True)  # (exports as ONNX GRU, which the front end has no type for)
        self.act = nn.ELU()

    def forward(self, x):
        t = self.conv(x).flatten(2).transpose(1, 2)
        return self.act(self.norm(t)[0]).logcumsumexp(1)


def test_unknown_ops_one_warning(caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        net = check_against_forward(WithUnknown(), (2, 3, 10, 10))
    warnings = [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]
    assert len(warnings) == 1
    for op in ("GRU", "logcumsumexp"):
        assert op in warnings[0].getMessage()
    assert net.unknown_ops() == ["GRU", "logcumsumexp"]
    assert types_of(net)[net.index("act")] == T.ELEMENTWISE  # (ELU: element-wise math, not Unknown)
    i = net.index("norm")
    assert types_of(net)[i] == T.UNKNOWN and net.attr("module", i) == "norm"


def test_known_models_log_nothing(caplog):
    """No warning and no debug note of a rule falling back to the meta device."""
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        for model in (TinyResNet, TinyMobileNetV2, TinyVGG, TinySqueezeNet, FunctionalNet, Attention):
            trace(model(), (1, 16, 4, 4) if model is Attention else (1, 3, 32, 32))
    assert [r for r in caplog.records if r.name == LOGGER] == []


class DataDependent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.conv2 = nn.Conv2d(8, 8, 1)

    def forward(self, x):
        y = self.conv(x)
        if y.sum() > 0:
            y = self.conv2(y)
        return F.relu(y)


def test_data_dependent_control_flow_falls_back_to_onnx(caplog):
    pytest.importorskip("annette_torch.frontends.onnx")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        net = trace(DataDependent(), (1, 3, 16, 16), name="dd")
    assert net.name == "dd"
    assert T.CONV in types_of(net) and T.RELU in types_of(net)
    assert any("ONNX" in r.getMessage() for r in caplog.records if r.name == LOGGER)


def test_data_dependent_error_when_export_fails(monkeypatch):
    def broken(*a, **k):
        raise RuntimeError("exporter exploded")
    monkeypatch.setattr(torch.onnx, "export", broken)
    with pytest.raises(ModelLoadError) as e:
        trace(DataDependent(), (1, 3, 16, 16))
    msg = str(e.value)
    assert "DataDependent" in msg and "control flow" in msg and "exporter exploded" in msg and "from_onnx" in msg


def test_data_dependent_branch_is_warned_about(caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        trace(DataDependent(), (1, 3, 16, 16))
    msgs = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert any("control flow on tensors" in m and "test_frontend_fx.py" in m and "all-zero" in m for m in msgs)


class SizeBranch(nn.Module):
    """Untraceable by torch.fx (an ``if`` on a size), with strides, padding, pooling and a flatten head."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(16)
        self.c2 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.pool = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        y = F.relu(self.bn(self.c1(x)))
        if y.shape[-1] % 2 == 1:
            y = F.pad(y, [0, 1, 0, 1])
        y = self.pool(self.c2(y))
        y = y.reshape(y.size(0), y.size(1), -1).mean(-1)
        return self.fc(y)


class Seq1d(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c = nn.Conv1d(4, 8, 5, stride=2)
        self.p = nn.MaxPool1d(2)

    def forward(self, x):
        if x.sum() >= 0:
            x = self.c(x)
        return self.p(x).mean(-1)


def _export_shapes(monkeypatch) -> list:
    """Record the input shapes of every ONNX export the fallback runs."""
    import annette_torch.frontends.fx.onnx_fallback as fx_mod

    seen: list = []
    real = torch.onnx.export

    def spy(module, args, *a, **k):
        seen.append([tuple(t.shape) for t in args])
        return real(module, args, *a, **k)

    monkeypatch.setattr(fx_mod.torch.onnx, "export", spy)
    return seen


def _same(a, b) -> bool:
    return (a.names == b.names and np.array_equal(a.types, b.types) and np.array_equal(a.edges, b.edges)
            and all(np.array_equal(a.cols[c], b.cols[c]) for c in a.cols) and a.attrs == b.attrs)


@pytest.mark.parametrize("model, shape", [(SizeBranch, (1, 3, 513, 700)), (SizeBranch, (2, 3, 300, 257)),
                                          (Seq1d, (1, 4, 1000)), (DataDependent, (1, 3, 400, 301))])
def test_large_input_probe_gives_the_full_size_network(monkeypatch, model, shape):
    """Exports at small probe sizes, scaled back by shape inference = today's full-size export, layer by layer
    (these models branch on tensors, which alone sends them to a full-size export: switched off here)."""
    import annette_torch.frontends.fx.onnx_fallback as fx_mod

    torch.manual_seed(0)
    m = model().eval()
    seen = _export_shapes(monkeypatch)
    monkeypatch.setattr(fx_mod, "_FULL_FOR_BRANCHES_MAX_BYTES", 0)
    probed = trace(m, shape)
    assert seen and all(max(s[0][2:]) <= 256 for s in seen)  # no export at the full size
    monkeypatch.setattr(fx_mod, "_PROBE_ABOVE", 10**9)  # forces the full-size export
    full = trace(m, shape)
    assert seen[-1] == [shape]
    assert _same(probed, full)
    assert probed.out_shape(0) == to_nchw(shape)


class ShapeThreshold(nn.Module):
    """A second convolution only for inputs wider than 300: a branch on the input's shape."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        y = self.c1(x)
        if x.shape[-1] > 300:
            y = self.c2(y)
        return F.relu(y)


@pytest.mark.parametrize("side, convs", [(200, 1), (299, 1), (301, 2), (512, 2)])
def test_a_branch_on_the_input_shape_follows_the_real_shape(caplog, monkeypatch, side, convs):
    seen = _export_shapes(monkeypatch)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        net = trace(ShapeThreshold(), (1, 3, side, side))
    assert types_of(net).count(T.CONV) == convs
    assert seen[-1] == [(1, 3, side, side)]  # the network comes from an export at the real shape
    msg = next(r.getMessage() for r in caplog.records if "control flow on tensors" in r.getMessage())
    assert f"real input shape 1x3x{side}x{side}" in msg and "input's shape follow this shape" in msg
    assert "tensor values may go another way" in msg


def test_a_branch_at_a_size_too_large_to_export_is_warned_about_as_decided_at_the_probe(caplog, monkeypatch):
    import annette_torch.frontends.fx.onnx_fallback as fx_mod

    monkeypatch.setattr(fx_mod, "_FULL_FOR_BRANCHES_MAX_BYTES", 0)
    seen = _export_shapes(monkeypatch)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        net = trace(ShapeThreshold(), (1, 3, 512, 512))
    assert all(max(s[0][2:]) <= 256 for s in seen)
    assert types_of(net).count(T.CONV) == 1  # the probes' path
    msg = next(r.getMessage() for r in caplog.records if "control flow on tensors" in r.getMessage())
    assert "probe shape 1x3x128x128" in msg and "real shape 1x3x512x512" in msg and "may go another way" in msg


@pytest.mark.slow
def test_huge_untraceable_input_converts_from_small_probes(monkeypatch):
    """1x3x12000x12000 (a 1.7 GB input, 15 GB of activations) converts from small probes (never a full-size
    export, whose memory this machine lacks)."""
    seen = _export_shapes(monkeypatch)
    net = trace(DataDependent(), (1, 3, 12000, 12000))
    assert all(np.prod(s[0]) <= 3 * 256 * 256 for s in seen)
    assert net.out_shape(1) == (1, 8, 11998, 11998) and net.out_shape(0) == (1, 3, 12000, 12000)


class ExactSize(nn.Module):
    """Works only at one input size (a Linear over the flattened map), so probes cannot stand in for it."""

    def __init__(self, hw: int) -> None:
        super().__init__()
        self.hw = hw
        self.c = nn.Conv2d(3, 2, 3, padding=1)
        self.fc = nn.Linear(2 * 4, 4)

    def forward(self, x):
        if x.shape[-1] != self.hw:
            raise ValueError(f"expects width {self.hw}")
        y = F.adaptive_avg_pool2d(self.c(x), 2)
        if y.sum() > 1e9:
            y = y * 2
        return self.fc(y.flatten(1))


def test_probe_failure_falls_back_to_the_full_size(monkeypatch):
    seen = _export_shapes(monkeypatch)
    net = trace(ExactSize(300), (1, 3, 300, 300))
    assert seen[-1] == [(1, 3, 300, 300)]
    assert types_of(net)[-1] == T.FULLY_CONNECTED and net.out_shape(1) == (1, 2, 300, 300)


def test_full_size_that_cannot_fit_in_memory_is_one_error(monkeypatch):
    import annette_torch.frontends.fx.onnx_fallback as fx_mod

    monkeypatch.setattr(fx_mod, "_free_memory_bytes", lambda: 2.0**30)
    seen = _export_shapes(monkeypatch)
    with pytest.raises(ModelLoadError) as e:
        trace(ExactSize(20000), (1, 3, 20000, 20000))
    msg = str(e.value)
    assert "ExactSize" in msg and "(1, 3, 20000, 20000)" in msg and "GiB" in msg and "\n" not in msg
    assert all(max(s[0][2:]) <= 256 for s in seen)  # the full size was never run


@pytest.mark.parametrize("shape, words", [
    ((), "empty"), ([], "empty"), ((1, 0, 8, 8), "zero or negative"), ((1, 3, -8, 8), "zero or negative"),
    ((3, 32, 32), "batch dimension"), ((1, 4, 32, 32), "3 input channels"), (("a", 3), "sequence of ints"),
    (None, "shape"), ([(1, 3, 8, 8), ()], "empty"),
])
def test_bad_input_shape(shape, words):
    with pytest.raises(ModelLoadError) as e:
        trace(TinyResNet(), shape)
    assert words in str(e.value)


def test_input_too_small():
    with pytest.raises(ModelLoadError, match="too small"):
        trace(TinyVGG(), (1, 3, 2, 2))


def test_shape_mismatch_names_the_layer():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten(), nn.Linear(4 * 30 * 30, 10))
    with pytest.raises(ModelLoadError) as e:
        trace(model, (1, 3, 16, 16))
    assert "'2'" in str(e.value) and "Linear" in str(e.value) and "3600" in str(e.value)
    with pytest.raises(ModelLoadError, match="more inputs"):
        trace(MultiInput(), (2, 3, 8, 8))  # the second input has no shape
    with pytest.raises(ModelLoadError, match="4 input shapes"):
        trace(MultiInput(), [(2, 3, 8, 8), (2, 7), (1,), (2, 7)])


def test_not_a_module():
    with pytest.raises(ModelLoadError, match="nn.Module"):
        trace(lambda x: x, (1, 3))  # type: ignore[arg-type]


def test_lazy_package_attribute():
    import annette_torch
    assert annette_torch.trace is trace


def test_python_arithmetic_on_sizes():
    class M(nn.Module):
        def forward(self, x):
            n, c = x.size(0), x.shape[1]
            h = x.size()[2] // 2
            y = F.interpolate(x, size=(h, x.shape[-1] * 2), mode="bilinear", align_corners=False)
            y = F.pad(y, [1, 1, 2, 2])
            return y.reshape(n, c, -1)[:, 1:, ::2].unsqueeze(1)

    net = check_against_forward(M(), (2, 3, 8, 10))
    assert [t.label for t in types_of(net)] == ["Input", "Resize", "Pad", "Reshape", "Slice", "Reshape"]
    assert operator.index(net.ph[net.index("pad")]) == 4


class HandShuffle(nn.Module):
    def __init__(self, groups: int = 2) -> None:
        super().__init__()
        self.conv, self.groups = nn.Conv2d(3, 8, 3), groups

    def forward(self, x):
        y = self.conv(x)
        n, c, h, w = y.shape
        return y.view(n, self.groups, c // self.groups, h, w).transpose(1, 2).reshape(n, c, h, w)


@pytest.mark.parametrize("shuffle", [nn.ChannelShuffle(2), lambda x: F.channel_shuffle(x, 2)])
def test_channel_shuffle_reads_as_shufflenet_writes_it(shuffle):
    """nn.ChannelShuffle / F.channel_shuffle: the view, transpose and view back of ShuffleNet's own code, priced
    alike (the mapping pass runs the three as one ChannelShuffle where the runtime does)."""
    class Lib(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.shuffle = nn.Conv2d(3, 8, 3), shuffle

        def forward(self, x):
            return self.shuffle(self.conv(x))

    lib = trace(Lib().eval(), (1, 3, 16, 16))
    hand = trace(HandShuffle().eval(), (1, 3, 16, 16))
    assert types_of(lib) == types_of(hand) == [T.INPUT, T.CONV, T.RESHAPE, T.TRANSPOSE, T.RESHAPE]
    assert lib.out_shape(4) == hand.out_shape(4) == (1, 8, 14, 14)
    for p in ("ort-cpu", "openvino-cpu"):
        assert estimate(lib, p).latency_ms == pytest.approx(estimate(hand, p).latency_ms)
