"""scripts/add_measured_cpu_rules.py: a short sweep of the preact suite on OpenVINO teaches BatchNorm+Relu (the
ReLU runs inside the BatchNorm), added once to a machine file; the shipped OpenVINO files carry it and price a
DenseNet layer's ReLU as fused."""

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
    rules = {r["name"]: r for r in mod.measure_rules("openvino-cpu", ("preact",), 6, ())}
    assert rules["BatchNorm+Relu"]["primary"] == ["BatchNorm"] and rules["BatchNorm+Relu"]["secondary"] == ["Relu"]
    assert rules["BatchNorm+Relu"]["origin"].startswith("fused in 100% of 6 measured pairs (preact suite, measured")
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
