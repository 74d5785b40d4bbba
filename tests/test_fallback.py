"""Layers no model of their own type estimates: flagged on measured platforms, and the types that run a swept
type's kernel (Clip, Sub, Div) use that type's model."""

from __future__ import annotations

import json

import numpy as np
import pytest

import annette_torch as at
from annette_torch.cli import main
from annette_torch.ir import LayerType as T, NetworkBuilder


def _net(act: T = T.LRN):
    b = NetworkBuilder("softmax-net")
    x = b.input("x", (1, 16, 32, 32))
    c = b.conv("conv", x, 16, 3, padding=1)
    a = b.same(act, "act", c)
    b.conv("conv2", a, 16, 3, padding=1)
    return b.build()


@pytest.mark.parametrize("platform", ["ort-cpu", "openvino-cpu"])
def test_a_layer_without_a_model_of_its_type_is_flagged_in_the_table_csv_and_json(platform):
    est = at.estimate(_net(), platform)  # (the shipped CPU files' sweeps have no LRN)
    assert est.fallback_layers == ["act"] and est.fallback_summary() == "LRN x1"
    row = {r["name"]: r for r in est.table()}["act"]
    assert row["model"] == "roofline:Base" and row["flag"].startswith(f"no LRN model in {platform}")
    assert [r["flag"] for r in est.table() if r["name"] != "act"] == ["", "", ""]
    assert "no LRN model" in est.to_csv()
    assert json.loads(json.dumps(est.to_dict()))["fallback_layers"] == ["act"]


def test_the_cli_says_how_many_layers_fell_back(tmp_path, capsys):
    import onnx  # noqa: F401  (the ONNX front end)
    from annette_torch.bench.export import to_onnx
    path = tmp_path / "m.onnx"
    path.write_bytes(to_onnx(_net()).SerializeToString())
    assert main(["estimate", str(path), "-p", "ort-cpu"]) == 0
    out = capsys.readouterr().out
    assert "fallback  1 layer(s) without a model of their own type in ort-cpu (LRN x1)" in out


def test_published_platforms_and_modelled_types_raise_no_flag():
    """zcu102's Base is the published model of the types it does not list; a ReLU has a model of its own."""
    assert at.estimate(_net(), "zcu102-dnndk").fallback_layers == []
    assert at.estimate(_net(T.RELU), "ort-cpu").fallback_layers == []


@pytest.mark.parametrize("t, same_as", [(T.CLIP, T.RELU6), (T.SUB, T.ADD), (T.DIV, T.MUL)])
def test_types_that_run_a_swept_kernel_use_its_model(t, same_as):
    # the default shipped file by path (a machine's own file, which "ort-cpu" resolves to there, may have swept
    # Sub and Div itself)
    plat = at.Platform.load(at.platform.platform_dir() / "ort-cpu.json")
    assert t.label not in plat.layers and same_as.label in plat.layers

    def time_of(op):
        b = NetworkBuilder("alias")
        x = b.input("x", (1, 64, 56, 56))  # (on the graph input: no fusion rule applies)
        b.same(op, "op", x if op in (T.CLIP, T.RELU6) else [x, b.input("y", (1, 64, 56, 56))])
        row = {r["name"]: r for r in at.estimate(b.build(), plat).table()}["op"]
        return row["model"], row["flag"], row["time_ms"]

    model, flag, ms = time_of(t)
    assert (model, flag) == (f"mixed:{same_as.label}", "")
    assert ms > 0 and ms == pytest.approx(time_of(same_as)[2], rel=0.1)


@pytest.mark.parametrize("platform", ["ort-cpu", "openvino-cpu"])
def test_softplus_has_an_assumed_model_in_the_shipped_cpu_files(platform):
    """Measured here with the benchmark tool (scripts/add_assumed_cpu_types.py), labelled as assumed: ONNX
    Runtime's scalar Softplus costs far more than the Base roofline's memory-bound rate."""
    est = at.estimate(_net(T.SOFTPLUS), platform)
    row = {r["name"]: r for r in est.table()}["act"]
    assert row["model"].endswith("Softplus (assumed)") and not row["flag"] and est.fallback_layers == []
    if platform == "ort-cpu":  # ~10 ns per element: 16k elements take well over 0.05 ms
        assert row["time_ms"] > 0.05
