"""The Vitis AI 3.0 ZCU102 platform: operator support per toolchain release, the shipped files, the fit's
cross-validation machinery and the accuracy benchmark that reports it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import annette_torch as at
from annette_torch import zoo
from annette_torch.ir import LayerType as T
from annette_torch.ir import NetworkBuilder
from annette_torch.platform import Platform, list_platforms, load_platform, platform_dir

CAL = Path(__file__).resolve().parents[1].parent / "shared" / "calibration"


def _activation_net(act: T):
    """conv -> act -> conv -> act -> global pool -> 1x1 conv -> act -> multiply (an SE-style gate)."""
    b = NetworkBuilder(f"act_{act.label}")
    x = b.input("x", (1, 16, 28, 28))
    y = b.same(act, "a1", b.conv("c1", x, 32, 3, padding=1))
    y = b.same(act, "a2", b.conv("c2", y, 32, 3, padding=1))
    s = b.same(T.HARDSIGMOID, "gate", b.conv("se", b.global_pool("pool", y), 32, 1))
    b.add(T.MUL, "mul", [y, s], b.out_shape(y))
    return b.build()


@pytest.mark.parametrize("act", [T.HARDSWISH, T.HARDSIGMOID, T.SILU, T.SIGMOID])
def test_activations_run_on_the_dpu_with_vitis_ai_3_and_on_the_host_with_dnndk(act):
    net = _activation_net(act)
    vai3 = at.estimate(net, "zcu102-vai3")
    assert vai3.host_layers == [] and vai3.host_ms == 0 and vai3.switches == 0
    for dnndk in ("zcu102-dnndk",):
        est = at.estimate(net, dnndk)
        assert {"gate", "mul"} <= set(est.host_layers)
        if act != T.HARDSIGMOID:  # (the gate is a HardSigmoid in every variant)
            assert {"a1", "a2"} <= set(est.host_layers)
        assert est.host_ms > 0 and est.switches > 0
        assert est.latency_ms > vai3.latency_ms


def test_unsupported_layers_still_go_to_the_host_on_vitis_ai_3():
    b = NetworkBuilder("gelu")
    x = b.input("x", (1, 16, 14, 14))
    b.same(T.GELU, "g", b.conv("c", x, 32, 3, padding=1))
    est = at.estimate(b.build(), "zcu102-vai3")
    assert est.host_layers == ["g"] and est.switch_ms > 0


class _Block(__import__("torch").nn.Module):
    """A pre-norm transformer block written by hand: LayerNorm, attention (two activation products and a
    softmax), GELU MLP."""

    def __init__(self, d: int = 32, heads: int = 2) -> None:
        import torch.nn as nn
        super().__init__()
        self.h = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, n, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        a = (q @ k.transpose(-2, -1)).softmax(-1) @ v
        x = x + self.proj(a.transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.ln2(x))


def test_attention_layer_norm_and_gelu_run_on_the_host_of_both_releases():
    """Neither DPU multiplies two feature maps or runs LayerNorm / GELU (UG1414 v3.0, PG338), and their softmax
    modules take a vector of class scores, not attention's score maps."""
    net = at.trace(_Block().eval(), (1, 16, 32))
    assert T.UNKNOWN not in set(net.types)
    kinds = {T.MATMUL, T.LAYER_NORM, T.GELU}
    for name in ("zcu102-vai3", "zcu102-dnndk"):
        est = at.estimate(net, name)
        host = set(est.host_layers)
        typed = {n: t for n, t in zip(net.names, net.types)}
        assert {typed[n] for n in host} >= kinds, name
        assert T.SOFTMAX in {typed[n] for n in host}, name  # over a feature map: not the classifier's softmax


def test_a_classifier_softmax_stays_on_the_dpu_of_both_releases():
    b = NetworkBuilder("head")
    x = b.input("x", (1, 16, 14, 14))
    y = b.linear("fc", b.global_pool("pool", b.conv("c", x, 32, 3, padding=1)), 10)
    b.same(T.SOFTMAX, "prob", y)
    for name in ("zcu102-vai3", "zcu102-dnndk"):
        assert at.estimate(b.build(), name).host_layers == [], name


def test_files_state_their_toolchain_and_latency_definitions_and_round_trip():
    for name, toolchain in (("zcu102-vai3", "Vitis AI 3.0"), ("zcu102-dnndk", "DNNDK v3.1")):
        path = platform_dir() / f"{name}.json"
        d = json.loads(path.read_text())
        plat = Platform.load(path)
        assert plat.name == name and plat.meta["toolchain"] == toolchain
        assert set(plat.meta["latency_definitions"]) == {"device_ms", "latency_ms"}
        assert plat.to_dict() == d  # nothing lost or added on the way through the loader
        assert Platform.from_dict(json.loads(json.dumps(plat.to_dict())), name).to_dict() == d


def test_zcu102_means_the_current_toolchain_and_each_release_keeps_its_name():
    """``zcu102`` is the board as its users run it today (Vitis AI 3.x); the DNNDK v3.1 model is
    ``zcu102-dnndk``. The estimate says which release it models."""
    assert load_platform("zcu102").name == "zcu102-vai3" and load_platform("zcu102").meta["toolchain"] == "Vitis AI 3.0"
    net = at.trace(zoo.get("mobilenet_v2"), (1, 3, 224, 224))
    assert at.estimate(net, "zcu102").latency_ms == at.estimate(net, "zcu102-vai3").latency_ms
    d = at.estimate(net, "zcu102-dnndk").to_dict(per_layer=False)
    assert d["platform"] == "zcu102-dnndk" and d["toolchain"] == "DNNDK v3.1"
    assert at.estimate(net, "zcu102").to_dict(per_layer=False)["toolchain"] == "Vitis AI 3.0"
    listed = list_platforms()
    assert listed["zcu102"].startswith("= zcu102-vai3: ") and "zcu102-dnndk" in listed


