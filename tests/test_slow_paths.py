"""Slow-path work (the ``slow`` column) and its price (``slow_ns``): masked attention's subnormal probabilities."""

from __future__ import annotations

import io
import json
import pathlib

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from annette_torch import estimate
from annette_torch.errors import PlatformError
from annette_torch.fit.slow_paths import masked_attention, measure_slow_ns
from annette_torch.frontends.onnx import from_onnx
from annette_torch.ir import LayerType as T
from annette_torch.platform import Platform, load_platform
from annette_torch.validate.networks import network_fingerprint


def _slow(net, t):
    return int(net.cols["slow"][net.types == t].sum())


@pytest.mark.parametrize("value, slow", [(-100.0, True), (-90.0, True), (0.0, False), (-1e4, False),
                                         (float("-inf"), False), (-50.0, False)])
def test_only_a_mask_in_the_subnormal_band_makes_slow_work(value, slow):
    b, n, d = 4, 16, 8
    net = from_onnx(masked_attention(b, n, d, mask_value=value))
    mask = np.where(np.random.default_rng(0).random((b, n, n)) < 0.5, value, 0.0)
    share = float(np.mean(mask == value)) if slow else 0.0
    assert _slow(net, T.SOFTMAX) == round(share * b * n * n)
    assert _slow(net, T.MATMUL) == round(share * b * n * n * d)  # multiply-adds reading a subnormal probability
    assert _slow(net, T.ADD) == 0


