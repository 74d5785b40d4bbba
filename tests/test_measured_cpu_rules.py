"""scripts/add_measured_cpu_rules.py: a short sweep of the preact suite on OpenVINO teaches BatchNorm+Relu (the
ReLU runs inside the BatchNorm), added once to a machine file; the shipped OpenVINO files carry it and price a
DenseNet layer's ReLU as fused. Residual sweeps with and without a ReLU before the add teach that a residual Add
joins the convolution before it only when that has not applied its ReLU; it replaces the files' Conv+Add."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import annette_torch as at
from annette_torch.bench.suites.fused import build_preact
from annette_torch.platform import Platform

ROOT = Path(__file__).resolve().parent.parent
MACHINE = ROOT / "platforms" / "machines" / "openvino-cpu" / "intel-r-xeon-r-processor-2c.json"


def test_openvino_runs_a_densenet_relu_inside_its_batchnorm(script):
    pytest.importorskip("openvino")
    mod = script("add_measured_cpu_rules")
    rules = {r["name"]: r for r in mod.measure_rules("openvino-cpu", (("preact", {}),), 6, [()])[()]}
    assert rules["BatchNorm+Relu"]["primary"] == ["BatchNorm"] and rules["BatchNorm+Relu"]["secondary"] == ["Relu"]
    assert rules["BatchNorm+Relu"]["origin"].startswith("fused in 100% of 6 measured pairs (preact; measured on")
    # the concat before it is not fused: the BatchNorm runs as a layer of its own
    assert "Concat+BatchNorm" not in rules


def test_rules_are_added_once_and_the_shipped_files_carry_them(script):
    mod = script("add_measured_cpu_rules")
    d = json.loads(MACHINE.read_text())
    rule = next(r for r in d["mapping"]["rules"] if r["name"] == "BatchNorm+Relu")
    d["mapping"]["rules"] = [r for r in d["mapping"]["rules"] if r["name"] != "BatchNorm+Relu"]
    n, bare = len(d["mapping"]["rules"]), json.loads(json.dumps(d))
    assert mod.add_rules(d, [rule]) == ["BatchNorm+Relu"] and len(d["mapping"]["rules"]) == n + 1
    assert mod.add_rules(d, [rule]) == []
    Platform.from_dict(d, "openvino-cpu")
    net = build_preact({"hw": 28, "c": 64, "g": 32, "f": 128, "k": 1})
    times = {r["name"]: r["time_ms"] for r in at.estimate(net, Platform.load(MACHINE)).table()}
    before = {r["name"]: r["time_ms"] for r in at.estimate(net, Platform.from_dict(bare, "openvino-cpu")).table()}
    assert times["relu"] == 0.0 < before["relu"]  # priced as a pass of its own without the rule
    # the default file carries it, assumed (its own measured Concat+BatchNorm keeps the BatchNorm in the concat)
    shipped = json.loads((ROOT / "platforms" / "openvino-cpu.json").read_text())
    carried = next(r for r in shipped["mapping"]["rules"] if r["name"] == "BatchNorm+Relu")
    assert carried["origin"].startswith("assumed: fused in 100%")


ADD_AFTER_BN = [{"layer": "primary", "attr": "activated", "op": "<=", "value": 0}]


def test_onnx_runtime_fuses_a_residual_add_into_a_conv_only_before_its_relu(script):
    mod = script("add_measured_cpu_rules")
    rules = mod.measure_rules("ort-cpu", (("residual", {}), ("residual", {"post": "relu"})), 8, [()])[()]
    add = [r for r in rules if r["name"].startswith("Conv+Add")]
    assert len(add) == 1 and add[0]["when"] == ADD_AFTER_BN and add[0]["multi_input"]
    assert "residual[post=relu]" in add[0]["origin"]


def test_a_rule_on_the_fused_group_replaces_the_files_rules_for_its_pair_in_place(script):
    mod = script("add_measured_cpu_rules")
    path = ROOT / "platforms" / "machines" / "ort-cpu" / "intel-r-xeon-r-processor-2c.json"
    d = json.loads(path.read_text())
    rules = d["mapping"]["rules"]
    at_ = next(i for i, r in enumerate(rules) if r["name"].startswith("Conv+Add"))
    learned = dict(rules[at_], name="Conv+Add#0", when=ADD_AFTER_BN, origin="decision tree on 24 measured pairs")
    rules[at_:at_ + 1] = [{"name": "Conv+Add", "primary": ["Conv"], "secondary": ["Add"], "multi_input": True}]
    old = json.loads(json.dumps(d))
    assert mod.add_rules(d, [learned], assumed=True) == ["Conv+Add#0"]
    new = d["mapping"]["rules"]
    assert len(new) == len(rules) and new[at_]["when"] == ADD_AFTER_BN and new[at_]["origin"].startswith("assumed: ")
    assert [r["name"] for r in new[:at_] + new[at_ + 1:]] == [r["name"] for r in rules[:at_] + rules[at_ + 1:]]
    assert mod.add_rules(d, [learned], assumed=True) == []
    net = _cell_sum()
    fused = {r["name"]: r for r in at.estimate(net, Platform.from_dict(old, "ort-cpu")).table()}
    apart = {r["name"]: r for r in at.estimate(net, Platform.from_dict(d, "ort-cpu")).table()}
    assert fused["add"]["fused_into"] and not apart["add"]["fused_into"] and apart["add"]["time_ms"] > 0


def test_the_shipped_cpu_files_fuse_a_residual_add_only_before_the_relu():
    for path in [ROOT / "platforms" / f"{n}.json" for n in ("ort-cpu", "openvino-cpu")] + \
            sorted((ROOT / "platforms" / "machines").glob("*/*.json")):
        add = [r for r in json.loads(path.read_text())["mapping"]["rules"] if r["name"].startswith("Conv+Add")]
        assert [r["when"] for r in add] == [ADD_AFTER_BN], path.name
        assert ("assumed: " in add[0]["origin"]) == ("machines" in path.parts), path.name
        table = {r["name"]: r for r in at.estimate(_cell_sum(), Platform.load(path)).table()}
        assert not table["add"]["fused_into"], path.name


def _cell_sum():
    """Two conv-bn-relu paths summed (a NAS-Bench-101 vertex), then a conv."""
    from annette_torch.ir import LayerType as T, NetworkBuilder
    b = NetworkBuilder("cell")
    x = b.input("x", (1, 32, 28, 28))
    paths = [b.same(T.RELU, f"r{i}", b.same(T.BATCH_NORM, f"bn{i}", b.conv(f"c{i}", x, 32, 3, padding=1)))
             for i in range(2)]
    b.conv("out", b.same(T.ADD, "add", paths), 32, 1)
    return b.build()