def test_vitis_platform_cites_its_documents_and_marks_readings():
    d = load_platform("zcu102-vai3").to_dict()
    origin = d["support"]["origin"]
    assert "UG1414 v3.0" in origin and "PG338" in origin and "Readings of prose" in origin
    assert d["support"]["accelerator"]["GlobalPool"] == {"kernel": [1, 56]}
    assert any("reading of the measurements" in n for n in d["notes"])
    acc = d["accuracy"]
    assert set(acc["nas_device_ms"]) == set(acc["zoo_latency_ms"]) == {"zcu102-vai3", "macs_proxy", "zcu102-dnndk"}


def test_cross_validation_predicts_each_network_with_a_fit_that_never_saw_it():
    if not CAL.is_dir():
        pytest.skip("../shared/calibration not present")
    from annette_torch.fit import zcu102_vai3 as Z

    names, nets, y = Z.load_nas_candidates(CAL / "accel-nasbench" / "zcu102_nas_candidates.csv")
    keep = np.arange(0, 500, 12)  # 42 candidates: a small fit, few evaluations
    ds = Z.Dataset([names[i] for i in keep], [nets[i] for i in keep], y[keep], np.zeros(keep.size, bool))
    oof = Z.cross_validate_nas(ds, folds=3, max_nfev=8)
    full = Z.fit_all(ds, max_nfev=8)
    in_sample = ds.device_ms(full.platform)
    assert np.isfinite(oof).all() and oof.shape == in_sample.shape
    assert not np.allclose(oof, in_sample)  # each fold refitted without its networks
    m = Z.metrics(oof, ds.y)
    err = oof / ds.y - 1
    assert m["mape"] == pytest.approx(np.mean(np.abs(err))) and m["n"] == keep.size
    assert m["within_10"] == pytest.approx(np.mean(np.abs(err) <= 0.1))


def test_accuracy_benchmark_prints_the_figures_of_the_cross_validation(accuracy_benchmark, monkeypatch, capsys,
                                                                       tmp_path):
    from annette_torch.fit import zcu102_vai3 as Z

    shipped = load_platform("zcu102-vai3").meta["accuracy"]
    fake = {"nas": {k: dict(v) for k, v in shipped["nas_device_ms"].items()},
            "zoo": {k: dict(v) for k, v in shipped["zoo_latency_ms"].items()},
            "zoo_rows": [{"network": "net_a", "measured_ms": 2.0, "loo_pred_ms": 2.2, "macs_proxy_ms": 1.5,
                          "zcu102-dnndk_ms": 3.0}]}
    monkeypatch.setattr(Z, "cv_report", lambda *a, **k: fake)
    assert accuracy_benchmark.zcu102_vai3_report(str(tmp_path)) == 0
    out = capsys.readouterr().out
    mape = 100 * shipped["nas_device_ms"]["zcu102-vai3"]["mape"]
    assert re.search(rf"zcu102-vai3\s+{mape:.1f}%", out) and "net_a" in out and "+10.0%" in out
    assert "records the same figures" in out
    fake["nas"]["zcu102-vai3"]["mape"] += 0.01
    assert accuracy_benchmark.zcu102_vai3_report(str(tmp_path)) == 0
    assert "records DIFFERENT figures" in capsys.readouterr().out


#: zoo models whose name's operation count is not 2 x MACs of the architecture: MobileNet-EdgeTPU's "990M" is its
#: multiply-accumulate count (the TF-slim README's figure); EfficientNet-EdgeTPU-S's "4.72G" matches neither
#: count of the TPU builder's definition (3.60 G operations; its 5.44 M parameters match the published 5.4 M)
OPS_PER_FIGURE = {"tf_mobilenetEdge1.0_imagenet_224_224_990M": 2.0}
OPS_UNMATCHED = {"tf_efficientnet-edgetpu-S_imagenet_224_224_4.72G"}


@pytest.mark.parametrize("model", sorted(__import__("annette_torch.fit.zcu102_vai3", fromlist=["x"]).ZOO_NETWORKS))
def test_zoo_architectures_have_the_operation_count_their_zoo_name_gives(model):
    from annette_torch.fit.zcu102_vai3 import ZOO_NETWORKS

    key, side = ZOO_NETWORKS[model]
    net = at.trace(zoo.get(key, num_classes=1001 if model.startswith("tf") else 1000), (1, 3, side, side))
    figure = re.search(r"_([\d.]+)([GM])$", model)
    published = float(figure.group(1)) * (1e9 if figure.group(2) == "G" else 1e6)
    ratio = net.total_ops / (published * OPS_PER_FIGURE.get(model, 1.0))
    if model in OPS_UNMATCHED:
        assert 0.7 < ratio < 0.8
    else:
        assert ratio == pytest.approx(1.0, abs=0.05), f"{model}: {net.total_ops / 1e9:.3f} G operations"