def test_the_mask_passes_through_reshapes_and_a_computed_mask_counts():
    """Swin's shifted-window mask is computed from shapes by constant nodes and reshaped before the softmax."""
    import torch
    from torch import nn

    class Masked(nn.Module):
        def forward(self, q):
            s = q @ q.transpose(-2, -1)  # (1, 4, 16, 16)
            idx = torch.arange(16)
            mask = torch.where((idx[:, None] // 8) != (idx[None, :] // 8), -100.0, 0.0)  # built in forward
            s = (s.reshape(1, 4, 256) + mask.reshape(1, 1, 256)).reshape(1, 4, 16, 16)
            return s.softmax(-1) @ q

    buf = io.BytesIO()
    torch.onnx.export(Masked().eval(), torch.randn(1, 4, 16, 8), buf, dynamo=False, opset_version=17)
    net = from_onnx(onnx.load_from_string(buf.getvalue()))
    assert _slow(net, T.SOFTMAX) == 4 * 16 * 16 // 2
    assert _slow(net, T.MATMUL) == 4 * 16 * 16 * 8 // 2


def test_a_platform_prices_slow_work_per_type_and_other_platforms_ignore_it():
    net = from_onnx(masked_attention(8, 32, 16, mask_value=-100.0))
    plain = from_onnx(masked_attention(8, 32, 16, mask_value=0.0))
    d = load_platform("ort-cpu").to_dict()
    d["slow_ns"] = {"Softmax": 0.0, "MatMul": 0.0}
    free = Platform.from_dict(d, "free")
    d["slow_ns"] = {"Softmax": 20.0, "MatMul": 2.0}
    priced = Platform.from_dict(d, "priced")
    base = estimate(net, free)
    assert base.latency_ms == pytest.approx(estimate(plain, free).latency_ms)
    # the runtime's end-to-end scale (and its type's own factor, `overhead.kind_scales`) applies to slow work
    # as to the rest of the layer's time
    scale = priced.overhead[0]
    factor = {t: f for t, k, f in priced.kind_scales if k is None}
    want = (_slow(net, T.SOFTMAX) * 20e-6 * factor.get(int(T.SOFTMAX), 1.0)
            + _slow(net, T.MATMUL) * 2e-6 * factor.get(int(T.MATMUL), 1.0))
    assert want > 0
    assert estimate(net, priced).latency_ms - base.latency_ms == pytest.approx(want * scale, rel=1e-9)
    # zcu102 runs int8: it has no slow path, the column changes nothing there
    assert estimate(net, "zcu102").latency_ms == pytest.approx(estimate(plain, "zcu102").latency_ms)


@pytest.mark.parametrize("bad, msg", [([1], "expected an object"), ({"Conv": 1.0}, "has no slow path"),
                                      ({"Nope": 1.0}, "not a layer type"), ({"MatMul": -1.0}, "slow_ns")])
def test_bad_slow_ns_is_one_clear_error(bad, msg):
    d = load_platform("ort-cpu").to_dict()
    d["slow_ns"] = bad
    with pytest.raises(PlatformError, match=msg):
        Platform.from_dict(d, "bad")


def test_slow_work_changes_the_fingerprint_only_where_there_is_some():
    slow = from_onnx(masked_attention(2, 8, 4, mask_value=-100.0))
    fast = from_onnx(masked_attention(2, 8, 4, mask_value=0.0))
    assert network_fingerprint(slow) != network_fingerprint(fast)
    cols = {k: v for k, v in fast.cols.items() if k != "slow"}  # a network from before the column
    from annette_torch.ir import Network
    old = Network(fast.name, fast.names, fast.types, cols, fast.edges)
    assert network_fingerprint(old) == network_fingerprint(fast)


def test_shipped_cpu_files_price_subnormals_as_measured():
    """ONNX Runtime pays for subnormal operands; OpenVINO's CPU plugin flushes them to zero (next to nothing)."""
    root = pathlib.Path(__file__).resolve().parents[1] / "platforms"
    for ort_file, ov_file in ((root / "ort-cpu.json", root / "openvino-cpu.json"),
                              (load_platform("ort-cpu").source, load_platform("openvino-cpu").source)):
        ort, ov = (json.loads(pathlib.Path(f).read_text())["slow_ns"] for f in (ort_file, ov_file))
        assert ort["MatMul"] > 20 * ov["MatMul"] and ort["Softmax"] > 20 * ov["Softmax"]


class _FakeRunner:
    """Profiles the pair analytically: the slow graph's Softmax / MatMul take extra time per subnormal."""

    def prepare(self, model):
        return model

    def profile(self, model, iterations=20, warmup=3):
        return model

    def parse(self, model):
        from annette_torch.bench.records import NodeRecord
        from annette_torch.fit.slow_paths import TRANSPOSES
        if model.graph.node[0].op_type == "Transpose":
            perm = tuple(model.graph.node[0].attribute[0].ints)
            shape = tuple(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim)
            slow = any(perm == p and shape == sh for sh, p, _ in TRANSPOSES)
            return [NodeRecord("transpose", "Transpose", median_ms=0.1 + slow * np.prod(shape) * 2.5e-6)]
        mask = next(t for t in model.graph.initializer if t.name == "mask")
        from onnx import numpy_helper
        m = numpy_helper.to_array(mask)
        sub = float(np.count_nonzero(m == -100.0))
        d = model.graph.input[1].type.tensor_type.shape.dim[-1].dim_value
        return [NodeRecord("softmax", "Softmax", median_ms=0.1 + sub * 17e-6),
                NodeRecord("context", "MatMul", median_ms=0.2 + sub * d * 1.5e-6),
                NodeRecord("mask_add", "Add", median_ms=0.05)]


def test_measure_slow_ns_recovers_the_price_per_unit():
    got = measure_slow_ns(_FakeRunner(), rounds=1)
    assert got == {"Softmax": pytest.approx(17.0, rel=1e-3), "MatMul": pytest.approx(1.5, rel=1e-3),
                   "Transpose": pytest.approx(2.5, rel=1e-3)}


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 6), st.integers(2, 24), st.integers(1, 16), st.floats(-103.0, -88.0))
def test_slow_units_never_exceed_the_work(b, n, d, value):
    net = from_onnx(masked_attention(b, n, d, mask_value=value))
    assert 0 <= _slow(net, T.SOFTMAX) <= b * n * n
    assert 0 <= _slow(net, T.MATMUL) <= b * n * n * d


