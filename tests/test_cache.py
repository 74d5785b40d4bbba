"""The in-context cache model: semantics, validation, fitting on synthetic data, use in the estimator."""

from __future__ import annotations

import numpy as np
import pytest

from annette_torch import estimate, estimate_many, trace, zoo
from annette_torch.bench.records import NOT_FUSED, LayerRecord
from annette_torch.bench.suites import SUITES
from annette_torch.errors import PlatformError
from annette_torch.fit.cache_fit import fit_cache
from annette_torch.fit.data import Measured
from annette_torch.ir import LayerType as T
from annette_torch.mapping import MappingModel
from annette_torch.models import Roofline
from annette_torch.models.cache import MB, CacheModel
from annette_torch.platform import Platform
from annette_torch.prediction import layer_times

TRUE = CacheModel(8 * MB, 64 * MB, 16 * MB, {"Conv": 0.04, "FullyConnected": 0.03, "default": 0.04},
                  {"Conv": 5e9 * 100 ** 0.5, "FullyConnected": 5e9 * 100 ** 0.5})


def _plat(cache: CacheModel | None = None) -> Platform:
    base = Roofline(op_s=50e9, bandwidth=80e9, bit_act=32, bit_weights=32)
    meta = {"cache": cache.to_dict()} if cache is not None else {}
    return Platform("syn", {"Base": base}, description="synthetic", meta=meta)


def test_cold_share_and_apply():
    m = TRUE
    assert m.cold_share([1 * MB, 8 * MB, 64 * MB, 1e12]).tolist() == [0.0, 0.0, 1.0, 1.0]
    assert m.cold_share(np.sqrt(8 * 64) * MB) == pytest.approx(0.5)  # linear in log traffic
    t = np.array([1.0, 1.0, 1.0, 0.01])
    types = np.array([T.CONV, T.FULLY_CONNECTED, T.RELU, T.FULLY_CONNECTED])
    w = np.array([4 * MB, 32 * MB, 0.0, 512 * MB])
    assert (m.apply(t, types, w, 4 * MB) == t).all()  # the network fits the caches: as measured alone
    hot = m.apply(t, types, w, 1e12)
    assert hot[0] == pytest.approx(1.0 + 0.04 * 4) and hot[1] == pytest.approx(1.0 + 0.03 * 16)  # capacity caps
    assert hot[2] == 1.0  # no weights, no penalty
    assert hot[3] == pytest.approx(512 * MB / 50e9 * 1e3)  # streamed from DRAM


def test_round_trip_and_validation():
    d = TRUE.to_dict()
    assert CacheModel.from_dict(d, "c").to_dict() == d
    for bad, msg in (({**d, "cold_bytes": d["warm_bytes"]}, "cold_bytes: must exceed"),
                     ({**d, "penalty_ms_per_mb": {"Cnov": 1.0}}, "penalty_ms_per_mb.Cnov: unknown layer type"),
                     ({**d, "penalty_ms_per_mb": {"Conv": -1.0}}, "penalty_ms_per_mb.Conv"),
                     ({**d, "stream_bandwidth": {"Conv": 0}}, "stream_bandwidth.Conv"),
                     ({k: v for k, v in d.items() if k != "warm_bytes"}, "warm_bytes: missing"),
                     ([1, 2], "expected an object")):
        with pytest.raises(PlatformError, match=msg):
            CacheModel.from_dict(bad, "c")
    with pytest.raises(PlatformError, match="platform 'syn': cache.capacity_bytes"):
        p = _plat(TRUE).to_dict()
        p["cache"]["capacity_bytes"] = "big"
        Platform.from_dict(p, "x")


def _synthetic_measurements(plat: Platform, truth: CacheModel, n: int = 120) -> list[Measured]:
    suite = SUITES["cold_weights"]
    out = []
    for cfg in suite.configs(n=n, seed=3):
        net = suite.build(cfg)
        t, mi = layer_times(plat, MappingModel().apply(net))
        j = net.names.index("w")
        wb = net.weights * plat.tables.weight_bytes[mi]
        t_ctx = truth.apply(t, net.types, wb, float(plat.tables.layer_bytes(net).sum()))
        recs = {name: LayerRecord(name, net.type_labels()[i], NOT_FUSED, time_ms=float(t_ctx[i]) if i == j else 0.01)
                for i, name in enumerate(net.names)}
        out.append(Measured("cold_weights", cfg["config_id"], net, recs, []))
    return out


