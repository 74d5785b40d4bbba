"""`annette adapt`: network-level terms refitted from a few end-to-end latencies, written where the name finds it."""

from __future__ import annotations

import json

import numpy as np
import pytest

import annette_torch as at
from annette_torch.cli import main
from annette_torch.fit.adapt import AdaptError, adapt, read_latencies
from annette_torch.fit.calibrate import without_overhead
from annette_torch.platform import platform_dir

#: the shipped default ort-cpu file, by path: the name would pick a per-machine file where this CPU's
#: fingerprint matches one, and these tests' outcomes depend on the file's terms
ORT_CPU = str(platform_dir() / "ort-cpu.json")


def _fake_machine(scale: float, per_layer_ms: float, per_run_ms: float):
    """A machine whose latency is the raw layer sum scaled, plus a cost per executed layer and per inference."""
    raw = without_overhead(at.load_platform(ORT_CPU))

    def measure(nets):
        terms = [at.estimate(n, raw).terms for n in nets]
        return np.array([scale * t["layers"] + per_layer_ms * t["executed_layers"] + per_run_ms for t in terms])
    return measure


def test_adapt_recovers_a_known_scale_and_per_layer_cost(tmp_path):
    res = adapt(ORT_CPU, networks=10, measure=_fake_machine(2.0, 0.004, 0.3), out=tmp_path / "mine.json")
    oh = json.loads((tmp_path / "mine.json").read_text())["overhead"]
    assert oh["scale"] == pytest.approx(2.0, rel=1e-3)
    assert oh["per_layer_ms"] == pytest.approx(0.004, rel=1e-2)
    assert oh["per_network_ms"] == pytest.approx(0.3, rel=1e-2)
    assert res.mape_after < 1e-3 < res.mape_before and res.loo_mape < 1e-3
    assert res.platform.meta["fingerprint"]["cpu"] == at.platform.machine_fingerprint()["cpu"]
    assert res.platform.check_machine() is None  # adapted here: no warning here
    assert not {n for n in res.names} & {"nb101-000"}  # calibration networks, never the validation cells
    assert all(n.startswith("calib-") for n in res.names)


@pytest.mark.parametrize("n", [1, 3, 5])
def test_a_uniformly_slower_machine_scales_the_shipped_terms(n):
    shipped = at.load_platform(ORT_CPU)
    # every layer 1.7x the shipped file's time, its kind scales (the tokens layers') included
    res = adapt(ORT_CPU, networks=n, save=False,
                measure=lambda nets: np.array([1.7 * at.estimate(x, shipped).latency_ms for x in nets]))
    assert res.terms == ("scale",) and len(res.names) == n
    np.testing.assert_allclose(res.after_ms, res.measured_ms, rtol=5e-3)
    old, new = shipped.meta["overhead"], res.platform.meta["overhead"]
    for k in ("scale", "per_layer_ms", "per_network_ms"):
        assert new[k] == pytest.approx(1.7 * old[k], rel=5e-3)  # (a layer clamped at 0: not exactly linear)


def test_a_ramped_per_layer_cost_is_scaled_and_kept(tmp_path):
    """A file whose per-layer cost is ramped (a layer below `RAMP_MS` pays its share: OpenVINO's calibration)
    hands adapt the ramped term: a uniformly slower machine scales it, and the adapted file keeps the ramp."""
    from annette_torch.models.calibration import RAMP_MS
    d = at.load_platform(ORT_CPU).to_dict()
    d["overhead"] = {"scale": 1.1, "per_layer_ms": -0.01, "per_network_ms": 0.05, "per_layer_ramp_ms": RAMP_MS}
    base = tmp_path / "ramped.json"
    base.write_text(json.dumps(d))
    raw = without_overhead(at.load_platform(base))

    def measure(nets):
        return np.array([1.6 * (1.1 * t["layers"] - 0.01 * t["ramped_layers"] + 0.05)
                         for t in (at.estimate(n, raw).terms for n in nets)])
    res = adapt(str(base), networks=3, save=False, measure=measure)
    assert res.terms == ("scale",)
    np.testing.assert_allclose(res.after_ms, res.measured_ms, rtol=1e-3)
    oh = res.platform.meta["overhead"]
    assert oh["per_layer_ramp_ms"] == RAMP_MS and oh["per_layer_ms"] == pytest.approx(1.6 * -0.01, rel=1e-6)


@pytest.mark.parametrize("n, terms", [(3, ("layers",)), (4, ("layers", "executed_layers")),
                                      (5, ("layers", "executed_layers", "constant"))])
def test_terms_are_fitted_afresh_where_leave_one_out_prefers_them(n, terms):
    """A machine whose costs are not the shipped file's times one factor: as many terms as the networks
    support, because they predict left-out networks better than the scaled shipped terms."""
    res = adapt(ORT_CPU, networks=n, measure=_fake_machine(1.5, 0.0, 0.0), save=False)
    assert res.terms == terms and len(res.names) == n
    np.testing.assert_allclose(res.after_ms, res.measured_ms, rtol=1e-3)
    assert res.loo_mape < 1e-3


def test_adapt_writes_into_the_user_folder_which_the_name_then_loads(tmp_path, monkeypatch):
    monkeypatch.setenv("ANNETTE_HOME", str(tmp_path))
    shipped = at.load_platform("ort-cpu").source  # the shipped file this machine resolves to (machines/ or default)
    res = adapt("ort-cpu", networks=3, measure=_fake_machine(1.7, 0.0, 0.1))  # by name: the test is about names
    assert res.path == str(tmp_path / "platforms" / "ort-cpu.json")
    p = at.load_platform("ort-cpu")
    assert p.source == res.path and p.meta["adapted"]["from"] == shipped


def _latencies_csv(tmp_path, rows):
    path = tmp_path / "lat.csv"
    path.write_text("model,input_shape,latency_ms\n" + "".join(f"{r}\n" for r in rows))
    return path