@pytest.mark.parametrize("shape, perm, slow", [
    ((1, 64, 7, 8, 7, 8), (0, 3, 5, 2, 4, 1), True),  # MaxViT's grid partition: innermost and others move
    ((1, 8, 8, 7, 7, 64), (0, 5, 1, 3, 2, 4), True),  # its block partition, back to NCHW
    ((8, 16, 28, 28), (3, 2, 1, 0), True),
    ((1, 56, 56, 96), (0, 3, 1, 2), False),  # NHWC -> NCHW: one axis moves
    ((4, 12, 49, 32), (0, 1, 3, 2), False),  # k transposed for q @ k^T: one axis moves
    ((4, 12, 49, 32), (0, 2, 1, 3), False),  # heads split: rows copied whole
    ((16, 20, 28, 28), (2, 3, 0, 1), False),  # merged, a 2-D transpose
    ((1, 8, 1, 784, 1, 32), (2, 0, 4, 1, 3, 5), False)])  # unit axes do not count
def test_transposes_that_copy_element_by_element_are_slow_in_both_front_ends(shape, perm, slow):
    import torch
    from torch import nn

    from annette_torch import trace
    from annette_torch.ir import transpose_slow

    class Permute(nn.Module):
        def forward(self, x):
            return x.permute(*perm) + 1.0

    elems = int(np.prod(shape))
    assert transpose_slow(shape, perm) == (elems if slow else 0)
    traced = trace(Permute().eval(), shape)
    buf = io.BytesIO()
    torch.onnx.export(Permute().eval(), torch.zeros(shape), buf, dynamo=False, opset_version=17)
    exported = from_onnx(onnx.load_from_string(buf.getvalue()))
    assert _slow(traced, T.TRANSPOSE) == _slow(exported, T.TRANSPOSE) == (elems if slow else 0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=6).flatmap(
    lambda dims: st.tuples(st.just(tuple(dims)), st.permutations(range(len(dims))))))
def test_transpose_slow_is_all_or_nothing_and_never_for_a_kept_innermost_axis(case):
    from annette_torch.ir import transpose_slow
    shape, perm = case
    n = transpose_slow(shape, perm)
    assert n in (0, int(np.prod(shape)))
    kept = [a for a in perm if shape[a] != 1]
    if not kept or kept[-1] == max(kept):
        assert n == 0


def test_a_mask_buffer_makes_the_same_slow_work_in_both_front_ends():
    """A shifted-window block with its mask registered as a buffer (as the original Swin code does), written
    by hand and with scaled_dot_product_attention: torch.fx and the ONNX export count the same work."""
    import torch
    from torch import nn

    from annette_torch import trace

    class Block(nn.Module):
        def __init__(self, sdpa: bool):
            super().__init__()
            self.sdpa = sdpa
            idx = torch.arange(49)
            self.register_buffer("mask", torch.where((idx[:, None] // 14) != (idx[None, :] // 14), -100.0, 0.0))
            self.qkv = nn.Linear(32, 96)

        def forward(self, x):  # (4 windows, 49 tokens, 32)
            q, k, v = self.qkv(x).reshape(4, 49, 3, 2, 16).permute(2, 0, 3, 1, 4)
            if self.sdpa:
                return nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=self.mask)
            s = q @ k.transpose(-2, -1) + self.mask
            return s.softmax(-1) @ v

    share = float((Block(False).mask == -100.0).float().mean())
    for sdpa in (False, True):
        traced = trace(Block(sdpa).eval(), (4, 49, 32))
        buf = io.BytesIO()
        torch.onnx.export(Block(sdpa).eval(), torch.zeros(4, 49, 32), buf, dynamo=False, opset_version=17)
        exported = from_onnx(onnx.load_from_string(buf.getvalue()))
        for t, work in ((T.SOFTMAX, 4 * 2 * 49 * 49), (T.MATMUL, 4 * 2 * 49 * 49 * 16)):
            assert _slow(traced, t) == _slow(exported, t) == pytest.approx(share * work, abs=1)
