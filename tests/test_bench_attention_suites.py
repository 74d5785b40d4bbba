"""Attention-era benchmark suites: built as the fx front end traces the same PyTorch code, exported (ONNX and
nn.Module agree), run on ONNX Runtime and OpenVINO CPU, matched back and stored."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import assume, given, settings, strategies as st
import torch
import torch.nn as nn
import torch.nn.functional as F

from annette_torch.bench.export import ExportError, to_module, to_onnx
from annette_torch.bench.records import FUSED, INSERTED, NOT_FUSED
from annette_torch.bench.store import Store
from annette_torch.bench.suites import SUITES, config_id, list_suites
from annette_torch.bench.sweep import measure
from annette_torch.errors import AnnetteError
from annette_torch.frontends.fx import trace
from annette_torch.ir import LayerType as T, NetworkBuilder
from annette_torch.zoo_modern import LinearBN

ort = pytest.importorskip("onnxruntime")

MICRO = ["linear", "matmul", "softmax", "layernorm", "gelu", "heads", "pick", "interp", "dilconv"]
MULTI = ["attention", "mlp", "convnext", "window_attention", "linear_bn"]
#: small configurations of every new suite (a few per suite run on the runtimes)
SMALL = {
    "linear": [{"l": 49, "e": 64, "f": 96}],
    "matmul": [{"h": 2, "l": 64, "s": 49, "d": 32, "kind": "scores"}, {"h": 3, "l": 49, "s": 64, "d": 16,
                                                                       "kind": "context"}],
    "softmax": [{"h": 2, "l": 64, "s": 49}],
    "layernorm": [{"l": 49, "e": 96}],
    "gelu": [{"l": 49, "e": 128}],
    "heads": [{"l": 49, "h": 4, "d": 16, "kind": "split"}, {"l": 64, "h": 2, "d": 32, "kind": "merge"}],
    "pick": [{"l": 49, "h": 2, "d": 16, "w": 4}, {"l": 64, "h": 3, "d": 32, "w": 1}],
    "interp": [{"hw": 8, "c": 16, "scale": 2, "mode": "bilinear"}, {"hw": 8, "c": 16, "scale": 4, "mode": "nearest"}],
    "dilconv": [{"hw": 16, "c": 16, "f": 32, "d": 6}],
    "attention": [{"l": 49, "h": 2, "d": 16}, {"l": 64, "h": 2, "d": 16, "style": "manual"},
                  {"l": 49, "h": 2, "d": 16, "style": "qkv"}],
    "mlp": [{"l": 49, "e": 64, "r": 4}],
    "convnext": [{"hw": 7, "c": 48}],
    "window_attention": [{"nw": 2, "w": 4, "h": 2, "d": 16}, {"nw": 2, "w": 4, "h": 2, "d": 16, "style": "qkv"}],
    "linear_bn": [{"l": 49, "e": 64, "f": 96}],
}


def _inputs(model, seed=0):
    rng = np.random.default_rng(seed)
    return {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim], dtype=np.float32)
            for i in model.graph.input}


def _session(model):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


# --------------------------------------------------------------------------------------------------
# registry, costs, export


def test_listed_with_their_kind():
    listing = list_suites()
    for name in MICRO + MULTI:
        assert name in listing and SUITES[name].kind == ("micro" if name in MICRO else "multi")
        assert f"{SUITES[name].count():,} configs" in listing[name]


@pytest.mark.parametrize("name", MICRO + MULTI)
def test_costs_agree_and_onnx_equals_module(name):
    """The analytic caps agree with sampled networks; the ONNX model and the nn.Module compute the same."""
    suite = SUITES[name]
    cfgs = suite.configs(n=6, seed=0)
    assert len(cfgs) == 6
    for c in cfgs:
        net = suite.build(c)
        cols = {k: np.array([v], dtype=object if isinstance(v, str) else np.int64)
                for k, v in c.items() if k != "config_id"}
        ops, act, wts = (float(np.asarray(v).reshape(-1)[0]) for v in suite.cost(cols))
        assert ops == pytest.approx(net.total_ops, rel=1e-9)
        assert act == pytest.approx(float(net.out_elems.sum()), rel=1e-9)
        assert wts == pytest.approx(net.total_weights, rel=1e-9)
    for c in SMALL[name]:
        net = suite.build(c)
        model = to_onnx(net)
        onnx.checker.check_model(model, full_check=True)  # shape inference agrees with the declared outputs
        feeds = _inputs(model)
        gots = _session(model).run(None, feeds)
        mod = to_module(net)
        with torch.no_grad():
            wants = mod(*(torch.from_numpy(feeds[n]) for n in (i.name for i in model.graph.input)))
        wants = wants if isinstance(wants, tuple) else (wants,)  # (the pick suite's q, k and v)
        assert len(gots) == len(wants)
        for got, want in zip(gots, wants):
            assert got.shape == want.shape and np.isfinite(got).all()
            np.testing.assert_allclose(got, want.numpy(), rtol=2e-3, atol=2e-4)


def test_gelu_opset_20_is_one_node():
    net = SUITES["gelu"].build(SMALL["gelu"][0])
    assert [n.op_type for n in to_onnx(net, opset=20).graph.node] == ["Gelu"]
    assert [n.op_type for n in to_onnx(net).graph.node] == ["Div", "Erf", "Add", "Mul", "Mul"]


def test_matmul_export_errors():
    b = NetworkBuilder("bad")
    x = b.add(T.INPUT, "a", [], (1, 2, 8, 4), shape=(1, 2, 8, 4))
    y = b.add(T.INPUT, "b", [], (1, 2, 5, 4), shape=(1, 2, 5, 4))
    b.add(T.MATMUL, "mm", [x, y], (2, 6, 8, 1), in_shape=(2, 4, 8, 1), shape=(1, 2, 8, 6))
    with pytest.raises(ExportError, match="do not multiply"):
        to_onnx(b.build())
    b = NetworkBuilder("one")
    x = b.add(T.INPUT, "a", [], (1, 2, 8, 4), shape=(1, 2, 8, 4))
    b.add(T.MATMUL, "mm", [x], (2, 8, 8, 1), shape=(1, 2, 8, 8))
    with pytest.raises(ExportError, match="two activations"):
        to_onnx(b.build())


def test_scores_product_writes_the_key_transpose():
    net = SUITES["matmul"].build(SMALL["matmul"][0])
    nodes = to_onnx(net).graph.node
    assert [(n.op_type, n.name) for n in nodes] == [("Transpose", "scores/transpose_b"), ("MatMul", "scores")]
    assert list(nodes[0].attribute[0].ints) == [0, 1, 3, 2]


# --------------------------------------------------------------------------------------------------
# the suites are what the fx front end makes of the same PyTorch code


class _Attention(nn.Module):
    def __init__(self, e, h):
        super().__init__()
        self.h = h
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(e, e) for _ in range(4))

    def forward(self, x):
        B, L, E = x.shape
        h, d = self.h, E // self.h
        q = self.q_proj(x).reshape(B, L, h, d).transpose(1, 2)
        k = self.k_proj(x).reshape(B, L, h, d).transpose(1, 2)
        v = self.v_proj(x).reshape(B, L, h, d).transpose(1, 2)
        o = F.scaled_dot_product_attention(q, k, v)
        return self.out_proj(o.transpose(1, 2).reshape(B, L, E))


class _ManualAttention(_Attention):
    """timm's ViT attention: the key transpose and the scale written out."""

    def forward(self, x):
        B, L, E = x.shape
        h, d = self.h, E // self.h
        q = self.q_proj(x).reshape(B, L, h, d).transpose(1, 2)
        k = self.k_proj(x).reshape(B, L, h, d).transpose(1, 2)
        v = self.v_proj(x).reshape(B, L, h, d).transpose(1, 2)
        a = ((q @ k.transpose(-2, -1)) * d ** -0.5).softmax(dim=-1)
        return self.out_proj((a @ v).transpose(1, 2).reshape(B, L, E))


