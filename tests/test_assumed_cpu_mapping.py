"""scripts/add_assumed_cpu_mapping.py: a default CPU file gets a machine file's layout model (kernel types,
reorder costs, the kernel types' layer models) and what the machine file measured of the runtime (always-fused
pairs, folds, views, the kind scales of models taken from it), marked assumed, and nothing else it has changes; the
shipped default files carry it, price an encoder-decoder's reorders and no transformer's Reshape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import annette_torch as at
from annette_torch.ir import LayerType as T
from annette_torch.ir import NetworkBuilder
from annette_torch.platform import Platform

ROOT = Path(__file__).resolve().parent.parent
MACHINE = "intel-r-xeon-r-processor-2c.json"


def _bare_default(platform: str) -> dict:
    """The default file as it was before the transfer: no kernel types, reorder costs or kernel-type models."""
    d = json.loads((ROOT / "platforms" / f"{platform}.json").read_text())
    d["mapping"].pop("kernel_types", None)
    d["mapping"].get("costs", {}).pop("layout", None)
    for key in ("BlockedResize", "BlockedReshape"):
        d["layers"].pop(key, None)
        for side in ("inserted_input", "inserted_output"):
            d["mapping"].get("costs", {}).get(side, {}).pop(key, None)
    return d


@pytest.mark.parametrize("platform", ["ort-cpu", "openvino-cpu"])
def test_transfer_adds_the_layout_model_marked_assumed_and_keeps_the_rest(platform, script):
    mod = script("add_assumed_cpu_mapping")
    d = _bare_default(platform)
    before = json.loads(json.dumps(d))
    source = json.loads((ROOT / "platforms" / "machines" / platform / MACHINE).read_text())
    added = mod.transfer(d, source, "the machine file")
    assert d["mapping"]["kernel_types"] is True and "kernel_types" in added
    assert ("layout reorder costs" in added) == ("layout" in source["mapping"]["costs"])
    for key in ("BlockedResize", "BlockedReshape"):
        assert d["layers"][key]["origin"].startswith("assumed: ") and key in added
        # the reorder a runtime inserts where such a layer's output leaves the graph comes with it
        out = source["mapping"]["costs"].get("inserted_output", {})
        assert d["mapping"]["costs"]["inserted_output"].get(key) == out.get(key)
    # nothing the default had changes but a view made free, and types outside the kernel typing keep falling back
    assert all(d["layers"][k] == v for k, v in before["layers"].items() if not mod._is_free(d["layers"][k]))
    assert set(d["layers"]) - set(before["layers"]) <= set(mod.KERNEL_TYPE_MODELS)
    assert "assumed" in d["description"]
    Platform.from_dict(d, platform)  # a valid platform
    assert mod.transfer(d, source, "the machine file") == []  # once only


def _decoder():
    """Blocked feature maps upsampled and concatenated with a skip, then a convolution: ONNX Runtime reorders."""
    b = NetworkBuilder("decoder")
    x = b.input("x", (1, 64, 40, 40))
    a = b.conv("enc", x, 64, 3, padding=1)
    d = b.conv("down", a, 128, 3, stride=2, padding=1)
    u = b.add(T.RESIZE, "up", [d], (1, 128, 40, 40))
    c = b.add(T.CONCAT, "cat", [u, a], (1, 192, 40, 40))
    b.conv("fuse", c, 64, 3, padding=1)
    return b.build()


def test_shipped_default_files_carry_the_layout_model():
    for platform in ("ort-cpu", "openvino-cpu"):
        plat = Platform.load(at.platform.platform_dir() / f"{platform}.json")
        assert plat.mapping.kernel_types, platform
        for key in ("BlockedResize", "BlockedReshape"):
            assert plat.layers[key].origin.startswith("assumed: "), (platform, key)
    ort = Platform.load(at.platform.platform_dir() / "ort-cpu.json")
    bare = Platform.from_dict(_bare_default("ort-cpu"), "ort-cpu")
    # the reorders around the plain concat cost time the bare file did not price
    assert at.estimate(_decoder(), ort).latency_ms > at.estimate(_decoder(), bare).latency_ms


def test_the_shipped_default_files_have_all_of_it_and_a_bad_source_is_one_error(tmp_path, capsys, script):
    mod = script("add_assumed_cpu_mapping")
    sources = [str(ROOT / "platforms" / "machines" / p / MACHINE) for p in ("ort-cpu", "openvino-cpu")]
    assert mod.main(["--from", sources[0], "--from", sources[1], "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.count("has them already") == 2
    bad = tmp_path / "zcu.json"
    bad.write_text(json.dumps({"name": "zcu102"}))
    with pytest.raises(SystemExit) as e:
        mod.main(["--from", str(bad), "--dry-run"])
    assert e.value.code == 2 and "not a platform file of ort-cpu or openvino-cpu" in capsys.readouterr().err


def _pre_toolchain() -> tuple[dict, dict]:
    """The shipped openvino-cpu default as before `toolchain`: no OpenVINO fusions of the machine file, no
    hardswish fold, a priced Reshape, no kind scales; and the machine file, with attention kind scales and one on a
    type the default measured on its own machine (Conv), which must not travel."""
    d = json.loads((ROOT / "platforms" / "openvino-cpu.json").read_text())
    source = json.loads((ROOT / "platforms" / "machines" / "openvino-cpu" / MACHINE).read_text())
    ours = {r["name"] for r in source["mapping"]["rules"]}
    d["mapping"]["rules"] = [r for r in d["mapping"]["rules"] if not (r["name"] in ours and (
        r["origin"].startswith("assumed: ") or "#" in r["name"]))]  # (and the decision-tree rules they share)
    d["mapping"]["folds"] = [f for f in d["mapping"]["folds"] if f != "hardswish"]
    d["layers"]["Reshape"] = {"model": "roofline", "op_s": 1e18, "bandwidth": 2.2e10, "bit_act": 32.0,
                              "bit_weights": 32.0}
    d["overhead"].pop("kind_scales", None)
    # (the attention scales an earlier machine file held, whatever the current one's calibration chose)
    source["overhead"]["kind_scales"] = {"MatMul": 0.54, "Softmax": 0.54, "Conv": 2.0}
    return d, source


def test_toolchain_carries_the_runtimes_fusions_views_and_the_scales_of_the_models_it_gave(script):
    mod = script("add_assumed_cpu_mapping")
    d, source = _pre_toolchain()
    before = json.loads(json.dumps(d))
    added = mod.toolchain(d, source, "the machine file")
    rules = {r["name"]: r for r in d["mapping"]["rules"]}
    for name in ("FullyConnected+Reshape", "MatMul+MatMul", "GroupConv+BatchNorm"):
        assert f"{name} fusion" in added and rules[name]["origin"].startswith("assumed: fused in 100%")
    # a fusion the machine file learned as a decision tree is the CPU's as much as the runtime's: not carried
    assert not any("#" in a for a in added) and any("#" in r["name"] for r in source["mapping"]["rules"])
    assert "hardswish" in d["mapping"]["folds"] and "free Reshape" in added
    assert mod._is_free(d["layers"]["Reshape"]) and d["layers"]["Reshape"]["origin"].startswith("assumed: a view")
    # the scales of MatMul and Softmax (models from the machine file's CPU) travel; Conv's (the default's own) not
    assert d["overhead"]["kind_scales"] == {k: source["overhead"]["kind_scales"][k] for k in ("MatMul", "Softmax")}
    assert "assumed" in d["overhead"]["origin"]
    assert all(d["layers"][k] == v for k, v in before["layers"].items() if k != "Reshape")
    Platform.from_dict(d, "openvino-cpu")
    assert mod.toolchain(d, source, "the machine file") == []  # once only


def _attention_tokens():
    """A transformer's token projection and the reshape into heads after it (OpenVINO fuses the two)."""
    b = NetworkBuilder("tokens")
    x = b.input("x", (1, 196, 192))
    q = b.add(T.FULLY_CONNECTED, "q", [x], (1, 196, 192), weights=192 * 192)
    b.add(T.RESHAPE, "heads", [q], (1, 196, 3, 64))
    return b.build()


