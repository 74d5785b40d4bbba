"""Estimator: totals, per-layer tables, fallbacks, batch scoring and input errors."""

from __future__ import annotations

import csv
import io
import json
import logging

import numpy as np
import pytest

import annette_torch as at
from annette_torch import ModelLoadError
from annette_torch.ir import LayerType as T, NetworkBuilder


def _net(name="n", width=16):
    b = NetworkBuilder(name)
    x = b.input("x", (1, 3, 32, 32))
    c = b.conv("conv", x, width, 3, padding=1)
    bn = b.same(T.BATCH_NORM, "bn", c)
    r = b.same(T.RELU, "relu", bn)
    p = b.pool("pool", r, "max", 2)
    u = b.add(T.UNKNOWN, "weird", [p], (1, width, 16, 16), op="Mystery")
    g = b.global_pool("gap", u)
    b.linear("fc", g, 10)
    return b.build()


@pytest.mark.parametrize("platform", ["zcu102-dnndk", "ncs2"])
def test_every_layer_gets_a_time_and_totals_add_up(platform):
    e = at.estimate(_net(), platform)
    rows = e.table()
    assert [r["name"] for r in rows] == e.network.names
    assert sum(r["time_ms"] for r in rows) == pytest.approx(e.device_ms)
    executed = [r for r in rows if not r["fused_into"]]
    assert all(r["time_ms"] > 0 for r in executed)
    assert e.unknown_layers == ["weird"]
    unknown = next(r for r in rows if r["name"] == "weird")
    assert unknown["model"].endswith(":Base") and unknown["time_ms"] > 0


def test_fusion_is_reported_on_zcu102():
    e = at.estimate(_net(), "zcu102-dnndk")
    rows = {r["name"]: r for r in e.table()}
    assert rows["bn"]["fused_into"] == "conv" and rows["relu"]["fused_into"] == "conv"
    assert rows["pool"]["fused_into"] == "conv"  # DNNDK fuses max pools into the convolution
    assert rows["conv"]["type"] == "ConvPool" and rows["conv"]["absorbed"] == "bn;relu;pool"
    assert rows["conv"]["model"] == "refined_roofline:ConvPool"
    assert rows["bn"]["time_ms"] == 0 and rows["bn"]["model"] == "fused"


def test_to_dict_and_csv():
    e = at.estimate(_net(), "zcu102-dnndk")
    d = json.loads(json.dumps(e.to_dict()))
    assert d["device_ms"] == pytest.approx(e.device_ms) and len(d["layers"]) == len(e.network)
    rows = list(csv.DictReader(io.StringIO(e.to_csv())))
    assert len(rows) == len(e.network) and float(rows[1]["time_ms"]) == pytest.approx(e.time_ms[1])


def test_wider_network_is_slower():
    assert at.estimate(_net(width=64), "zcu102-dnndk").device_ms > at.estimate(_net(width=16), "zcu102-dnndk").device_ms


def test_estimate_many_equals_single_estimates():
    nets = [_net(f"n{i}", w) for i, w in enumerate([8, 16, 24, 32, 64])]
    many = at.estimate_many(nets, "ncs2")
    single = [at.estimate(n, "ncs2").device_ms for n in nets]
    np.testing.assert_allclose(many, single, rtol=1e-12)
    assert at.estimate_many([], "ncs2").size == 0


def test_estimate_from_annette_json_path(ref_dir):
    """A graph file's path gives the estimate of the graph it holds, every one of its layers included."""
    import json

    path = ref_dir / "graphs" / "cf_resnet18.json"
    e = at.estimate(str(path), "zcu102-dnndk")
    assert len(e.network) == len(json.loads(path.read_text())["layers"])
    assert e.device_ms == at.estimate(at.from_annette_json(path), "zcu102-dnndk").device_ms > 0


def test_bad_inputs_are_clear_errors(tmp_path):
    with pytest.raises(ModelLoadError, match="no such file"):
        at.estimate(str(tmp_path / "missing.onnx"))
    (tmp_path / "m.txt").write_text("x")
    with pytest.raises(ModelLoadError, match="unknown model format"):
        at.estimate(str(tmp_path / "m.txt"))
    with pytest.raises(ModelLoadError, match="cannot estimate a int"):
        at.estimate(42)
    with pytest.raises(at.PlatformError):
        at.estimate(_net(), "nope")


def test_unknown_op_in_json_graph_warns_once(tmp_path, caplog):
    g = {"name": "g", "layers": {
        "in": {"type": "DataInput", "parents": [], "children": ["a"], "output_shape": [-1, 8, 8, 4]},
        "a": {"type": "Frobnicate", "parents": ["in"], "children": ["b"], "output_shape": [-1, 8, 8, 4],
              "input_shape": [-1, 8, 8, 4]},
        "b": {"type": "Frobnicate", "parents": ["a"], "children": [], "output_shape": [-1, 8, 8, 4],
              "input_shape": [-1, 8, 8, 4]}}}
    p = tmp_path / "g.json"
    p.write_text(json.dumps(g))
    with caplog.at_level(logging.WARNING):
        e = at.estimate(str(p), "ncs2")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "Frobnicate" in warnings[0].getMessage()
    assert e.unknown_layers == ["a", "b"] and e.device_ms > 0


def test_annette_json_errors(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text('{"name": "x", "layers": {')
    with pytest.raises(ModelLoadError, match="not valid JSON"):
        at.from_annette_json(p)
    p.write_text('{"name": "x"}')
    with pytest.raises(ModelLoadError, match="not an ANNETTE graph"):
        at.from_annette_json(p)
    p.write_text(json.dumps({"layers": {"a": {"type": "DataInput", "parents": [], "children": [],
                                              "output_shape": [-1, "h", 8, 3]}}}))
    with pytest.raises(ModelLoadError, match="placeholders"):
        at.from_annette_json(p)
    p.write_text(json.dumps({"layers": {
        "a": {"type": "Relu", "parents": ["b"], "children": ["b"], "output_shape": [-1, 8, 8, 3]},
        "b": {"type": "Relu", "parents": ["a"], "children": ["a"], "output_shape": [-1, 8, 8, 3]}}}))
    with pytest.raises(ModelLoadError, match="cycle"):
        at.from_annette_json(p)


def test_annette_json_detects_depthwise_and_grouped_convs(ref_dir):
    net = at.from_annette_json(ref_dir / "graphs" / "mobilenetv2-7.json")
    assert net.summary().get("DepthwiseConv", 0) == 17
    alex = at.from_annette_json(ref_dir / "graphs" / "bvlcalexnet-9.json")
    assert alex.summary().get("GroupConv", 0) == 3


def test_estimation_needs_only_numpy(tmp_path):
    """Scoring on every shipped platform works without the optional fitting / runtime / search packages."""
    import subprocess
    import sys
    code = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('scipy', 'sklearn', 'onnxruntime', 'openvino', 'optuna', 'torch'):
            raise ImportError('blocked ' + name)
sys.meta_path.insert(0, Block())
import annette_torch as at
from annette_torch.ir import NetworkBuilder
b = NetworkBuilder('t'); x = b.input('x', (1, 3, 32, 32)); b.conv('c', x, 8, 3, padding=1)
for p in at.list_platforms():
    assert at.estimate(b.build(), p).device_ms > 0, p
print('ok')
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