class _QkvAttention(nn.Module):
    """timm's ViT and Swin attention: one fused q / k / v projection, permuted and picked."""

    def __init__(self, e, h):
        super().__init__()
        self.h, self.qkv, self.proj = h, nn.Linear(e, 3 * e), nn.Linear(e, e)

    def forward(self, x):
        B, L, E = x.shape
        h, d = self.h, E // self.h
        qkv = self.qkv(x).reshape(B, L, 3, h, d).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        a = ((q @ k.transpose(-2, -1)) * d ** -0.5).softmax(dim=-1)
        return self.proj((a @ v).transpose(1, 2).reshape(B, L, E))


class _Mlp(nn.Module):
    def __init__(self, e, r):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(e, r * e), nn.GELU(), nn.Linear(r * e, e)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class _ConvNeXt(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dw, self.ln = nn.Conv2d(c, c, 7, padding=3, groups=c), nn.LayerNorm(c)
        self.fc1, self.act, self.fc2 = nn.Linear(c, 4 * c), nn.GELU(), nn.Linear(4 * c, c)

    def forward(self, x):
        y = self.fc2(self.act(self.fc1(self.ln(self.dw(x).permute(0, 2, 3, 1)))))
        return x + y.permute(0, 3, 1, 2)


class _Windows(nn.Module):
    def __init__(self, nw, w, h, d, attention=None):
        super().__init__()
        self.nw, self.w, self.attn = nw, w, (attention or _Attention)(h * d, h)

    def forward(self, x):
        nw, w, C = self.nw, self.w, x.shape[-1]
        y = x.reshape(1, nw, w, nw, w, C).permute(0, 1, 3, 2, 4, 5).reshape(nw * nw, w * w, C)
        y = self.attn(y).reshape(1, nw, nw, w, w, C).permute(0, 1, 3, 2, 4, 5)
        return y.reshape(1, nw * w, nw * w, C)


class _QkvPicks(nn.Module):
    """q, k and v of a fused projection's output, as timm writes them."""

    def __init__(self, h, d):
        super().__init__()
        self.h, self.d = h, d

    def forward(self, x):
        t = x.reshape(x.shape[0], x.shape[1], 3, self.h, self.d).permute(2, 0, 3, 1, 4)
        return t[0], t[1], t[2]


class _Scores(nn.Module):
    def forward(self, q, k):
        return torch.softmax(q @ k.transpose(-2, -1), -1)


def _same_ir(got, want):
    """Same layer types, NCHW columns and edges (names differ: the suites name their layers)."""
    assert got.type_labels() == want.type_labels()
    for col in ("n", "c_in", "h_in", "w_in", "c_out", "h_out", "w_out", "kh", "kw", "groups"):
        np.testing.assert_array_equal(getattr(got, col), getattr(want, col), err_msg=col)
    np.testing.assert_array_equal(got.edges, want.edges)
    np.testing.assert_allclose(got.ops, want.ops)


@pytest.mark.parametrize("name,config,module,shape", [
    ("attention", {"l": 49, "h": 4, "d": 16}, lambda: _Attention(64, 4), (1, 49, 64)),
    ("attention", {"l": 49, "h": 4, "d": 16, "style": "manual"}, lambda: _ManualAttention(64, 4), (1, 49, 64)),
    ("attention", {"l": 49, "h": 4, "d": 16, "style": "qkv"}, lambda: _QkvAttention(64, 4), (1, 49, 64)),
    ("window_attention", {"nw": 2, "w": 7, "h": 2, "d": 16, "style": "qkv"},
     lambda: _Windows(2, 7, 2, 16, _QkvAttention), (1, 14, 14, 32)),
    ("mlp", {"l": 49, "e": 64, "r": 3}, lambda: _Mlp(64, 3), (1, 49, 64)),
    ("convnext", {"hw": 14, "c": 48}, lambda: _ConvNeXt(48), (1, 48, 14, 14)),
    ("window_attention", {"nw": 2, "w": 7, "h": 2, "d": 16}, lambda: _Windows(2, 7, 2, 16), (1, 14, 14, 32)),
    ("linear_bn", {"l": 49, "e": 64, "f": 96}, lambda: LinearBN(64, 96), (1, 49, 64)),
    ("pick", {"l": 49, "h": 2, "d": 16, "w": 4}, lambda: _QkvPicks(2, 16), (4, 49, 96)),
])
def test_blocks_trace_as_the_suites_build_them(name, config, module, shape):
    _same_ir(SUITES[name].build(config), trace(module(), shape))


def test_scores_and_softmax_trace_as_the_suites_build_them():
    q, k = (1, 2, 16, 8), (1, 2, 12, 8)
    traced = trace(_Scores(), [q, k])
    mm = SUITES["matmul"].build({"h": 2, "l": 16, "s": 12, "d": 8, "kind": "scores"})
    sm = SUITES["softmax"].build({"h": 2, "l": 16, "s": 12})
    # traced: q, k, k^T (a Transpose layer, ONNX Runtime fuses it into the product), matmul, softmax
    assert traced.type_labels() == ["Input", "Input", "Transpose", "MatMul", "Softmax"]
    for col in ("n", "c_in", "h_in", "c_out", "h_out", "w_out"):
        assert getattr(mm, col)[-1] == getattr(traced, col)[3], col
        assert getattr(sm, col)[-1] == getattr(traced, col)[4], col


# --------------------------------------------------------------------------------------------------
# runners -> matcher -> store


def _round_trip(runner, tmp_path, platform):
    with Store(tmp_path / "m.sqlite") as st:
        run = st.start_run(platform, runner.name, runner.toolchain(), {})
        for name in MICRO + MULTI:
            for c in [dict(x) for x in SMALL[name]]:
                c["config_id"] = _cid(c)
                res = measure(name, c, runner, iterations=3, warmup=1)
                net = SUITES[name].build(c)
                layers = [r for r in res.layers if r.fused != INSERTED]
                assert [r.layer for r in layers] == net.names, name
                assert all(r.time_ms >= 0 for r in res.layers)
                assert sum(r.time_ms for r in res.layers) > 0, name
                # no executed node is left unplaced: every inserted row is a layout reorder or copy
                assert all(r.node_type.lower() in ("reorder", "reorderinput", "reorderoutput", "memcpy")
                           for r in res.layers if r.fused == INSERTED), (name, [(r.layer, r.node_type)
                                                                               for r in res.layers])
                assert st.add(run, platform, res)
        stored = list(st.layer_records(platform))
    out: dict[str, dict[str, list]] = {}   # suite -> config id -> its records
    for suite, cid, _params, rec in stored:
        out.setdefault(suite, {}).setdefault(cid, []).append(rec)
    assert set(out) == set(MICRO + MULTI) and all(len(out[s]) == len(SMALL[s]) for s in out)
    return out


def _records(got, suite, **config):
    """The layer records of one configuration by layer name."""
    return {r.layer: r for r in got[suite][_cid(config)]}


def _all(got, suite):
    return [r for recs in got[suite].values() for r in recs]


def _cid(c):
    return config_id(c)


def _heads(got, suite, layer_type):
    return [r for r in _all(got, suite) if r.layer_type == layer_type and r.fused == NOT_FUSED]


def test_round_trip_onnx_runtime(tmp_path):
    from annette_torch.bench.runners.ort import OrtRunner
    got = _round_trip(OrtRunner(threads=1), tmp_path, "ort-test")
    # ONNX Runtime runs the products as (Fused)MatMul, the projections as Gemm (MatMul + Add fused), the erf
    # GELU as one Gelu, LayerNormalization as one node
    assert {r.node_type for r in _heads(got, "matmul", "MatMul")} <= {"MatMul", "FusedMatMul"}
    assert {r.node_type for r in _heads(got, "mlp", "FullyConnected")} == {"Gemm"}
    assert {r.node_type for r in _heads(got, "linear", "FullyConnected")} == {"Gemm"}
    assert {r.node_type for r in _heads(got, "gelu", "GELU")} == {"Gelu"}
    assert {r.node_type for r in _heads(got, "layernorm", "LayerNorm")} == {"LayerNormalization"}
    sdpa = _records(got, "attention", l=49, h=2, d=16)
    assert sdpa["scores"].fused == sdpa["context"].fused == NOT_FUSED
    # timm's written-out attention: the scalar scale is folded into the scores product (a FusedMatMul)
    manual = _records(got, "attention", l=64, h=2, d=16, style="manual")
    assert manual["scores"].node_type == "FusedMatMul" and manual["scores"].fused == NOT_FUSED
    assert manual["scale"].fused_into == "scores" and manual["scale"].time_ms == 0
    # LeViT's Linear without a bias is a MatMul of its own; the BatchNorm over its token rows runs apart
    lbn = _records(got, "linear_bn", l=49, e=64, f=96)
    assert lbn["fc"].node_type == "MatMul" and lbn["bn"].fused == NOT_FUSED and lbn["bn"].time_ms > 0


def test_round_trip_openvino(tmp_path):
    pytest.importorskip("openvino")
    from annette_torch.bench.runners.openvino import OpenVinoRunner
    got = _round_trip(OpenVinoRunner(device="CPU", threads=1), tmp_path, "ov-test")
    # OpenVINO folds GELU into the FullyConnected before it; a whole attention becomes one Subgraph headed by a
    # product; a decomposed LayerNorm's pieces are all the LayerNorm's
    mlp = _records(got, "mlp", l=49, e=64, r=4)
    assert mlp["gelu"].fused != NOT_FUSED and mlp["fc1"].fused == NOT_FUSED
    for cfg in SMALL["attention"]:
        att = _records(got, "attention", **cfg)
        heads = [r for r in att.values() if r.node_type == "Subgraph" and r.fused == NOT_FUSED]
        if cfg.get("style") != "qkv":
            assert [r.layer_type for r in heads] in ([], ["MatMul"]), cfg
        assert att["softmax"].fused != NOT_FUSED or att["softmax"].node_type == "Softmax"
    # timm's fused q / k / v: the picks qkv[i] of the permuted projection run in place (no time of their own)
    for name, cfg in (("attention", SMALL["attention"][2]), ("window_attention", SMALL["window_attention"][1])):
        qkv = _records(got, name, **cfg)
        assert all(qkv[k].fused == FUSED and qkv[k].time_ms == 0 for k in "qkv"), cfg
        assert qkv["qkv_heads"].fused == NOT_FUSED
    # ... as do the pick suite's, feeding nothing (`fit.generator.IN_PLACE_RATE`: the Pick model takes no time)
    for cfg in SMALL["pick"]:
        pk = _records(got, "pick", **cfg)
        assert all(pk[k].time_ms == 0 for k in "qkv") and pk["qkv_heads"].time_ms > 0, cfg
    # timm's written-out attention: the Subgraph lists the scale and softmax but not the scores product, which
    # ran there too (it was possibly-fused, and the mapping fit never saw a scale fused behind a product)
    manual = _records(got, "attention", l=64, h=2, d=16, style="manual")
    assert {manual[k].fused for k in ("scores", "scale", "softmax")} == {FUSED}
    assert manual["scores"].fused_into == manual["scale"].fused_into == manual["softmax"].fused_into
    cnx = _records(got, "convnext", hw=7, c=48)
    assert cnx["norm"].fused == NOT_FUSED and cnx["norm"].time_ms > 0
    # the BatchNorm over token rows after a Linear is not folded into it: it runs as a node of its own
    lbn = _records(got, "linear_bn", l=49, e=64, f=96)
    assert lbn["fc"].fused == lbn["bn"].fused == NOT_FUSED


def test_manual_attention_costs_agree():
    suite = SUITES["attention"]
    for c in suite.configs(n=6, seed=2, options={"style": "manual"}):
        net = suite.build(c)
        assert net.type_labels().count("Mul") == 1 and net.type_labels().count("Transpose") == 5
        cols = {k: np.array([v], dtype=object if isinstance(v, str) else np.int64)
                for k, v in c.items() if k != "config_id"}
        ops, act, wts = (float(np.asarray(v).reshape(-1)[0]) for v in suite.cost(cols))
        assert (ops, act, wts) == pytest.approx((net.total_ops, float(net.out_elems.sum()), net.total_weights))
    with pytest.raises(AnnetteError, match="style must be one of"):
        suite.build({"l": 16, "h": 2, "d": 16, "style": "flash"})