def test_a_board_is_adapted_from_the_users_latencies(tmp_path, monkeypatch):
    monkeypatch.setenv("ANNETTE_HOME", str(tmp_path))
    models = ["tiny_cnn", "tiny_resnet", "mobilenet_v2", "resnet18"]
    shapes = {"tiny_cnn": "1,3,32,32", "tiny_resnet": "1,3,32,32", "mobilenet_v2": "", "resnet18": ""}
    truth = {m: 1.3 * at.estimate(read_latencies(_latencies_csv(tmp_path, [f"{m},\"{shapes[m]}\",1"] * 3))[0][1],
                                  "ncs2").device_ms + 2.0 for m in models}
    csv_path = _latencies_csv(tmp_path, [f"{m},\"{shapes[m]}\",{truth[m]}" for m in models])
    code = main(["adapt", "-p", "ncs2", "--latencies", str(csv_path)])
    assert code == 0
    p = at.load_platform("ncs2")
    assert p.source == str(tmp_path / "platforms" / "ncs2.json") and p.end_to_end is not None
    net = read_latencies(csv_path)[2][1]
    e = at.estimate(net, "ncs2")
    assert e.latency_ms == pytest.approx(truth["mobilenet_v2"], rel=1e-6) and e.device_ms < e.latency_ms


