"""The attention search spaces (`vit`, `hybrid`): encodings, traced networks without `Unknown`, 20-trial
latency-constrained Optuna searches, Pareto search, `LatencyConstraint`, `LatencyTable` and the ProxylessNAS
loop, ``SPACE:ARCH`` candidates and the CLI."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import annette_torch as at
from annette_torch.errors import AnnetteError
from annette_torch.search.spaces import hybrid, vit
from annette_torch.search.spaces._stitch import PartCache, same_layers
from annette_torch.search.spaces.registry import HybridSpace, ViTSpace, get_space, same_network, space_network

optuna = pytest.importorskip("optuna")
from optuna.trial import TrialState  # noqa: E402

from annette_torch.search import optuna_search as osr  # noqa: E402

VIT = "e240-" + "-".join(["h4r4", "h4r3.5", "h3r4", "h6r3"] * 2)
HYB = "c32_e4_e4-c48_e4_e6-a160_h4r2_h2r4-a224_h4r4"
#: the shipped platform each space is searched on (in their calibrated form; both have attention costs)
PLATFORM = {"vit": "ncs2", "hybrid": "zcu102-dnndk"}


pytestmark = pytest.mark.usefixtures("quiet_optuna")


def _extremes(name: str) -> tuple[str, str]:
    """The smallest and the largest architecture of a space, as encodings."""
    if name == "vit":
        small = vit.ViTArch(vit.EMBED_DIMS[0], ((vit.HEADS[0], vit.MLP_RATIOS[0]),) * vit.MIN_DEPTH)
        big = vit.ViTArch(vit.EMBED_DIMS[-1], ((vit.HEADS[-1], vit.MLP_RATIOS[-1]),) * vit.MAX_DEPTH)
        return vit.encode(small), vit.encode(big)
    small = [(s.widths[0], [hybrid.block_ops(s.kind)[0]] * s.depths[0]) for s in hybrid.STAGES]
    big = [(s.widths[-1], [hybrid.block_ops(s.kind)[-1]] * s.depths[-1]) for s in hybrid.STAGES]
    return hybrid.encode(small), hybrid.encode(big)


# ------------------------------------------------------------------------------------------------------
# encodings and networks


@pytest.mark.parametrize("name,text", [("vit", VIT), ("hybrid", HYB)])
def test_encoding_round_trip_and_networks_trace_without_unknown(name, text):
    sp = get_space(name)
    arch = sp.decode(text)
    assert sp.encode(arch) == text and sp.decode(sp.encode(arch)) == arch
    net = sp.network(arch)
    assert net.unknown_ops() == [] and "Unknown" not in net.summary()
    labels = net.summary()
    assert {"MatMul", "Softmax", "LayerNorm", "GELU", "FullyConnected"} <= set(labels)
    if name == "vit":
        assert labels["Softmax"] == arch.depth and labels["LayerNorm"] == 2 * arch.depth + 1
    else:
        assert labels["Softmax"] == sum(s.depth for s in arch[2:]) and labels["DepthwiseConv"] == 4
    assert net.out_shape(len(net) - 1)[:2] == (1, 1000)
    # the meta-device IR is the trace of the real module (weights allocated), and the module runs; the
    # space's network, stitched from parts, has its layers
    module = sp.model(arch)
    m = vit if name == "vit" else hybrid
    assert same_network(at.trace(module, (1, 3, 224, 224)), m.build_network(arch))
    assert same_layers(net, m.build_network(arch))
    with torch.no_grad():
        assert module(torch.zeros(1, 3, 224, 224)).shape == (1, 1000)


@pytest.mark.parametrize("name", ["vit", "hybrid"])
def test_stitched_networks_are_the_traced_ones(name):
    m = vit if name == "vit" else hybrid
    parts = PartCache()
    for arch in m.sample(8, np.random.default_rng(1)):
        stitched, traced = m.stitched_network(arch, parts=parts), m.build_network(arch)
        assert same_layers(stitched, traced)
        assert at.estimate(stitched, "zcu102-dnndk").latency_ms == at.estimate(traced, "zcu102-dnndk").latency_ms
        # the same module paths (names of function nodes differ: blocks.3.matmul for matmul_6)
        assert stitched.attrs["module"] == traced.attrs["module"]
        assert [n for n, mod in zip(stitched.names, stitched.attrs["module"]) if mod] == \
            [n for n, mod in zip(traced.names, traced.attrs["module"]) if mod]
    sp = get_space(name)
    sp.network(m.sample(1, np.random.default_rng(5))[0])
    assert sp._fast is True  # checked against the trace on first use


def test_architectures_grow_in_predicted_latency_with_their_choices():
    for name, plat in PLATFORM.items():
        sp = get_space(name)
        small, big = (at.estimate(sp.network(sp.decode(t)), plat).latency_ms for t in _extremes(name))
        assert 0 < small < big
    wide = vit.decode(VIT.replace("e240", "e384"))
    deep = vit.decode(VIT + "-h4r4-h4r4-h4r4-h4r4")
    base = at.estimate(vit.build_network(vit.decode(VIT)), "ncs2").latency_ms
    assert at.estimate(vit.build_network(wide), "ncs2").latency_ms > base
    assert at.estimate(vit.build_network(deep), "ncs2").latency_ms > base


@pytest.mark.parametrize("name,bad,match", [
    ("vit", "e240", "expected 'e<EMBED>-h<HEADS>r<RATIO>"),
    ("vit", "x240-h4r4", "expected 'e<EMBED>"),
    ("vit", "e241-" + "-".join(["h4r4"] * 6), "embedding dimension 241 is outside"),
    ("vit", "e240-h4r4", "depth 1 is outside"),
    ("vit", "e240-" + "-".join(["h4r5"] * 6), "outside the space"),
    ("vit", "e240-" + "-".join(["h4x4"] * 6), "is not 'h<HEADS>r<RATIO>'"),
    ("hybrid", "c32_e4-c48_e4-a128_h4r2", "4 stages expected, got 3"),
    ("hybrid", "c32_e4-c48_e4-c128_h4r2-a192_h4r4", "stage 2 'c128_h4r2' is not 'a<WIDTH>"),
    ("hybrid", "c32_e5-c48_e4-a128_h4r2-a192_h4r4", "is not 'e<E>'"),
    ("hybrid", "c33_e4-c48_e4-a128_h4r2-a192_h4r4", "width 33 / depth 1 outside"),
    ("hybrid", "c32-c48_e4-a128_h4r2-a192_h4r4", "is not 'c<WIDTH>_<block>"),
])
def test_malformed_encodings_give_one_clear_error(name, bad, match):
    sp = get_space(name)
    with pytest.raises(ValueError, match=match) as e:
        sp.decode(bad)
    assert "\n" not in str(e.value)
    with pytest.raises(AnnetteError) as e:
        space_network(f"{name}:{bad}")
    assert "\n" not in str(e.value) and f"is not a valid {name} candidate" in str(e.value)


def test_space_arch_strings_name_candidates():
    net = space_network(f"vit:{VIT}:10")
    assert net.name == f"vit:{VIT}:10" and net.out_shape(len(net) - 1)[:2] == (1, 10)
    small = space_network(f"vit:{VIT}", (1, 3, 96, 96))
    assert small.summary() == net.summary()  # the same layers on 36 tokens instead of 196
    assert at.estimate(small, "ncs2").latency_ms < at.estimate(net, "ncs2").latency_ms
    assert same_network(space_network(f"hybrid:{HYB}"), hybrid.build_network(hybrid.decode(HYB)))
    with pytest.raises(AnnetteError, match="multiple of the patch size 16"):
        space_network(f"vit:{VIT}", (1, 3, 100, 100))
    with pytest.raises(AnnetteError, match="square image input"):
        space_network(f"hybrid:{HYB}", (1, 3, 64, 32))
    with pytest.raises(AnnetteError, match="no architecture after 'vit'"):
        space_network("vit:")


# ------------------------------------------------------------------------------------------------------
# Optuna: the 20-trial constrained search, Pareto search, LatencyConstraint


@pytest.mark.parametrize("name", ["vit", "hybrid"])
def test_twenty_trial_constrained_search_respects_the_budget(name):
    plat = PLATFORM[name]
    sp = get_space(name)
    lo, hi = (at.estimate(sp.network(sp.decode(t)), plat).latency_ms for t in _extremes(name))
    budget = math.sqrt(lo * hi)  # between the space's fastest and slowest architecture
    study = osr.latency_constrained_search(name, plat, "synthetic", 20, latency_ms=budget, seed=0)
    trials = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(trials) == 20
    feasible = osr.feasible_trials(study)
    assert feasible and len(feasible) < 20  # the budget splits the space
    for t in trials:
        ms = at.estimate(sp.network(sp.decode(t.user_attrs["arch"])), plat).latency_ms  # recomputed
        assert ms == pytest.approx(t.user_attrs["latency_ms"], rel=1e-9)
        assert (t in feasible) == (ms <= budget)
    best = osr.best_feasible(study, 3)
    assert best and all(r["latency_ms"] <= budget for r in best)
    assert study.best_trial.user_attrs["latency_ms"] <= budget
    assert study.best_trial.value == max(t.value for t in feasible)


@pytest.mark.parametrize("name", ["vit", "hybrid"])
def test_pareto_search_and_front(name):
    plat = PLATFORM[name]
    study = osr.pareto_search(name, plat, "synthetic", 8, seed=0, population_size=4)
    rows = [r for r in osr.trial_rows(study) if r["state"] == "COMPLETE"]
    lat = np.array([r["latency_ms"] for r in rows])
    acc = np.array([r["objective"] for r in rows])
    front = osr.pareto_front(lat, acc)
    assert len(front) >= 1
    for i in front:  # no other trial is faster and at least as good
        assert not np.any((lat < lat[i]) & (acc >= acc[i]))


def test_latency_constraint_in_a_users_objective():
    sp = ViTSpace(num_classes=10, resolution=96)
    constraint = at.LatencyConstraint("ncs2", latency_ms=1e9) if hasattr(at, "LatencyConstraint") else None
    if constraint is None:
        from annette_torch.search.constraint import LatencyConstraint
        constraint = LatencyConstraint("ncs2", latency_ms=1e9)

    def objective(trial):
        arch = sp.suggest(trial)
        ms = constraint(trial, sp.network(arch), key=sp.encode(arch))
        assert ms == pytest.approx(at.estimate(sp.network(arch), "ncs2").latency_ms)
        return float(arch.depth)

    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=0))
    study.optimize(objective, n_trials=3)
    assert all(constraint.feasible(t) for t in study.trials)


def test_enqueued_architecture_is_searched_first():
    for name, text in (("vit", VIT), ("hybrid", HYB)):
        sp = get_space(name)
        study = optuna.create_study(direction="maximize")
        study.enqueue_trial(sp.params_of(sp.decode(text)))
        trial = study.ask()
        assert sp.encode(sp.suggest(trial)) == text


# ------------------------------------------------------------------------------------------------------
# LatencyTable and the ProxylessNAS loop


@pytest.mark.parametrize("name,platform", [("vit", "ncs2"), ("vit", "zcu102-dnndk"), ("hybrid", "ncs2"),
                                           ("hybrid", "zcu102-dnndk")])
def test_latency_table_matches_full_network_estimates(name, platform):
    m = vit if name == "vit" else hybrid
    table = m.latency_table(platform)
    assert table.ops == m.table_ops()
    rng = np.random.default_rng(0)
    for _ in range(4):
        choices = [str(rng.choice(o)) for o in m.table_ops()]
        full = at.estimate(m.table_network(choices), platform).latency_ms
        # identical, also on zcu102-dnndk, where the DPU <-> host switches at the blocks' seams (attention runs
        # on the host) belong to no block's own network: the table adds them per row (meta["seam_ms"])
        assert table.exact(choices) == pytest.approx(full, rel=1e-9)
    if platform == "zcu102-dnndk":
        assert any(s > 0 for s in table.meta["seam_ms"])
    else:
        assert "seam_ms" not in table.meta
    lo, hi = table.extremes()
    assert lo < float(table.expected(torch.zeros(table.lat.shape))) < hi


@pytest.mark.parametrize("name", ["vit", "hybrid"])
def test_proxyless_loop_trains_a_proxy_supernet_against_the_full_size_table(name):
    from annette_torch.search.proxyless import ProxylessSearch, digits_loaders
    m = vit if name == "vit" else hybrid
    torch.manual_seed(0)
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        table = m.latency_table("ncs2")
        lo, hi = table.extremes()
        s = ProxylessSearch("ncs2", latency_ms=lo + 0.3 * (hi - lo), table=table, supernet=m.proxy_supernet(),
                            network=m.table_network, lam=2.0)
        train, val = digits_loaders(256, seed=0)
        before = float(s.expected_ms().detach())
        s.fit(train, val, 1)
        res = s.result()
    finally:
        torch.set_num_threads(n)
    assert abs(res.expected_ms - s.target_ms) < abs(before - s.target_ms)  # pulled toward the target
    assert len(res.choices) == table.n_blocks
    full = at.estimate(m.table_network(res.choices), "ncs2").latency_ms
    assert res.predicted_ms == pytest.approx(full, rel=1e-12)
    assert res.table_ms == pytest.approx(full, rel=0.01)


# ------------------------------------------------------------------------------------------------------
# the CLI


def test_cli_searches_the_new_spaces_by_name(capsys):
    from annette_torch.cli import main
    for name in ("vit", "hybrid"):
        lo, hi = (at.estimate(get_space(name).network(get_space(name).decode(t)), PLATFORM[name]).latency_ms
                  for t in _extremes(name))
        assert main(["search", "--space", name, "-p", PLATFORM[name], "--trials", "3",
                     "--latency-ms", f"{hi:.6f}"]) == 0
        assert "study" in capsys.readouterr().out
    assert isinstance(get_space("VIT"), ViTSpace) and isinstance(get_space("hybrid"), HybridSpace)


# ------------------------------------------------------------------------------------------------------
# Pareto tables of sampled networks


@pytest.mark.parametrize("name", ["vit", "hybrid"])
def test_sampled_space_table_and_its_front(name):
    from annette_torch.search import pareto
    t = pareto.space_table(name, ["ncs2", "zcu102-dnndk"], samples=6, seed=2)
    assert len(t) == 6 and len(set(t.archs)) == 6 and t.space == name
    sp = get_space(name)
    for i in (0, 5):
        net = sp.network(sp.decode(t.archs[i]))
        assert t.latency_ms["ncs2"][i] == pytest.approx(at.estimate(net, "ncs2").latency_ms, rel=1e-9)
        assert t.ops[i] == pytest.approx(net.total_ops)
    assert pareto.space_table(name, ["ncs2"], samples=6, seed=2).archs == t.archs  # reproducible
    front = pareto.fronts(t)["ncs2"]
    lat, ops = t.latency_ms["ncs2"], t.ops
    assert len(front) >= 1 and all(not np.any((lat < lat[i]) & (ops >= ops[i])) for i in front)


def test_cli_pareto_of_a_sampled_attention_space(tmp_path, capsys):
    from annette_torch.cli import main
    out = tmp_path / "hybrid.png"
    assert main(["pareto", "--space", "hybrid", "-p", "ncs2", "--samples", "5", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "hybrid: sampled 5 cells" in text and out.is_file() and (tmp_path / "hybrid_front.csv").is_file()


def test_adaptation_rows_may_name_attention_candidates(tmp_path):
    from annette_torch.fit.adapt import read_latencies
    path = tmp_path / "lat.csv"
    small = "e192-" + "-".join(["h3r3"] * 6)
    path.write_text(f"model,input_shape,latency_ms\nvit:{VIT}:10,,31.5\nhybrid:{HYB},\"1,3,160,160\",8.25\n"
                    f"vit:{small},,12\n")
    rows = read_latencies(path)
    assert [(r[0], r[2]) for r in rows] == [(f"vit:{VIT}:10", 31.5), (f"hybrid:{HYB}", 8.25), (f"vit:{small}", 12.0)]
    assert same_layers(rows[1][1], hybrid.build_network(hybrid.decode(HYB), resolution=160))
    bad = tmp_path / "bad.csv"
    bad.write_text("model,input_shape,latency_ms\nvit:e240-h4r9,,3\n")
    with pytest.raises(AnnetteError) as e:
        read_latencies(bad)
    assert "\n" not in str(e.value) and "vit" in str(e.value)