def test_shipped_openvino_default_prices_no_reshape_and_scales_attention():
    shipped = Platform.load(at.platform.platform_dir() / "openvino-cpu.json")
    d, _ = _pre_toolchain()
    pre = Platform.from_dict(d, "openvino-cpu")
    rows = {r["name"]: r for r in at.estimate(_attention_tokens(), shipped).table()}
    assert rows["heads"]["time_ms"] == 0.0
    assert sum(r["time_ms"] for r in at.estimate(_attention_tokens(), pre).table() if r["name"] == "heads") > 0
    assert {t for t, _, _ in shipped.kind_scales} == {int(T.MATMUL), int(T.SOFTMAX)}


def test_the_shipped_ort_files_price_a_mean_over_one_axis_and_run_a_classifiers_relu_inside():
    """scripts/add_assumed_cpu_types.py gave ort-cpu a ReduceMean model (a TensorFlow squeeze-excite block's
    two-step spatial mean: no longer its Base roofline, which priced it at 0), and
    scripts/add_measured_cpu_rules.py both runtimes' FullyConnected+Relu rule (the ReLU runs inside the layer)."""
    b = NetworkBuilder("se-mean-head")
    x = b.input("x", (1, 144, 28, 28))
    x = b.add(T.REDUCE_MEAN, "mean_w", [x], (1, 144, 28, 1))
    x = b.add(T.REDUCE_MEAN, "mean_h", [x], (1, 144, 1, 1))
    x = b.linear("fc", b.add(T.FLATTEN, "flat", [x], (1, 144)), 256)
    b.same(T.RELU, "relu", x)
    net = b.build()
    for name in ("ort-cpu.json", f"machines/ort-cpu/{MACHINE}"):
        rows = {r["name"]: r for r in at.estimate(net, at.load_platform(ROOT / "platforms" / name)).table()}
        assert rows["mean_w"]["model"].split(":")[-1].startswith("ReduceMean") and rows["mean_w"]["time_ms"] > 0.005
    for name in ("ort-cpu", "openvino-cpu"):
        rows = {r["name"]: r for r in at.estimate(net, at.load_platform(ROOT / "platforms" / f"{name}.json")).table()}
        assert rows["relu"]["fused_into"] == "fc" and rows["relu"]["time_ms"] == 0.0
