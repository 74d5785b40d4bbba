"""Per-layer cost lookup and the latency table: sums, one-hot exactness, gradient direction, I/O."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import annette_torch as at
from annette_torch.ir import LayerType as T, NetworkBuilder
from annette_torch.errors import PlatformError
from annette_torch.lookup import LatencyTable, layer_costs
from models import TinyResNet
from annette_torch.search.spaces import mbv2

PLATFORMS = ["zcu102-dnndk", "ncs2"]


# ------------------------------------------------------------------------------------------------------
# layer_costs


@pytest.mark.parametrize("platform", PLATFORMS)
def test_layer_costs_sum_to_the_total_and_name_submodules(platform):
    model = TinyResNet()
    shape = (1, 3, 64, 64)
    total = at.estimate(model, platform, shape).device_ms
    by_module = layer_costs(model, platform, shape)
    assert sum(by_module.values()) == pytest.approx(total, rel=1e-12)
    names = {n for n, _ in model.named_modules()}
    assert set(by_module) <= names  # root "" is a module name too
    assert {"conv1", "layer1.0.conv1", "layer2.0.downsample.0", "fc"} <= set(by_module)
    assert by_module["layer1.0.conv1"] > 0 and by_module["fc"] > 0
    assert "layer1.0" in by_module  # the functional `out += identity` counts for the block calling it
    by_layer = layer_costs(model, platform, shape, by="layer")
    assert sum(by_layer.values()) == pytest.approx(total, rel=1e-12)
    assert len(by_layer) == len(at.trace(model, shape))
    top = layer_costs(model, platform, shape, depth=1)
    assert sum(top.values()) == pytest.approx(total, rel=1e-12)
    assert {"conv1", "layer1", "layer2", "fc"} <= set(top) and "layer1.0" not in top
    with pytest.raises(ValueError, match="by must be"):
        layer_costs(model, platform, shape, by="type")


def test_a_shape_where_the_platform_goes_is_one_clear_error():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU())
    with pytest.raises(PlatformError, match="expected a platform name.*got tuple"):
        layer_costs(model, (1, 3, 32, 32), "ncs2")  # type: ignore[arg-type]
    assert layer_costs(model, input_shape=(1, 3, 32, 32), platform="ncs2") == layer_costs(model, "ncs2", (1, 3, 32, 32))


def test_fused_layers_cost_nothing_and_their_time_sits_on_the_executing_module():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU())
    costs = layer_costs(model, "zcu102-dnndk", (1, 3, 32, 32))
    e = at.estimate(model, "zcu102-dnndk", (1, 3, 32, 32))
    assert costs["1"] == 0.0 and costs["2"] == 0.0  # BN and ReLU fused into the convolution on DNNDK
    assert costs["0"] == pytest.approx(e.device_ms - costs[""], rel=1e-12)


# ------------------------------------------------------------------------------------------------------
# latency table on a small hand-built space


def _cand(width: int, k: int, c: int = 16, h: int = 16):
    b = NetworkBuilder(f"c{width}_{k}")
    x = b.input("x", (1, c, h, h))
    y = b.conv("conv", x, width, k, padding=k // 2)
    y = b.same(T.BATCH_NORM, "bn", y)
    b.same(T.RELU, "relu", y)
    return b.build()


@pytest.fixture(scope="module")
def small_table() -> LatencyTable:
    blocks = [[_cand(16, 3), _cand(32, 3), _cand(16, 5), None], [_cand(16, 1), _cand(64, 3)]]
    return LatencyTable.build(blocks, "zcu102-dnndk", fixed=0.25, ops=[["a", "b", "c", "zero"], ["d", "e"]],
                              latency="device")


def test_table_entries_are_block_estimates_without_the_input(small_table):
    e = at.estimate(_cand(32, 3), "zcu102-dnndk")
    assert small_table.lat[0, 1] == pytest.approx(e.device_ms - e.time_ms[0], rel=1e-12)
    assert small_table.lat[0, 3] == 0.0 and np.isinf(small_table.lat[1, 2:]).all()
    assert small_table.exact(["b", "e"]) == pytest.approx(0.25 + small_table.lat[0, 1] + small_table.lat[1, 1])
    assert small_table.exact([1, 1]) == small_table.exact(["b", "e"])
    with pytest.raises(ValueError, match="no candidate 'x'"):
        small_table.exact(["x", "e"])


def test_expected_equals_exact_for_one_hot_probabilities(small_table):
    for choice in (["a", "d"], ["b", "e"], ["zero", "e"], ["c", "d"]):
        p = torch.tensor(small_table.one_hot(choice), dtype=torch.float64)
        assert float(small_table.expected(p, probs=True)) == pytest.approx(small_table.exact(choice), rel=1e-12)
        # near-one-hot logits converge to the same value
        logits = torch.where(p > 0, 0.0, -60.0).double()
        assert float(small_table.expected(logits)) == pytest.approx(small_table.exact(choice), rel=1e-9)


def test_missing_candidates_are_masked(small_table):
    alpha = torch.zeros(small_table.lat.shape, dtype=torch.float64, requires_grad=True)
    e = small_table.expected(alpha)
    e.backward()
    p = small_table.probabilities(alpha.detach())
    assert torch.isfinite(e) and torch.isfinite(alpha.grad).all()
    assert p[1, 2:].eq(0).all() and alpha.grad[1, 2:].eq(0).all()
    assert p.sum(-1).allclose(torch.ones(2, dtype=torch.float64))
    batched = small_table.expected(torch.zeros(3, *small_table.lat.shape))
    assert batched.shape == (3,) and torch.allclose(batched, batched[0].expand(3))
    with pytest.raises(ValueError, match="alpha has shape"):
        small_table.expected(torch.zeros(3, 4))


def test_gradient_points_toward_cheaper_ops(small_table):
    alpha = torch.zeros(small_table.lat.shape, dtype=torch.float64, requires_grad=True)
    small_table.expected(alpha).backward()
    g = alpha.grad
    lat = small_table.lat
    for b in range(lat.shape[0]):
        present = np.flatnonzero(np.isfinite(lat[b]))
        for i in present:
            for j in present:
                if lat[b, i] > lat[b, j]:
                    assert g[b, i] > g[b, j]  # descent lowers the slower op's weight more
    with torch.no_grad():
        assert small_table.expected(alpha - 0.1 * g) < small_table.expected(alpha)


@pytest.mark.parametrize("path", ["numpy", "torch"])
def test_expected_gradient_is_exact(small_table, monkeypatch, path):
    if path == "torch":  # the path taken for GPU tensors and dtypes numpy lacks
        monkeypatch.setattr(LatencyTable, "_arrays", lambda self, alpha: (None, None))
    g = torch.Generator().manual_seed(0)
    alpha = torch.randn(2, *small_table.lat.shape, dtype=torch.float64, generator=g, requires_grad=True)
    assert torch.autograd.gradcheck(small_table.expected, (alpha,))
    probs = small_table.probabilities(alpha.detach()).requires_grad_()
    assert torch.autograd.gradcheck(lambda p: small_table.expected(p, probs=True), (probs,))
    ref = (small_table.probabilities(alpha.detach()) * torch.nan_to_num(torch.tensor(small_table.lat), posinf=0.0))
    assert torch.allclose(small_table.expected(alpha), ref.sum((-2, -1)) + small_table.fixed_ms)
    e32 = small_table.expected(alpha.detach().float())
    assert e32.dtype == torch.float32 and torch.allclose(e32.double(), small_table.expected(alpha), rtol=1e-6)


def test_table_round_trip(small_table, tmp_path):
    d = json.loads(json.dumps(small_table.to_dict()))
    t2 = LatencyTable.from_dict(d)
    assert np.array_equal(t2.lat, small_table.lat) and t2.ops == small_table.ops
    assert t2.fixed_ms == small_table.fixed_ms and t2.platform == "zcu102-dnndk"
    alpha = torch.randn(small_table.lat.shape, generator=torch.Generator().manual_seed(0))
    assert torch.equal(t2.expected(alpha), small_table.expected(alpha))
    path = tmp_path / "table.json"
    small_table.save(path)
    t3 = LatencyTable.load(path)
    assert np.array_equal(t3.lat, small_table.lat) and t3.exact(["c", "d"]) == small_table.exact(["c", "d"])
    with pytest.raises(at.AnnetteError, match="schema"):
        LatencyTable.from_dict({"blocks": []})


# ------------------------------------------------------------------------------------------------------
# the MobileNetV2 / ProxylessNAS space: table vs full-network estimate


@pytest.mark.parametrize("platform", PLATFORMS)
def test_mbv2_table_matches_full_network_estimates(platform):
    table = mbv2.latency_table(platform)
    assert table.n_blocks == len(mbv2.BLOCKS) and table.ops == [list(b.ops) for b in mbv2.BLOCKS]
    rng = np.random.default_rng(0)
    archs = [[str(rng.choice(b.ops)) for b in mbv2.BLOCKS] for _ in range(25)]
    archs += [[b.ops[0] for b in mbv2.BLOCKS], [b.ops[-1] for b in mbv2.BLOCKS],
              ["mb7_e6"] * len(mbv2.BLOCKS)]
    for arch in archs:
        full = at.estimate(mbv2.build_network(arch), platform).latency_ms
        # measured: identical to ~1e-16 relative (no fusion rule crosses an MBConv block boundary)
        assert table.exact(arch) == pytest.approx(full, rel=1e-9)
        p = torch.tensor(table.one_hot(arch), dtype=torch.float64)
        assert float(table.expected(p, probs=True)) == pytest.approx(full, rel=1e-9)
    lo, hi = table.extremes()
    assert lo < float(table.expected(torch.zeros(table.lat.shape))) < hi


def test_mbv2_table_with_a_cache_model_stays_close_to_full_network_estimates():
    """ort-cpu has a cache model: blocks are judged inside the mean network, full estimates inside the real one."""
    table = mbv2.latency_table("ort-cpu")
    rng = np.random.default_rng(0)
    for _ in range(10):
        arch = [str(rng.choice(b.ops)) for b in mbv2.BLOCKS]
        full = at.estimate(mbv2.build_network(arch), "ort-cpu").device_ms
        assert table.exact(arch) == pytest.approx(full, rel=0.02)  # measured: <= 0.7% over 25 random archs
