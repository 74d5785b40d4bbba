"""Platform files: schema validation with field-naming errors, round trips, layer-model formulas."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from annette_torch import PlatformError
from annette_torch.ir import LayerType as T, NetworkBuilder
from annette_torch.models import LayerFeatures, RefinedRoofline, Roofline
from annette_torch.models.refined import efficiency
from annette_torch.platform import Platform, list_platforms, load_platform
from annette_torch.prediction import layer_times


def _net():
    b = NetworkBuilder("n")
    x = b.input("x", (1, 24, 20, 20))
    c = b.conv("c", x, 40, 3, padding=1)
    b.same(T.RELU, "r", c)
    return b.build()


def test_roofline_is_max_of_compute_and_memory():
    net = _net()
    X = LayerFeatures.from_network(net)
    m = Roofline(op_s=1e9, bandwidth=1e8, bit_act=16, bit_weights=8)
    byts = (net.in_elems + net.out_elems) * 2 + net.weights
    np.testing.assert_allclose(m.predict(X), np.maximum(net.ops / 1e9, byts / 1e8) * 1e3)


def test_refined_efficiency_steps():
    # 20 channels on 16 units: two steps, 20/32 used
    assert efficiency(np.array([20]), 16, 1.0)[0] == pytest.approx(20 / 32)
    assert efficiency(np.array([32]), 16, 1.0)[0] == pytest.approx(1.0)
    assert efficiency(np.array([20]), 16, 0.0)[0] == pytest.approx(1.0)  # alpha 0: no effect
    assert efficiency(np.array([5]), 16, 1.0, replicate=True)[0] == 1.0
    assert efficiency(np.array([5]), 16, 1.0, replicate=False)[0] == pytest.approx(5 / 16)
    a = 0.5
    assert efficiency(np.array([20]), 16, a)[0] == pytest.approx(1 / ((1 - a) + a / (20 / 32)))


def test_refined_roofline_slows_compute_bound_layers_only():
    net = _net()
    X = LayerFeatures.from_network(net, np.array([1]))
    plain = Roofline(op_s=1e9, bandwidth=1e12)
    ref = RefinedRoofline(op_s=1e9, bandwidth=1e12, unroll={"c": {"s": 16, "alpha": 1.0}, "f": {"s": 16, "alpha": 1.0}})
    # c = 24 -> 24/32, f = 40 -> 40/48
    assert ref.predict(X)[0] == pytest.approx(plain.predict(X)[0] / (24 / 32 * 40 / 48))


def test_shipped_platforms_listed_and_load():
    names = list_platforms()
    assert {"zcu102-dnndk", "ncs2"} <= set(names)
    for n in ("zcu102-dnndk", "ncs2"):
        p = load_platform(n)
        assert p.name == n and "Base" in p.layers and p.mapping.rules
        conv = p.layers["Conv"]  # zcu102: the published refined roofline; ncs2: fitted, mixed on a refined roofline
        assert isinstance(conv if n == "zcu102-dnndk" else conv.base, RefinedRoofline)
        assert all(getattr(m, "origin", "") for m in p.layers.values()), "every number documents its origin"


def test_round_trip_is_identical(tmp_path):
    p = load_platform("zcu102-dnndk")
    path = tmp_path / "p.json"
    p.save(path)
    q = Platform.load(path)
    assert q.to_dict() == p.to_dict()
    net = _net()
    m1, m2 = p.mapping.apply(net), q.mapping.apply(net)
    np.testing.assert_array_equal(layer_times(p, m1)[0], layer_times(q, m2)[0])


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=5), kids, max_size=4),
                    max_leaves=20))
@settings(max_examples=200, deadline=None)
def test_platform_text_is_plain_json_of_the_same_data(d):
    from annette_torch.platform import dumps_platform
    assert json.loads(dumps_platform(d)) == d


def test_number_arrays_are_written_on_one_line(tmp_path):
    from annette_torch.platform import dumps_platform
    text = dumps_platform({"a": {"values": [1.5, 2, -3e-9], "rows": [[1, 2], [3, 4]], "empty": [], "none": {}}})
    assert '"values": [1.5, 2, -3e-09]' in text and "[1, 2]" in text
    assert len(text.splitlines()) == 11  # objects and nested lists indented, number lists kept whole


def _base_dict():
    return load_platform("zcu102-dnndk").to_dict()


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d["layers"]["Conv"].__setitem__("op_s", -5.0), "layers.Conv.op_s"),
    (lambda d: d["layers"]["Base"].__setitem__("bandwidth", "fast"), "layers.Base.bandwidth"),
    (lambda d: d["layers"]["Pool"].pop("op_s"), "layers.Pool.op_s"),
    (lambda d: d["layers"].pop("Base"), "layers.Base"),
    (lambda d: d["layers"].__setitem__("Warp", {"model": "roofline", "op_s": 1, "bandwidth": 1}), "layers.Warp"),
    (lambda d: d["layers"]["Conv"].__setitem__("model", "magic"), "layers.Conv.model"),
    (lambda d: d["layers"]["Conv"]["unroll"]["c"].__setitem__("alpha", 1.5), "layers.Conv.unroll.c.alpha"),
    (lambda d: d["layers"]["Conv"]["unroll"].__setitem__("z", {"s": 2, "alpha": 1}), "layers.Conv.unroll.z"),
    (lambda d: d["mapping"]["rules"][0].__setitem__("primary", "Conv9"), "primary"),
    (lambda d: d["mapping"]["rules"][0].__setitem__("when", [{"layer": "x", "attr": "kh", "op": "==", "value": 1}]),
     "when[0].layer"),
    (lambda d: d.__setitem__("schema_version", 99), "newer"),
    (lambda d: d.__setitem__("schema", "something-else"), "schema"),
    (lambda d: d.pop("name"), "name"),
])
def test_malformed_platform_names_the_field(tmp_path, mutate, field):
    d = copy.deepcopy(_base_dict())
    mutate(d)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(d))
    with pytest.raises(PlatformError, match=field.replace(".", r"\.").replace("[", r"\[").replace("]", r"\]")):
        Platform.load(path)


def test_truncated_and_missing_platform_files(tmp_path):
    good = json.dumps(_base_dict())
    path = tmp_path / "t.json"
    path.write_text(good[: len(good) // 2])
    with pytest.raises(PlatformError, match="not valid JSON"):
        Platform.load(path)
    with pytest.raises(PlatformError, match="no such platform file"):
        load_platform(tmp_path / "nope.json")
    with pytest.raises(PlatformError, match="unknown platform 'tpu9'.*zcu102"):
        load_platform("tpu9")


def test_platform_files_are_plain_json_no_pickle():
    from annette_torch.platform import platform_dir
    for f in platform_dir().glob("*.json"):
        json.loads(f.read_text())  # plain JSON
        assert ".sav" not in f.read_text() and "pickle" not in f.read_text()


def test_machine_fingerprint_warning(caplog):
    import logging
    d = load_platform("ncs2").to_dict()
    d["fingerprint"] = {"cpu": "Imaginary CPU 9000", "cores": 1024, "threads": 1}
    p = Platform.from_dict(d, "x")
    with caplog.at_level(logging.WARNING):
        assert "Imaginary CPU 9000" in p.check_machine()
        assert p.check_machine() is None  # once per platform
    from annette_torch.platform.machine import machine_fingerprint
    d["fingerprint"] = machine_fingerprint(1)
    assert Platform.from_dict(d, "y").check_machine() is None


def test_overhead_is_folded_into_layer_times():
    d = load_platform("ncs2").to_dict()
    d["overhead"] = {"scale": 1.5, "per_layer_ms": 0.01, "per_network_ms": 0.2}
    with_oh = Platform.from_dict(d, "x")
    plain = load_platform("ncs2")
    net = _net()
    from annette_torch import estimate
    a, b = estimate(net, plain), estimate(net, with_oh)
    executed = len(a.mapped.kept) - 1  # the input layer is not a node
    assert b.device_ms == pytest.approx(1.5 * a.device_ms + 0.01 * executed + 0.2)
    assert sum(r["time_ms"] for r in b.table()) == pytest.approx(b.device_ms)
    d["overhead"]["scale"] = 0
    with pytest.raises(PlatformError, match="overhead.scale"):
        Platform.from_dict(d, "x")
    d["overhead"] = {"scale": 1.0, "per_layer_ms": -5.0, "per_network_ms": 0.0}
    with pytest.raises(PlatformError, match="overhead.per_layer_ms"):
        Platform.from_dict(d, "x")
    d["overhead"] = {"scale": 1.0, "per_layer_ms": 0.0, "per_network_ms": 0.0, "depthwise_scale": -0.5}
    with pytest.raises(PlatformError, match="overhead.depthwise_scale"):
        Platform.from_dict(d, "x")


def test_depthwise_scale_applies_to_depthwise_layers_only():
    """The overhead's ``depthwise_scale`` replaces ``scale`` for depthwise convolutions: a = scale x other
    layers + depthwise_scale x depthwise layers, which is the end-to-end calibration's linear formula."""
    from annette_torch import estimate
    from annette_torch.fit.calibrate import overhead_entry
    from annette_torch.models.calibration import Calibration
    b = NetworkBuilder("dw")
    x = b.input("x", (1, 32, 28, 28))
    x = b.conv("expand", x, 64, 1)
    x = b.conv("dw", x, 64, 3, padding=1, groups=64)
    b.conv("project", x, 16, 1)
    net = b.build()
    plain = load_platform("ncs2")
    terms = estimate(net, plain).terms
    assert 0 < terms["depthwise"] < terms["layers"]
    cal = Calibration({"layers": 0.9, "depthwise": -0.3, "executed_layers": 0.001, "constant": 0.05})
    d = plain.to_dict()
    d["overhead"] = overhead_entry(cal, "test")
    assert d["overhead"]["depthwise_scale"] == pytest.approx(0.6)
    calibrated = estimate(net, Platform.from_dict(d, "x"))
    assert calibrated.device_ms == pytest.approx(cal.predict(terms))
    dw_row = next(r for r in calibrated.table() if r["type"] == "DepthwiseConv")
    plain_dw = next(r for r in estimate(net, plain).table() if r["type"] == "DepthwiseConv")
    assert dw_row["time_ms"] == pytest.approx(0.6 * plain_dw["time_ms"] + 0.001)
    d["overhead"] = overhead_entry(Calibration({"layers": 0.9, "executed_layers": 0.0, "constant": 0.0}), "t")
    assert "depthwise_scale" not in d["overhead"]
    assert estimate(net, Platform.from_dict(d, "x")).device_ms == pytest.approx(0.9 * terms["layers"])


