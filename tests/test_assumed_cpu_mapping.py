"""scripts/add_assumed_cpu_mapping.py: a default CPU file gets a machine file's layout model (kernel types,
reorder costs, the kernel types' layer models) marked assumed, and nothing it has changes; the shipped default
files carry it and price an encoder-decoder's reorders."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import annette_torch as at
from annette_torch.ir import LayerType as T
from annette_torch.ir import NetworkBuilder
from annette_torch.platform import Platform

ROOT = Path(__file__).resolve().parent.parent
MACHINE = "intel-r-xeon-r-processor-2c.json"


def _script():
    spec = importlib.util.spec_from_file_location("assumed_mapping", ROOT / "scripts" / "add_assumed_cpu_mapping.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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
def test_transfer_adds_the_layout_model_marked_assumed_and_keeps_the_rest(platform):
    mod = _script()
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
    # nothing the default had changes, and types outside the kernel typing keep falling back
    assert all(d["layers"][k] == v for k, v in before["layers"].items())
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


def test_the_shipped_default_files_have_all_of_it_and_a_bad_source_is_one_error(tmp_path, capsys):
    mod = _script()
    sources = [str(ROOT / "platforms" / "machines" / p / MACHINE) for p in ("ort-cpu", "openvino-cpu")]
    assert mod.main(["--from", sources[0], "--from", sources[1], "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.count("has them already") == 2
    bad = tmp_path / "zcu.json"
    bad.write_text(json.dumps({"name": "zcu102"}))
    with pytest.raises(SystemExit) as e:
        mod.main(["--from", str(bad), "--dry-run"])
    assert e.value.code == 2 and "not a platform file of ort-cpu or openvino-cpu" in capsys.readouterr().err
