"""ncs2 and the layers of attention networks: where the MYRIAD plugin runs them (its Supported Layers table,
VPU column) and their costs, marked assumed where no NCS2 measurement covers them."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import annette_torch as at
from annette_torch.fit.ncs2 import ASSUMED, ASSUMED_OVER_MEASURED, ASSUMED_PASSES
from annette_torch.ir import LayerType as T
from annette_torch.ir import NetworkBuilder
from annette_torch.platform import load_platform
from annette_torch.search.spaces import hybrid, vit

ATTENTION_TYPES = ("MatMul", "Softmax", "LayerNorm", "GELU", "Transpose", "Resize")


class Seg(nn.Module):
    """A dilated convolution and a bilinear resize (a DeepLab-style head)."""

    def __init__(self) -> None:
        super().__init__()
        self.c = nn.Conv2d(3, 16, 3, padding=2, dilation=2)

    def forward(self, x):
        return F.interpolate(self.c(x), scale_factor=2, mode="bilinear", align_corners=False)


def _one(t: T, shape: tuple[int, ...], **kw) -> object:
    b = NetworkBuilder(t.label)
    x = b.input("x", shape)
    b.add(t, "y", [x], shape, **kw)
    return b.build()


def test_attention_layers_are_modelled_as_assumed_and_say_where_they_run():
    plat = load_platform("ncs2")
    support = plat.meta["support"]
    for key in ATTENTION_TYPES:
        assert key in support["accelerator"], key  # the stick runs it (VPU column: Supported)
        origin = plat.layers[key].origin
        assert origin.startswith("assumed: ") and "VPU column" in origin, (key, origin)
    for row in ("Gemm", "MVN", "Erf", "Permute", "Interp", "Convolution-Dilated"):
        assert row in support["origin"] or row in plat.layers["Conv"].origin
    assert "dilated convolutions" in plat.layers["Conv"].origin and "assumed" in plat.layers["Conv"].origin
    assert plat.layers["Relu"].origin.startswith("fitted: ")


@pytest.mark.parametrize("name", ["vit", "hybrid"])
def test_attention_networks_run_entirely_on_the_stick_with_no_fallback(name):
    m = vit if name == "vit" else hybrid
    arch = m.decode("e240-" + "-".join(["h4r4"] * 6) if name == "vit" else "c32_e4-c48_e4-a128_h4r2-a192_h4r4")
    est = at.estimate(m.build_network(arch), "ncs2")
    rows = est.table()
    assert not est.host_layers and est.switches == 0
    assert not [r for r in rows if r["flag"]]
    used = {r["type"]: r["model"] for r in rows if r["time_ms"] > 0}
    for key in ("MatMul", "Softmax", "LayerNorm", "GELU"):
        assert used[key].endswith("(assumed)"), (key, used[key])


def test_multi_pass_stages_cost_their_passes_at_the_named_kernels_rate():
    plat = load_platform("ncs2")
    shape = (1, 4, 196, 196)
    for key, passes in ASSUMED_PASSES.items():
        like = ASSUMED[key][0]
        t = at.estimate(_one(T.from_label(key), shape), plat).time_ms[1]
        ref = at.estimate(_one(T.from_label(like), shape), plat).time_ms[1]
        assert t == pytest.approx(passes * ref, rel=1e-9)
    # the measured 1000-class SoftMax heads no longer set the rate of attention-sized ones: a (4, 196, 196)
    # softmax costs about its bytes at the SHAVE element-wise rate, not 150 x a head's per-stage time
    sm = at.estimate(_one(T.SOFTMAX, shape), plat).time_ms[1]
    assert sm < 2.0
    assert "measured: 4 layers" in plat.layers["Softmax"].origin and "Softmax" in ASSUMED_OVER_MEASURED


def test_batched_matmul_is_bounded_by_compute_and_by_bandwidth():
    plat = load_platform("ncs2")
    mm = plat.layers["MatMul"]
    fc = plat.layers["FullyConnected"]
    assert mm.bandwidth == fc.bandwidth and mm.op_s < 1e15  # a finite compute rate
    assert fc.op_s == mm.op_s and "compute bounded" in fc.origin  # token-wise linears are bounded alike
    small, big = [], []
    for heads, tokens, dim in ((4, 196, 64), (4, 784, 64)):
        b = NetworkBuilder("mm")
        q = b.input("q", (1, heads, tokens, dim))
        k = b.input("k", (1, heads, dim, tokens))
        b.add(T.MATMUL, "s", [q, k], (heads, tokens, tokens, 1), in_shape=(heads, dim, tokens, 1))
        net = b.build()
        t = float(at.estimate(net, plat).time_ms[2])
        ops = float(net.ops[2])
        assert t >= ops / mm.op_s * 1e3 * (1 - 1e-9)
        (small if tokens == 196 else big).append(t)
    assert big[0] > 10 * small[0]  # 16x the MACs


def test_dilated_convolution_and_resize_trace_and_cost_on_the_stick():
    est = at.estimate(Seg().eval(), "ncs2", (1, 3, 64, 64))
    rows = {r["type"]: r for r in est.table()}
    assert rows["Resize"]["model"].endswith("(assumed)") and rows["Resize"]["executes_on"] != "host"
    conv = est.network.types.tolist().index(int(T.CONV))
    assert int(est.network.dh[conv]) == 2
    plain = at.estimate(nn.Conv2d(3, 16, 3, padding=1).eval(), "ncs2", (1, 3, 64, 64))
    # same kernel, MACs and output: the same cost (the assumption the Conv model's origin states)
    assert est.time_ms[conv] == pytest.approx(float(plain.time_ms[1]), rel=1e-9)
    assert not est.host_layers


def test_vit_estimate_grows_with_tokens_and_depth_on_ncs2():
    a = vit.decode("e240-" + "-".join(["h4r4"] * 6))
    b = vit.decode("e240-" + "-".join(["h4r4"] * 12))
    t6, t12 = (at.estimate(vit.build_network(x), "ncs2").latency_ms for x in (a, b))
    t6_small = at.estimate(vit.build_network(a, resolution=112), "ncs2").latency_ms
    assert t12 > 1.8 * t6  # depth 12 about twice depth 6
    assert t6_small < 0.5 * t6
    assert np.isfinite(t12)