def test_negative_per_layer_overhead_never_gives_negative_layer_times():
    """A profiler cost subtracted per layer: big layers lose it, tiny ones stop at 0, the input is untouched."""
    b = NetworkBuilder("n")
    x = b.input("x", (1, 8, 32, 32))
    for i, f in enumerate((8, 64, 256)):
        x = b.same(T.RELU, f"r{i}", b.conv(f"c{i}", x, f, 3, padding=1))
    net = b.build()
    from annette_torch import estimate
    e = estimate(net, load_platform("ncs2"))
    base, layer = e.mapped_time_ms, e.mapped.network.types != T.INPUT
    cut = float(np.median(base[layer]))
    d = load_platform("ncs2").to_dict()
    d["overhead"] = {"scale": 1.0, "per_layer_ms": -cut, "per_network_ms": 0.0}
    t = estimate(net, Platform.from_dict(d, "x")).mapped_time_ms
    assert (t >= 0).all() and (t[~layer] == base[~layer]).all()
    big, small = layer & (base > cut), layer & (base <= cut)
    assert big.any() and small.any()
    assert t[big] == pytest.approx(base[big] - cut)
    assert (t[small] == 0).all()


def test_shipped_machine_files_picked_by_this_cpu(tmp_path, monkeypatch, capsys):
    """A measured platform may ship one file per machine: the name loads the file of this machine's CPU."""
    import annette_torch.platform as P
    from annette_torch.cli.app import main
    from annette_torch.platform import machine, registry

    d = load_platform("ncs2").to_dict()
    d["name"], d["description"], d["fingerprint"] = "meas", "measured on CPU A", {"cpu": "CPU A", "cores": 2}
    (tmp_path / "meas.json").write_text(json.dumps(d))
    slug = P.machine_slug({"cpu": "Intel(R) Xeon(R) CPU B", "cores": 2})
    assert slug == "intel-r-xeon-r-cpu-b-2c"
    (tmp_path / "machines" / "meas").mkdir(parents=True)
    d["description"], d["fingerprint"] = "measured on CPU B", {"cpu": "Intel(R) Xeon(R) CPU B", "cores": 2}
    (tmp_path / "machines" / "meas" / f"{slug}.json").write_text(json.dumps(d))
    monkeypatch.setattr(registry, "platform_dir", lambda: tmp_path)
    machine.this_machine_slug.cache_clear()
    monkeypatch.setattr(machine, "this_machine_slug", machine.this_machine_slug.__wrapped__)  # the test switches machines

    here = {"cpu": "Intel(R) Xeon(R) CPU B", "cores": 2}
    monkeypatch.setattr(machine, "machine_fingerprint", lambda threads=None: dict(here, threads=threads))
    registry.refresh_platforms()
    assert P.shipped_machines("meas") == [slug] and P.shipped_machines("nope") == []
    assert registry.shipped_machine_file("meas") == str(tmp_path / "machines" / "meas" / f"{slug}.json")
    p = load_platform("meas")
    assert p.meta["fingerprint"]["cpu"] == "Intel(R) Xeon(R) CPU B" and p.check_machine() is None
    assert list_platforms() == {"meas": "measured on CPU B"}
    assert main(["platforms"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.endswith(str(tmp_path / "machines" / "meas" / f"{slug}.json")))
    assert row.split()[:4] == ["->", "meas", "shipped", "yes"]  # the file the name loads, measured on this machine

    here.update(cpu="CPU A")  # a machine with no file of its own gets the default, which warns when it differs
    registry.refresh_platforms()
    assert load_platform("meas").meta["fingerprint"]["cpu"] == "CPU A" and registry.shipped_machine_file("meas") is None
    here.update(cpu="CPU C", cores=4)
    p = load_platform("meas")
    assert p.meta["fingerprint"]["cpu"] == "CPU A" and "measured on another machine (CPU A" in p.check_machine()
    with pytest.raises(PlatformError, match="unknown platform 'tpu9'.*meas"):
        load_platform("tpu9")


HERE = {"cpu": "AMD EPYC 9B14", "vendor": "AuthenticAMD", "family": 25, "model": 17, "stepping": 1,
        "isa": ["avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni"], "physical_cores": 1, "cores": 2}


@pytest.mark.parametrize("change, warned", [
    ({}, None),
    ({"cpu": "AMD EPYC 7B13"}, "differs in cpu"),  # another model name
    ({"isa": ["avx2", "fma"]}, "differs in isa"),  # the same name without AVX-512
    ({"stepping": 0}, "differs in stepping"),
    ({"isa": None}, "does not record the instruction set"),  # a file of an older release: cannot be verified
])
def test_machine_identity_warns_on_every_difference(monkeypatch, change, warned):
    from annette_torch.platform import machine

    monkeypatch.setattr(machine, "machine_fingerprint", lambda threads=None: dict(HERE, threads=threads))
    fp = {k: v for k, v in {**HERE, **change}.items() if v is not None}
    msg = machine.mismatch("ort-cpu", fp)
    if warned is None:
        assert msg is None
    else:
        assert warned in msg and "annette calibrate --platform ort-cpu" in msg and "\n" not in msg


def test_a_machine_file_of_the_same_name_but_another_instruction_set_is_not_picked(tmp_path, monkeypatch):
    from annette_torch.platform import machine, registry

    d = load_platform("ncs2").to_dict()
    d["fingerprint"] = dict(HERE, isa=["avx2", "fma"])  # a near miss: same CPU name and cores
    (tmp_path / "meas.json").write_text(json.dumps({**d, "description": "default"}))
    (tmp_path / "machines" / "meas").mkdir(parents=True)
    near = tmp_path / "machines" / "meas" / f"{machine.machine_slug(HERE)}.json"
    near.write_text(json.dumps({**d, "description": "near miss"}))
    monkeypatch.setattr(registry, "platform_dir", lambda: tmp_path)
    monkeypatch.setattr(machine, "machine_fingerprint", lambda threads=None: dict(HERE, threads=threads))
    monkeypatch.setattr(machine, "this_machine_slug", lambda: machine.machine_slug(HERE))
    registry.refresh_platforms()
    assert registry.resolve_platform("meas") == str(tmp_path / "meas.json")
    d["fingerprint"] = HERE
    near.write_text(json.dumps({**d, "description": "exact"}))
    assert registry.resolve_platform("meas") == str(near)


def test_the_mismatch_warning_is_logged_once_per_process(caplog):
    import logging

    d = load_platform("ncs2").to_dict()
    d["fingerprint"] = {"cpu": "Imaginary CPU 9001", "cores": 4096}
    with caplog.at_level(logging.WARNING, logger="annette_torch"):
        first, second = Platform.from_dict(d, "a"), Platform.from_dict(d, "b")
        assert "Imaginary CPU 9001" in first.check_machine() and "Imaginary CPU 9001" in second.check_machine()
    assert caplog.text.count("Imaginary CPU 9001") == 1


def test_platform_names_ignore_case_and_suggest_close_names():
    assert load_platform("ZCU102") is load_platform("zcu102") and load_platform("Zcu102-DNNDK") is load_platform("zcu102-dnndk")
    with pytest.raises(PlatformError, match="unknown platform 'zcu12': did you mean 'zcu102'"):
        load_platform("zcu12")
    with pytest.raises(PlatformError, match="expected a platform name.*got tuple"):
        load_platform((1, 3, 224, 224))  # type: ignore[arg-type]


def test_a_name_is_resolved_again_when_the_user_folder_changes(tmp_path, monkeypatch):
    """Names are resolved once per process, but a file written, replaced or removed in the user's platform
    folder is seen at the next load."""
    import os
    import time

    monkeypatch.setenv("ANNETTE_HOME", str(tmp_path))
    with pytest.raises(PlatformError, match="unknown platform 'mine'"):
        load_platform("mine")
    folder = tmp_path / "platforms"
    folder.mkdir()
    d = load_platform("ncs2").to_dict()
    for i, desc in enumerate(("first", "second")):
        d["name"], d["description"] = "mine", desc
        tmp = folder / f".mine-{i}.tmp"
        tmp.write_text(json.dumps(d))
        os.replace(tmp, folder / "mine.json")  # as `annette adapt` writes: atomically
        st = folder.stat()
        os.utime(folder, ns=(st.st_atime_ns, st.st_mtime_ns + (i + 1) * 10**9))  # (coarse-mtime file systems)
        assert load_platform("MINE").description == desc
    (folder / "mine.json").unlink()
    os.utime(folder, ns=(time.time_ns(), time.time_ns() + 5 * 10**9))
    with pytest.raises(PlatformError, match="unknown platform 'mine'"):
        load_platform("mine")


def test_an_alias_stands_for_its_platform_unless_a_file_has_its_name(tmp_path, monkeypatch):
    """``zcu102`` is an alias of the current toolchain's platform: the name loads that file, is listed, and
    gives way to a file of its own name (the user's first)."""
    from annette_torch.platform import registry
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    d = load_platform("ncs2").to_dict()
    d["name"], d["description"] = "board-new", "the board under its current toolchain"
    (shipped / "board-new.json").write_text(json.dumps(d))
    monkeypatch.setattr(registry, "platform_dir", lambda: shipped)
    monkeypatch.setattr(registry, "ALIASES", {"board": "board-new", "gone": "missing"})
    monkeypatch.setenv("ANNETTE_HOME", str(tmp_path / "home"))
    registry.refresh_platforms()
    assert load_platform("board").name == "board-new" and load_platform("BOARD").name == "board-new"
    listed = list_platforms()
    assert listed["board"] == "= board-new: the board under its current toolchain" and "gone" not in listed
    d["name"], d["description"] = "board", "its own file"
    (shipped / "board.json").write_text(json.dumps(d))
    registry.refresh_platforms()
    assert load_platform("board").name == "board" and registry.alias_of("board") is None