def test_fit_recovers_a_known_cache_model():
    plat = _plat()
    model, rep = fit_cache(_synthetic_measurements(plat, TRUE), plat)
    assert model is not None and rep["mape_with_cache"] < 0.01 < rep["mape_warm_models"]
    assert model.warm_bytes == pytest.approx(TRUE.warm_bytes, rel=1e-6)
    assert model.cold_bytes == pytest.approx(TRUE.cold_bytes, rel=1e-6)
    assert model.penalty_ms_per_mb["Conv"] == pytest.approx(0.04, rel=0.05)
    assert model.penalty_ms_per_mb["FullyConnected"] == pytest.approx(0.03, rel=0.05)


def test_fit_needs_enough_configurations():
    plat = _plat()
    model, rep = fit_cache(_synthetic_measurements(plat, TRUE, n=5), plat)
    assert model is None and "cold_weights" in rep["skipped"]


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "tiny_cnn"])
def test_estimate_many_judges_each_network_by_its_own_traffic(name):
    plat = _plat(CacheModel(1 * MB, 8 * MB, 4 * MB, {"default": 0.05}, {"default": 20e9}))
    nets = [trace(getattr(zoo, name)(), (1, 3, 224, 224)), trace(zoo.tiny_cnn(), (1, 3, 64, 64))]
    nets.append(nets[0])
    many = estimate_many(nets, plat)
    one = [estimate(n, plat).device_ms for n in nets]
    assert many == pytest.approx(one, rel=1e-9)
    assert estimate(nets[0], plat).device_ms > estimate(nets[0], _plat()).device_ms  # weights evicted: slower


TWO_TIERS = CacheModel(8 * MB, 64 * MB, 16 * MB, {"Conv": 0.04, "FullyConnected": 0.03, "default": 0.04},
                       {"Conv": 5e9 * 100 ** 0.5, "FullyConnected": 5e9 * 100 ** 0.5}, "",
                       128 * MB, 256 * MB, {"Conv": 5e9 * 10 ** (1 / 3), "FullyConnected": 5e9 * 10 ** (1 / 3)})


def test_dram_tier_slows_streaming_with_traffic_beyond_the_last_level():
    m = TWO_TIERS
    assert m.has_dram_tier and not TRUE.has_dram_tier
    t = np.array([0.01])
    types = np.array([T.FULLY_CONNECTED])
    w = np.array([100 * MB])
    llc = m.apply(t, types, w, 100 * MB)[0]  # past the first tier only: last-level streaming
    assert llc == pytest.approx(100 * MB / 50e9 * 1e3)
    assert llc == pytest.approx(TRUE.apply(t, types, w, 100 * MB)[0])  # the tier changes nothing below it
    dram = m.apply(t, types, w, 1e12)[0]
    assert dram == pytest.approx(100 * MB / (5e9 * 10 ** (1 / 3)) * 1e3)
    mid = m.apply(t, types, w, np.sqrt(128 * 256) * MB)[0]  # half way in log traffic: mean time per byte
    assert mid == pytest.approx((llc + dram) / 2)
    # a DRAM bandwidth above the first tier's never speeds streaming up
    fast = CacheModel(**{**{k: v for k, v in TWO_TIERS.to_dict().items()}, "dram_bandwidth": {"default": 1e12}})
    assert fast.apply(t, types, w, 1e12)[0] == pytest.approx(TRUE.apply(t, types, w, 1e12)[0])


def test_dram_tier_round_trip_and_validation():
    d = TWO_TIERS.to_dict()
    assert CacheModel.from_dict(d, "c").to_dict() == d
    assert "dram_bandwidth" not in TRUE.to_dict()  # files without the tier stay as they were
    with pytest.raises(PlatformError, match="DRAM tier needs .*missing dram_cold_bytes"):
        CacheModel.from_dict({k: v for k, v in d.items() if k != "dram_cold_bytes"}, "c")
    with pytest.raises(PlatformError, match="dram_cold_bytes: must exceed"):
        CacheModel.from_dict({**d, "dram_cold_bytes": d["dram_warm_bytes"]}, "c")
    with pytest.raises(PlatformError, match="dram_bandwidth.Conv"):
        CacheModel.from_dict({**d, "dram_bandwidth": {"Conv": -1}}, "c")


def test_fit_finds_the_dram_tier():
    plat = _plat()
    model, rep = fit_cache(_synthetic_measurements(plat, TWO_TIERS, n=160), plat)
    assert model is not None and model.has_dram_tier, rep["dram_tier"]
    assert rep["mape_with_cache"] < 0.02 < rep["mape_warm_models"]
    assert model.dram_bandwidth["FullyConnected"] == pytest.approx(5e9 * 10 ** (1 / 3), rel=0.1)
    assert model.stream_bandwidth["FullyConnected"] == pytest.approx(50e9, rel=0.1)
    # and on data without one, none is added
    model, rep = fit_cache(_synthetic_measurements(plat, TRUE, n=160), plat)
    assert model is not None and not model.has_dram_tier and "skipped" in rep["dram_tier"]