@pytest.mark.parametrize("rows, needle", [
    (None, "no such latencies file"),
    (["tiny_cnn,\"1,3,32,32\",1.0", "tiny_cnn,\"1,3,32,32\",2.0"], "at least 3"),
    (["no_such_model,,1.0"] * 3, "unknown model"),
    (["tiny_cnn,\"1,3,x\",1.0"] * 3, "is not like 1,3,224,224"),
    (["tiny_cnn,\"1,0,32,32\",1.0"] * 3, "positive sizes"),
    (["tiny_cnn,\"1,3,32,32\",0"] * 3, "positive number"),
    (["tiny_cnn,\"1,3,32,32\",-2"] * 3, "positive number"),
    (["tiny_cnn,\"1,3,32,32\",fast"] * 3, "not a number"),
    (["tiny_cnn,\"1,3,32,32\",nan"] * 3, "positive number"),
])
def test_every_bad_latencies_csv_is_one_error_line(tmp_path, capsys, rows, needle):
    path = tmp_path / "missing.csv" if rows is None else _latencies_csv(tmp_path, rows)
    assert main(["adapt", "-p", "zcu102-dnndk", "--latencies", str(path)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err and err.startswith("annette: error:")


def test_a_csv_without_the_columns_is_one_error_line(tmp_path, capsys):
    path = tmp_path / "lat.csv"
    path.write_text("net,ms\nresnet18,3\n")
    assert main(["adapt", "-p", "zcu102-dnndk", "--latencies", str(path)]) == 1
    assert "columns input_shape, latency_ms, model missing" in capsys.readouterr().err


def test_a_board_without_latencies_is_refused(capsys):
    assert main(["adapt", "-p", "zcu102-dnndk"]) == 1
    err = capsys.readouterr().err
    assert "cannot be measured on this machine" in err and "--latencies" in err
    with pytest.raises(AdaptError):
        adapt("ncs2", networks=3)


def test_unstable_networks_are_measured_again_until_their_two_fastest_rounds_agree():
    """Another process only adds time: a network is re-measured (interleaved, within the budget) until its
    two fastest rounds agree within 3%, and the spread left is reported."""
    from annette_torch.fit.adapt import measure_until_stable

    true = {"a": 1.0, "b": 2.0, "c": 3.0}
    # a: quiet from the start; b: two slow rounds, then quiet; c: slow every time but round 6
    noise = {"a": [0.0] * 8, "b": [0.5, 0.3, 0.0, 0.01, 0.0] + [0.0] * 3, "c": [0.4, 0.5, 0.3, 0.6, 0.2, 0.0, 0.4, 0.3]}
    calls: dict[str, int] = {k: 0 for k in true}

    def once(name):
        k = calls[name]
        calls[name] += 1
        return true[name] * (1 + noise[name][k])

    best, spread = measure_until_stable(["a", "b", "c"], once, rounds=3, max_rounds=8, budget_s=1e9)
    assert calls == {"a": 3, "b": 4, "c": 8}  # a stable after 3 rounds, b after its 4th, c never
    np.testing.assert_allclose(best, [1.0, 2.0, 3.0])
    np.testing.assert_allclose(spread, [0.0, 0.01, 0.2])

    # no further rounds once the measuring budget is spent
    calls = {k: 0 for k in true}
    clock = iter(range(100))
    best, spread = measure_until_stable(["a", "b", "c"], once, rounds=3, budget_s=0.5, clock=lambda: next(clock))
    assert calls == {"a": 3, "b": 3, "c": 3} and spread[1] == pytest.approx(0.3)


def test_each_network_is_exported_once_for_all_its_rounds(monkeypatch):
    """Measuring here on ONNX Runtime: every round measures the same exported model, exported once per network
    (a torch export took 8 s a round), and each network gets its fastest round and spread."""
    import annette_torch.fit.adapt as A
    import annette_torch.fit.calibration_modern as CM
    from annette_torch.search.spaces import nb201

    exported = []
    real = CM.measurable
    monkeypatch.setattr(CM, "measurable", lambda net: exported.append(net.name) or real(net))
    nets = [nb201.build_network("|nor_conv_1x1~0|+|skip_connect~0|none~1|+|none~0|none~1|skip_connect~2|"),
            nb201.build_network("|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|none~1|"
                                "nor_conv_3x3~2|")]
    nets[0].name, nets[1].name = "small", "large"
    rounds = []
    real_once = A.measure_until_stable
    monkeypatch.setattr(A, "measure_until_stable", lambda items, once, **kw: real_once(
        items, lambda it: rounds.append(it) or once(it), **kw))
    best, spread = A._measure_here("ort-cpu", False)(nets)
    assert exported == ["small", "large"] and len(rounds) >= A.ROUNDS * 2
    assert np.all(best > 0) and np.all(spread >= 0) and best[1] > best[0]


def test_a_noisy_measurement_is_reported(tmp_path, monkeypatch, capsys):
    """The CLI says how far each network's two fastest rounds lay apart, and warns when the machine's speed
    moved while measuring."""
    import annette_torch.fit.adapt as A

    fake = _fake_machine(1.5, 0.0, 0.1)
    monkeypatch.setattr(A, "_measure_here", lambda runtime, progress: lambda nets: (fake(nets),
                                                                                    np.full(len(nets), 0.2)))
    assert main(["adapt", "-p", "ort-cpu", "-n", "3", "--no-sweep", "--out", str(tmp_path / "a.json")]) == 0
    out, err = capsys.readouterr()
    assert "two fastest rounds differ by 20.0% at the median (noisy" in out
    assert "annette: warning: adapt: this machine's speed moved while measuring" in err
    assert json.loads((tmp_path / "a.json").read_text())["adapted"]["round_spread"] == [0.2] * 3


def _two_families():
    """Terms of two families of five networks: small ones with many cheap layers (NAS cells) and larger ones."""
    rng = np.random.default_rng(11)  # (a fixed draw)

    def fam(lo: float, hi: float) -> list[dict[str, float]]:
        layers = rng.uniform(lo, hi, 5)
        return [{"layers": float(v), "executed_layers": float(10 * v * rng.uniform(0.8, 1.2)), "constant": 1.0,
                 "depthwise": 0.0} for v in layers]
    return fam(0.5, 5) + fam(2, 20), ["plain"] * 5 + ["mobile"] * 5


def test_out_of_family_selection_rejects_terms_that_fit_each_family_its_own_way():
    """A fake runner with a per-family bias (one family pays 0.02 ms per executed layer, the other 0.5 ms per
    inference): fresh terms fit both families at once, so leave-one-out approves them; fitted on one family,
    they mispredict the other, so leave-one-family-out keeps the base file's terms times one factor, and says
    what that choice can expect."""
    from annette_torch.fit.adapt import CHECKS, _fit
    terms, groups = _two_families()
    prior = {"layers": 1.0, "executed_layers": 0.002, "constant": 0.05}
    y = np.array([1.3 * (t["layers"] + 0.002 * t["executed_layers"] + 0.05)
                  + (0.02 * t["executed_layers"] if g == "plain" else 0.5) for t, g in zip(terms, groups)])
    use, names = ("layers", "executed_layers", "constant"), [f"n{i}" for i in range(10)]
    _, loo, fitted, check, errors, net_loo = _fit(terms, y, use, names, True, prior)
    assert fitted == use and check == CHECKS[0] and net_loo() is errors
    _, lofo, fitted, check, errors, net_loo = _fit(terms, y, use, names, True, prior, groups)
    assert fitted == ("scale",) and check == CHECKS[1] and lofo > loo
    assert errors is not None and float(np.mean(errors)) == pytest.approx(lofo)
    # the chosen form (the scaled file) fitted on all networks but one: its own leave-one-out errors
    scaled = _fit(terms, y, use, names, True, prior, fresh=False)
    assert scaled[3] == CHECKS[0] and np.allclose(net_loo(), scaled[4])


def test_adapt_says_what_each_family_can_expect(tmp_path, monkeypatch, capsys):
    """Measured here on networks of several families, adapt reports each family's error as the networks of the
    other families predict it (their mean is the leave-one-family-out error that chose the terms), pooled by kind
    for a family unlike them; what other networks can expect is each kind's leave-one-out error; the CLI prints
    both."""
    import annette_torch.fit.adapt as A
    from annette_torch.fit.adapt import CHECKS, family
    from annette_torch.fit.calibrate import _validation_hashes, adaptation_networks, modelled_types

    exact = _fake_machine(1.5, 0.002, 0.1)
    bias = {"plain": 1.0, "mobile": 1.08, "grouped": 0.95, "attention": 1.1}  # (a family's networks alike)

    def fake(nets):
        return exact(nets) * np.array([bias[family(n)] for n in nets])
    res = adapt(ORT_CPU, networks=14, measure=fake, save=False)
    fams = [family(n) for n in adaptation_networks(14, exclude_hashes=_validation_hashes(),
                                                    cover=modelled_types(at.load_platform(ORT_CPU)))]
    assert res.check == CHECKS[1] and res.family_mape is not None
    assert list(res.family_mape) == list(dict.fromkeys(fams)) and len(res.family_mape) >= 2
    counts = {g: fams.count(g) for g in res.family_mape}
    assert sum(counts[g] * v for g, v in res.family_mape.items()) / len(fams) == pytest.approx(res.loo_mape)
    # pooled into convolutional and attention networks, each the mean over its own networks
    conv = [g for g in res.family_mape if g in A.CONVOLUTIONAL]
    unlike = res.unlike()
    assert unlike["convolutional"] == pytest.approx(
        sum(counts[g] * res.family_mape[g] for g in conv) / sum(counts[g] for g in conv))
    assert unlike["attention"] == pytest.approx(res.family_mape["attention"])  # (14 networks hold attention)
    loo = res.network_loo
    assert loo is not None and len(loo) == len(fams) and res.families == tuple(fams)
    is_conv = np.isin(fams, A.CONVOLUTIONAL)
    assert res.expected() == pytest.approx({"convolutional": float(np.mean(loo[is_conv])),
                                            "attention": float(np.mean(loo[~is_conv]))})
    # a network of a family the set holds gets a fit that saw its family: less off than one of an unseen family
    assert res.expected()["convolutional"] < unlike["convolutional"]
    monkeypatch.setattr(A, "_measure_here", lambda runtime, progress: lambda nets: (fake(nets),
                                                                                    np.full(len(nets), 0.01)))
    monkeypatch.setattr(A, "_sweeper", lambda runtime, progress: lambda raw, nets: {})  # (no micro-kernels)
    assert main(["adapt", "-p", "ort-cpu", "--out", str(tmp_path / "a.json")]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("by family, each predicted from the others: "))
    assert all(f"{g} " in line for g in res.family_mape)
    assert "expected error on other networks: convolutional " in out and ", attention " in out
    assert "(leave-one-out); on a family unlike these: convolutional " in out


@pytest.fixture(scope="module")
def validation_signatures():
    """The weighted-layer signatures of the accuracy benchmark's validation networks (built once per module)."""
    from annette_torch.validate import validation_networks
    from annette_torch.validate.networks import WEIGHTED_TYPES, layer_signature

    return {layer_signature(v.network, WEIGHTED_TYPES)
            for v in validation_networks(("zoo", "reference", "modern"), n_nb101=0, check_export=False)}


@pytest.mark.parametrize("name", ["ort-cpu.json", "openvino-cpu.json",
                                  "machines/ort-cpu/intel-r-xeon-r-processor-2c.json",
                                  "machines/openvino-cpu/intel-r-xeon-r-processor-2c.json"])
def test_the_adaptation_networks_exercise_every_type_the_file_models_and_no_validation_network(
        name, validation_signatures):
    """For each shipped CPU file, the 14 networks adapt measures by default span the families and hold every layer
    type the file has a model of (but those only the mapping produces), and none has the weighted layers of a
    validation network (nor is one of the accuracy benchmark's NAS-Bench-101 cells)."""
    from annette_torch.fit.adapt import DEFAULT_NETWORKS, family
    from annette_torch.fit.calibrate import _validation_hashes, adaptation_networks, modelled_types
    from annette_torch.validate.networks import WEIGHTED_TYPES, layer_signature

    plat = at.load_platform(platform_dir() / name)
    nets = adaptation_networks(DEFAULT_NETWORKS, exclude_hashes=_validation_hashes(), cover=modelled_types(plat))
    assert DEFAULT_NETWORKS == len(nets) == 14
    assert modelled_types(plat) <= {t for n in nets for t in n.type_labels()}
    assert {"ConvTranspose", "LeakyRelu", "Softplus", "AvgPool", "Resize", "HardSigmoid"} <= modelled_types(plat)
    assert {family(n) for n in nets} == {"plain", "mobile", "grouped", "attention"}
    assert not {layer_signature(n, WEIGHTED_TYPES) for n in nets} & validation_signatures
    cells = {n.name.removeprefix("calib-nb101-") for n in nets if n.name.startswith("calib-nb101-")}
    assert cells and not cells & {h[:8] for h in _validation_hashes()}


def test_the_adaptation_networks_end_with_the_largest_cells_and_classic_networks():
    """From 3 networks on, a third (at most `SPAN`) of what adapt measures are large networks: the full calibration
    set's NB101 cells of most operations and `LARGE_CLASSIC`, in turn, none twice; the rest are the calibration
    networks of that smaller count, and below 3 nothing changes."""
    import annette_torch.fit.calibrate as C
    from annette_torch.fit.calibrate import _validation_hashes, adaptation_networks, calibration_networks

    ex = _validation_hashes()
    full = calibration_networks(C.PLANS["full"].networks, exclude_hashes=ex)
    cells = sorted((n for n in full if n.name.startswith("calib-nb101-")), key=lambda n: -float(np.sum(n.ops)))
    for n in (1, 2, 3, 10, 14, 20):
        k = C.large_count(n)
        assert k == min(C.SPAN, n // 3)
        nets = adaptation_networks(n, exclude_hashes=ex)
        names = [x.name for x in nets]
        assert len(nets) == n and len(set(names)) == n
        assert names[: n - k] == [x.name for x in calibration_networks(n - k, exclude_hashes=ex)]
        large = nets[n - k:]
        left = [[c.name for c in cells if c.name not in names[: n - k]], ["calib-classic-" + c for c in C.LARGE_CLASSIC
                                                                  if "calib-classic-" + c not in names[: n - k]]]
        turns = [x for pair in zip(*left) for x in pair]  # (a cell, a classic network, ...; then what is left)
        turns += left[0][len(left[1]):] + left[1][len(left[0]):]
        assert [x.name for x in large] == turns[:k]
        if k:  # (the large ones: more operations than any network of the rest)
            assert min(float(np.sum(x.ops)) for x in large) > np.median([float(np.sum(x.ops)) for x in nets[: n - k]])


def test_attention_layers_get_a_factor_of_their_own_where_left_out_families_say_so():
    """On a machine where convolutional networks run 1.3x the file's terms and the attention family's tokens
    layers half as fast again, one factor is set by both and right for neither; with a factor of its own for the
    tokens group (`_fit`'s ``group``), the convolutional networks left out get the level of the others, and the
    adapted file carries it as the group's kind scales. Without time in the group nothing changes."""
    from annette_torch.fit.adapt import CHECKS, _fit
    from annette_torch.fit.calibrate import overhead_entry
    from annette_torch.models.calibration import TYPE_GROUPS

    rng = np.random.default_rng(3)
    terms, groups = [], []
    for fam, n in (("plain", 4), ("mobile", 4), ("attention", 4)):
        for _ in range(n):
            layers = float(rng.uniform(2, 40))
            tokens = 0.3 * layers if fam == "attention" else 0.0
            terms.append({"layers": layers, "executed_layers": 10 * layers, "constant": 1.0, "tokens": tokens})
            groups.append(fam)
    prior = {"layers": 1.0, "executed_layers": 0.001, "constant": 0.05}
    y = np.array([1.3 * (t["layers"] + 0.001 * t["executed_layers"] + 0.05) + 1.3 * 1.5 * t["tokens"]
                  for t in terms])
    names = [f"n{i}" for i in range(len(y))]
    one, err_one, fitted, check, *_ = _fit(terms, y, ("layers",), names, True, prior, groups, fresh=False)
    assert fitted == ("scale",) and check == CHECKS[1]
    cal, err, fitted, check, errors, _ = _fit(terms, y, ("layers",), names, True, prior, groups, fresh=False,
                                              group="tokens")
    assert fitted == ("scale", "tokens") and check == CHECKS[1] and err < err_one
    conv = np.array(groups) != "attention"  # (the attention family left out has no group time to fit: one factor)
    assert errors is not None and np.all(errors[conv] < 1e-3) and np.all(_fit(
        terms, y, ("layers",), names, True, prior, groups, fresh=False)[4][conv] > 0.01)
    assert cal.coef["layers"] == pytest.approx(1.3, rel=1e-3)
    ks = overhead_entry(cal, "t")["kind_scales"]
    assert set(ks) == set(TYPE_GROUPS["tokens"]) and ks["MatMul"] == pytest.approx(2.5, rel=1e-2)
    plain = [t | {"tokens": 0.0} for t in terms]
    assert _fit(plain, y, ("layers",), names, True, prior, groups, fresh=False, group="tokens")[2] == ("scale",)


def test_families_come_from_the_layer_types():
    from annette_torch.fit.adapt import family
    from annette_torch import zoo
    assert family(at.trace(zoo.get("resnet18"), (1, 3, 64, 64))) == "plain"
    assert family(at.trace(zoo.get("mobilenet_v2"), (1, 3, 64, 64))) == "mobile"
    assert family(at.trace(zoo.get("vit_ti16"), (1, 3, 224, 224))) == "attention"


def test_adapt_scales_a_type_groups_own_scale_with_the_rest():
    """A file whose calibration gave a group of attention-era layers their own scale (`overhead.kind_scales` of
    every type of one of `TYPE_GROUPS` alike) hands adapt that term as part of its prior; other kind scales
    do not."""
    from annette_torch.fit.adapt import _prior
    from annette_torch.models.calibration import TYPE_GROUPS
    from annette_torch.platform import Platform
    d = at.load_platform("ort-cpu").to_dict()
    for group, types in TYPE_GROUPS.items():
        d["overhead"] = {"scale": 1.2, "per_layer_ms": -0.003, "per_network_ms": 0.0,
                         "kind_scales": {label: 0.5 for label in types}}
        prior = _prior(Platform.from_dict(d, "t"), cpu=True)
        assert prior[group] == pytest.approx(1.2 * -0.5) and prior["layers"] == 1.2
        assert not set(TYPE_GROUPS) - {group} & set(prior)
    d["overhead"]["kind_scales"] = {"AvgPool": 1.5}
    assert not set(TYPE_GROUPS) & set(_prior(Platform.from_dict(d, "t"), cpu=True))


def _file_kind_scales() -> dict[str, float]:
    """The shipped ort-cpu file's per-kind scales (its tokens layers')."""
    return dict(at.load_platform(ORT_CPU).meta["overhead"].get("kind_scales") or {})


def _kind_machine(speed: dict[str, float]):
    """A machine on which each kind of layer runs ``speed[kind]`` times its raw model (others 1.3x) in a network
    as the file's kind scales say (a MatMul of a network runs their factor times its micro-kernel), plus a
    cost per executed layer; and a sweep that measures the kinds' speeds, as micro-kernels would."""
    from annette_torch.fit.adapt import _with_factors
    raw = without_overhead(at.load_platform(ORT_CPU))
    speed = {**{k: 1.3 for k in ("Conv", "FullyConnected", "DepthwiseConv", "MatMul")}, **speed}
    ks = _file_kind_scales()
    real = _with_factors(raw, {k: speed.get(k, 1.0) * ks.get(k, 1.0) for k in {*speed, *ks}})

    def measure(nets):
        terms = [at.estimate(n, real).terms for n in nets]
        return np.array([t["layers"] + 0.002 * t["executed_layers"] for t in terms])
    return measure


def test_micro_kernel_scales_are_kept_where_they_predict_left_out_networks_better(tmp_path):
    """A machine whose convolutions run 1.7x the file's models and whose products of activations run 0.9x: one
    factor cannot serve CNNs and transformers, the swept kinds' factors can; the adapted file carries them as
    per-kind scales and reproduces the latencies. A sweep whose factors are wrong loses to the file's terms."""
    from annette_torch.fit.adapt import CHECKS
    speed = {"Conv": 1.7, "MatMul": 0.9, "FullyConnected": 1.1}
    measure = _kind_machine(speed)
    plain = adapt(ORT_CPU, networks=14, measure=measure, save=False, sweep=False)
    swept: list[int] = []  # (the sweep is planned on the calibration networks, not the large ones)
    res = adapt(ORT_CPU, networks=14, measure=measure, out=tmp_path / "k.json",
                sweep=lambda raw, ests: swept.append(len(ests)) or dict(speed))
    assert swept == [10]
    assert res.terms[0] == "micro-kernel scales" and res.kind_scales == speed
    assert res.check == CHECKS[1] and res.loo_mape < 0.55 * plain.loo_mape
    assert "per-kind scales from micro-kernels measured here (Conv x1.70" in res.fitted()
    ks = json.loads((tmp_path / "k.json").read_text())["overhead"]["kind_scales"]
    file_ks = _file_kind_scales()  # (the sweep's factors multiply the file's own)
    assert {k: ks[k] for k in speed} == pytest.approx({k: f * file_ks.get(k, 1.0) for k, f in speed.items()})
    assert res.mape_after < 0.6 * plain.mape_after and res.terms == ("micro-kernel scales", "scale")
    wrong = adapt(ORT_CPU, networks=14, measure=measure, save=False,
                  sweep=lambda raw, nets: {"Conv": 0.6, "MatMul": 3.0})
    assert wrong.terms[0] != "micro-kernel scales" and wrong.kind_scales is None


def test_the_sweep_is_kept_unless_left_out_networks_say_it_is_worse_beyond_their_noise():
    """The swept factors are measured, not fitted on the networks: they stay where the out-of-sample errors with
    them are no worse than without by more than the standard error of the paired difference, and are dropped
    where they are clearly worse; without errors (below 3 networks) nothing is swept."""
    from annette_torch.fit.adapt import _not_worse
    unswept = np.array([0.05, 0.04, 0.06, 0.03, 0.05, 0.07])
    noisy = unswept + np.array([0.02, -0.01, 0.01, -0.005, 0.0, 0.004])  # worse by 0.3 points on the mean
    assert noisy.mean() > unswept.mean() and _not_worse(noisy, unswept)
    assert _not_worse(unswept - 0.01, unswept)
    assert not _not_worse(unswept + np.array([0.02, 0.03, 0.02, 0.025, 0.03, 0.02]), unswept)
    assert not _not_worse(None, None) and not _not_worse(None, unswept)


def test_the_sweep_plan_follows_the_networks_time():
    """The kinds swept are those carrying the networks' time (largest first); a fully connected layer's suites
    by the time of classifier rows (one per image) and of token rows; a classifier layer that runs its ReLU inside
    (AlexNet's first two) a kind of its own."""
    from annette_torch import zoo
    from annette_torch.fit.kind_sweep import (KIND_SUITES, MAX_KINDS, VECTOR_ACT_KIND, VECTOR_ACT_SUITE, VECTOR_SUITE,
                                              kind_type, sweep_plan)
    raw = without_overhead(at.load_platform(ORT_CPU))
    def plan(*names):
        return sweep_plan([at.estimate(at.trace(zoo.get(n), (1, 3, 224, 224)), raw) for n in names])
    cnn = plan("alexnet")
    assert VECTOR_ACT_KIND in list(cnn)[:2] and any(kind_type(k) == ("Conv", 3) for k in list(cnn)[:2])
    assert {k: t.weight for k, t in cnn["FullyConnected"].items()} == {VECTOR_SUITE: 1.0}
    assert len(cnn["FullyConnected"][VECTOR_SUITE].times) == 1
    assert len(cnn[VECTOR_ACT_KIND][VECTOR_ACT_SUITE].times) == 2
    # a convolution per kernel size: AlexNet's 5x5 and three 3x3 layers (its 11x11 one has no configuration in
    # the conv suite: the type's factor covers it, and it takes no slot)
    convs = {k: len(t["conv"].times) for k, t in cnn.items() if kind_type(k)[0] == "Conv"}
    assert convs == {"Conv 5x5": 1, "Conv 3x3": 3}
    vit = plan("vit_ti16")
    assert set(vit["FullyConnected"]) == {KIND_SUITES["FullyConnected"]} and "MatMul" in vit
    both = plan("alexnet", "vit_ti16")
    assert set(both["FullyConnected"]) == {VECTOR_SUITE, KIND_SUITES["FullyConnected"]}
    assert sum(t.weight for t in both["FullyConnected"].values()) == pytest.approx(1.0)
    assert all(len(p) <= MAX_KINDS and {kind_type(k)[0] for k in p} <= set(KIND_SUITES) for p in (cnn, vit, both))


def test_a_convolution_is_swept_per_kernel_size_and_its_type_factor_is_their_time_weighted_mean():
    """A real sweep (ONNX Runtime) of two depthwise kernel kinds: each measured on configurations of its own
    kernel, and the type's factor (for its other kernels) lies between theirs, weighted by the networks' time."""
    pytest.importorskip("onnxruntime")
    from annette_torch.bench.suites import SUITES
    from annette_torch.fit.kind_sweep import (FUSES, NEVER, REORDER_KEY, Target, _select, kind_type, pick_configs,
                                              rule_checks, sweep_factors)
    assert kind_type("DepthwiseConv 7x7") == ("DepthwiseConv", 7) and kind_type("FullyConnected vector")[1] is None
    assert kind_type("Add") == ("Add", None)
    none = Target(1.0, np.zeros((0, 2)), np.zeros(0))
    picked = pick_configs(SUITES["dwconv"], none, 6, None, select=_select("DepthwiseConv 7x7"))
    assert len(picked) == 6 and all(c["k"] == 7 for c in picked)
    raw = without_overhead(at.load_platform("ort-cpu"))
    small, large = Target(1.0, np.zeros((0, 2)), np.array([0.3])), Target(1.0, np.zeros((0, 2)), np.array([0.1]))
    f = sweep_factors(raw, "ort-cpu", {"DepthwiseConv 3x3": {"dwconv": small}, "DepthwiseConv 7x7": {"dwconv": large}},
                      configs=6, rounds=1, fusions=True)
    # (and the file's conditional fusions, checked on micro-kernels: the input-channel alignment they fused from)
    checked = {k: v for k, v in f.items() if k.startswith(FUSES)}
    assert set(checked) == set(rule_checks(raw)) and all(int(v) in range(NEVER + 1) for v in checked.values())
    f = {k: v for k, v in f.items() if k not in checked}
    assert set(f) == {"DepthwiseConv 3x3", "DepthwiseConv 7x7", "DepthwiseConv", REORDER_KEY}
    assert f["DepthwiseConv"] == pytest.approx(0.75 * f["DepthwiseConv 3x3"] + 0.25 * f["DepthwiseConv 7x7"])
    # (the reorders ONNX Runtime inserts around its blocked depthwise kernels, over what the mapping costs price)
    assert all(0.1 < v < 10.0 for v in f.values())


def test_the_swept_refit_scales_the_per_layer_cost_with_the_layers():
    """On top of the micro-kernel factors, the base file's per-layer cost is taken times the factors' mean (the
    networks' layer time with them over without): a CPU whose layers run 2.5x slower pays 2.5x per layer too."""
    from annette_torch.fit.adapt import _swept_prior
    prior = {"layers": 1.0, "executed_layers": -0.003, "constant": 0.01}
    terms = [{"layers": 2.0, "executed_layers": 50}, {"layers": 6.0, "executed_layers": 90}]
    swept = [{"layers": 5.0, "executed_layers": 50}, {"layers": 15.0, "executed_layers": 90}]
    out = _swept_prior(prior, terms, swept, "executed_layers")
    assert out == pytest.approx({"layers": 1.0, "executed_layers": -0.0075, "constant": 0.01})
    assert prior["executed_layers"] == -0.003 and _swept_prior(prior, terms, swept, "ramped_layers") == prior


def test_classifiers_streamed_from_memory_are_left_to_the_cold_weights_factor():
    """With a cache model (``cold``), a classifier with `MIN_COLD_WEIGHT_MB` of weights or more does not weigh the
    classifier suite of the fully connected factor (the ``cold_weights`` micro-kernels rescale its bandwidth): a
    128 MB head drops out of it, AlexNet's 16 MB last layer and ViT's head stay. AlexNet's two 4096-wide layers,
    which run their ReLU inside, are the activated kind's: on its own suite, or with a cache model on the
    ``cold_weights`` micro-kernels."""
    from annette_torch import zoo
    from annette_torch.fit.kind_sweep import COLD_SUITE, VECTOR_ACT_KIND, VECTOR_ACT_SUITE, VECTOR_SUITE, sweep_plan
    from annette_torch.ir import NetworkBuilder
    b = NetworkBuilder("wide-head")
    b.linear("head", b.global_pool("pool", b.input("x", (1, 16384, 2, 2))), 2048)
    raw = without_overhead(at.load_platform(ORT_CPU))
    ests = [at.estimate(at.trace(zoo.get(n), (1, 3, 224, 224)), raw) for n in ("alexnet", "vit_ti16")]
    ests.append(at.estimate(b.build(), raw))
    warm, cold = sweep_plan(ests), sweep_plan(ests, cold=True)
    assert len(warm["FullyConnected"][VECTOR_SUITE].times) == 3 and len(cold["FullyConnected"][VECTOR_SUITE].times) == 2
    assert cold["FullyConnected"][VECTOR_SUITE].weight < warm["FullyConnected"][VECTOR_SUITE].weight
    assert {k: len(t.times) for k, t in warm[VECTOR_ACT_KIND].items()} == {VECTOR_ACT_SUITE: 2}
    assert {k: len(t.times) for k, t in cold[VECTOR_ACT_KIND].items()} == {COLD_SUITE: 2}


def test_the_sweep_plans_every_activation_of_the_file_with_its_own_micro_kernels():
    """Every activation the file models is swept with the act suite's configurations of that activation alone,
    large enough to time: one the networks do not hold (nothing else calibrates it), and one they hold, like
    their layers of it (after the sweep the network-level factor is ~1: an activation left out of it would keep
    the base file's speed); GELU keeps its token suite."""
    from annette_torch import zoo
    from annette_torch.bench.suites import SUITES
    from annette_torch.fit.kind_sweep import (ACT_CONFIGS, ACT_KINDS, ACT_SUITE, MIN_ACT_ELEMENTS, _select,
                                              activation_kinds, pick_configs, sweep_plan)
    raw = without_overhead(at.load_platform(ORT_CPU))
    acts = activation_kinds(raw)
    assert {"SiLU", "HardSwish", "Relu"} <= set(acts) and "GELU" not in ACT_KINDS
    resnet = sweep_plan([at.estimate(at.trace(zoo.get("resnet18"), (1, 3, 224, 224)), raw)], acts)
    assert set(acts) <= set(resnet) and all(set(resnet[k]) == {ACT_SUITE} for k in acts)  # its ReLUs are fused
    assert len(resnet["SiLU"][ACT_SUITE].times) == 0
    effnet = at.estimate(at.trace(zoo.get("efficientnet_b0"), (1, 3, 224, 224)), raw)
    held = sweep_plan([effnet], acts)["SiLU"][ACT_SUITE]
    silu = [r for r in effnet.table() if r["type"] == "SiLU" and not r["fused_into"] and r["time_ms"] > 0]
    assert len(held.times) == len(silu) > 0
    for kind in ("SiLU", "HardSwish"):
        cfgs = pick_configs(SUITES[ACT_SUITE], resnet[kind][ACT_SUITE], ACT_CONFIGS, None, select=_select(kind))
        assert len(cfgs) == ACT_CONFIGS
        assert all(c["act"] == ACT_KINDS[kind] and c["c"] * c["h"] * c["w"] >= MIN_ACT_ELEMENTS for c in cfgs)


def test_elementwise_layers_with_a_constant_operand_are_swept_with_their_own_micro_kernels():
    """The ``eltwise_const`` suite's configurations of each op stand for its const kind (large enough to time),
    like the networks' one-input layers where they hold them; a residual Add is left to the two-input suite."""
    from annette_torch.bench.suites import SUITES
    from annette_torch.fit.kind_sweep import (ACT_CONFIGS, CONST_KINDS, CONST_SUITE, MIN_ACT_ELEMENTS, _select,
                                              pick_configs, sweep_plan)
    from annette_torch.ir import LayerType as T, NetworkBuilder
    assert set(CONST_KINDS) == {"Add const", "Sub const", "Mul const", "Div const"}
    b = NetworkBuilder("adds")
    x = b.input("x", (1, 64, 56, 56))
    b.same(T.ADD, "residual", [b.same(T.ADD, "plus3", x), x])
    raw = without_overhead(at.load_platform(ORT_CPU))
    plan = sweep_plan([at.estimate(b.build(), raw)], tuple(CONST_KINDS))
    assert len(plan["Add const"][CONST_SUITE].times) == 1 and len(plan["Add"]["add"].times) == 1
    assert set(plan["Mul const"]) == {CONST_SUITE} and len(plan["Mul const"][CONST_SUITE].times) == 0
    cfgs = pick_configs(SUITES[CONST_SUITE], plan["Mul const"][CONST_SUITE], ACT_CONFIGS, None,
                        select=_select("Mul const"))
    assert len(cfgs) == ACT_CONFIGS and all(c["op"] == "mul" and c["c"] * c["h"] * c["w"] >= MIN_ACT_ELEMENTS
                                            for c in cfgs)


def test_the_sweep_takes_each_configurations_fastest_round(monkeypatch):
    """The plan is measured in rounds; a configuration counts with its fastest round (least time over its
    layers), so a spell of a slower machine in one round does not set a kind's factor."""
    from annette_torch.bench.records import LayerRecord
    from annette_torch.fit import data
    from annette_torch.fit.data import Measured
    from annette_torch.fit.kind_sweep import fastest

    def m(cid, t):
        return Measured("add", cid, None, {"a": LayerRecord("a", "Add", "", time_ms=t),
                                           "in": LayerRecord("in", "Input", "", time_ms=0.0)}, [])
    rounds = {"r1": [m("x", 2.0), m("y", 1.0)], "r2": [m("x", 1.0), m("y", 3.0)], "r3": [m("x", 1.5)]}
    monkeypatch.setattr(data, "load_measured", lambda store, key, suites=None: rounds[key])
    best = {c.config_id: c.records["a"].time_ms for c in fastest(None, ["r1", "r2", "r3"], "add")}
    assert best == {"x": 1.0, "y": 1.0}
    assert {c.config_id: c.records["a"].time_ms for c in fastest(None, ["r1"], "add")} == {"x": 2.0, "y": 1.0}


def test_weights_streamed_from_memory_rescale_the_cache_model_not_the_kinds():
    """The weight-streaming factor (large fully connected layers after hundreds of MB of traffic) divides the
    cache model's streaming bandwidths by its ratio to the fully connected kind's factor, so that a classifier
    streaming its weights costs that factor in all; it is no layer type's scale, and the base file is left as
    it was."""
    from annette_torch.fit.adapt import _with_factors
    from annette_torch.fit.kind_sweep import (COLD_KEY, MIN_COLD_FLUSH_MB, MIN_COLD_WEIGHT_MB, cold_configs,
                                              scale_cache)
    cfgs = cold_configs()
    assert len(cfgs) >= 2 and all(c["layer"] == "fc" and c["flush"] >= MIN_COLD_FLUSH_MB
                                  and 4 * c["c"] * c["f"] >= MIN_COLD_WEIGHT_MB * 2**20 for c in cfgs)
    raw = without_overhead(at.load_platform(ORT_CPU))
    before = dict(raw.to_dict()["cache"]["stream_bandwidth"])
    scaled = _with_factors(raw, {"FullyConnected": 1.25, COLD_KEY: 2.5})
    assert COLD_KEY not in scaled.to_dict()["overhead"]["kind_scales"]
    assert scaled.to_dict()["cache"]["stream_bandwidth"] == pytest.approx({k: v / 2.0 for k, v in before.items()})
    assert raw.to_dict()["cache"]["stream_bandwidth"] == before
    from annette_torch.bench.suites import SUITES
    net = SUITES["cold_weights"].build(cfgs[0])
    fc = {p: {r["name"]: r["time_ms"] for r in at.estimate(net, p).table()}["w"]
          for p in (_with_factors(raw, {"FullyConnected": 1.25}), scaled)}
    assert list(fc.values())[1] / list(fc.values())[0] == pytest.approx(2.0, rel=0.02)
    d = {"cache": None}
    scale_cache(d, {COLD_KEY: 2.0})  # no cache model: nothing to scale
    assert d == {"cache": None}


def test_a_classifiers_factor_starts_from_the_types_scale_and_sets_the_streaming_ratio():
    """A swept ``FullyConnected vector`` factor multiplies the scale the file gives fully connected layers (the
    kind replaces it there), and the weight-streaming factor is taken over it: classifiers stream their weights."""
    from annette_torch.fit.kind_sweep import COLD_KEY, VECTOR_KIND, apply_factors
    d = without_overhead(at.load_platform(ORT_CPU)).to_dict()
    before = dict(d["cache"]["stream_bandwidth"])
    d["overhead"] = {"scale": 1.0, "per_layer_ms": 0.0, "per_network_ms": 0.0, "kind_scales": {"FullyConnected": 0.5}}
    apply_factors(d, {"FullyConnected": 1.2, VECTOR_KIND: 2.0, COLD_KEY: 3.0})
    assert d["overhead"]["kind_scales"] == pytest.approx({"FullyConnected": 0.6, VECTOR_KIND: 1.0})
    assert d["cache"]["stream_bandwidth"] == pytest.approx({k: v / 1.5 for k, v in before.items()})


def test_the_sweep_gives_a_classifier_and_a_transformer_their_own_fully_connected_factor():
    """A real sweep (ONNX Runtime) of both fully connected suites: one factor per suite, the classifier's under
    its own kind, each a CPU's speed against the shipped file's (0.1-10x: CPUs without AVX-512 measured 2-4.5x
    its models, and a unit error would be 1000x)."""
    pytest.importorskip("onnxruntime")
    from annette_torch.fit.kind_sweep import VECTOR_KIND, VECTOR_SUITE, Target, sweep_factors
    raw = without_overhead(at.load_platform("ort-cpu"))
    none = Target(0.5, np.zeros((0, 2)), np.zeros(0))
    f = sweep_factors(raw, "ort-cpu", {"FullyConnected": {"linear": none, VECTOR_SUITE: none}}, configs=6, rounds=1)
    assert set(f) == {"FullyConnected", VECTOR_KIND} and all(0.1 < v < 10.0 for v in f.values())


def test_the_sweep_measures_micro_kernels_like_the_networks_layers():
    """Of the suite's configurations, those nearest to the layers carrying the time: a vision transformer's
    token projections pick linear layers of its size, not the suite's spread."""
    from annette_torch import zoo
    from annette_torch.bench.suites import SUITES
    from annette_torch.fit.kind_sweep import features, pick_configs, sweep_plan
    raw = without_overhead(at.load_platform(ORT_CPU))
    vit = at.estimate(at.trace(zoo.get("vit_ti16"), (1, 3, 224, 224)), raw)
    target = sweep_plan([vit])["FullyConnected"]["linear"]
    suite = SUITES["linear"]
    picked, spread = pick_configs(suite, target, 8, None), suite.configs(n=8, seed=0)

    def distance(cfgs):
        f = features(*suite.costs(cfgs))
        return float(np.mean([np.min(np.linalg.norm(target.features - x, axis=1)) for x in f]))
    assert len(picked) == 8 and distance(picked) < 0.5 * distance(spread)


def test_the_sweep_measures_a_kinds_factor_on_onnx_runtime():
    """A real sweep (ONNX Runtime, a few element-wise adds, two rounds): the factor is measured over modelled time,
    a CPU's speed against the shipped file's Add model (0.1-10x: CPUs without AVX-512 measured 2-4.5x, a unit error
    would be 1000x)."""
    pytest.importorskip("onnxruntime")
    from annette_torch.fit.kind_sweep import Target, sweep_factors
    raw = without_overhead(at.load_platform("ort-cpu"))
    f = sweep_factors(raw, "ort-cpu", {"Add": {"add": Target(1.0, np.zeros((0, 2)), np.zeros(0))}}, configs=6,
                      rounds=2)
    assert set(f) == {"Add"} and 0.1 < f["Add"] < 10.0


def test_a_failing_sweep_leaves_the_adaptation_without_it(monkeypatch, caplog):
    """The networks are measured by then: a sweep whose runtime fails adapts without per-kind scales, saying so."""
    import annette_torch.fit.kind_sweep as K
    from annette_torch.errors import AnnetteError
    from annette_torch.fit.adapt import _sweeper

    def broken(*a, **k):
        raise AnnetteError("hardware module 'ort-cpu' failed to start")
    monkeypatch.setattr(K, "sweep_factors", broken)
    res = adapt(ORT_CPU, networks=3, measure=_fake_machine(1.5, 0.0, 0.0), save=False,
                sweep=_sweeper("ort-cpu", False))
    assert res.kind_scales is None and "micro-kernel sweep failed" in caplog.text
