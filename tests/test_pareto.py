"""Pareto fronts, whole-space latency tables (NB201 / NB101) and the ``annette pareto`` command."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from annette_torch import estimate
from annette_torch.cli.app import main
from annette_torch.errors import AnnetteError
from annette_torch.search import pareto
from annette_torch.search.spaces import nb101, nb201
from annette_torch.search.spaces.registry import get_space


def _brute_force_front(lat: np.ndarray, acc: np.ndarray) -> set[int]:
    out = set()
    for i in range(len(lat)):
        if np.isnan(lat[i]) or np.isnan(acc[i]):
            continue
        dominated = (lat <= lat[i]) & (acc >= acc[i]) & ((lat < lat[i]) | (acc > acc[i]))
        if not dominated.any():
            out.add(i)
    return out


def test_pareto_front_hand_made_example():
    #            0    1    2    3    4    5    6    7       8
    lat = [1.0, 2.0, 2.0, 3.0, 0.5, 4.0, 3.0, np.nan, 5.0]
    acc = [70., 80., 75., 79., 60., 90., 85., 99.0, 90.0]
    # 4 (fastest), 0, 1 (2 ties on latency with 2 but is more accurate), 6 (beats 3), 5; 8 is dominated by 5;
    # 7 has no latency and is ignored
    assert pareto.pareto_front(lat, acc).tolist() == [4, 0, 1, 6, 5]


def test_pareto_front_keeps_identical_points_and_handles_edge_cases():
    assert pareto.pareto_front([1.0, 1.0, 2.0], [5.0, 5.0, 5.0]).tolist() == [0, 1]
    assert pareto.pareto_front([], []).tolist() == []
    assert pareto.pareto_front([3.0], [1.0]).tolist() == [0]
    with pytest.raises(ValueError):
        pareto.pareto_front([1.0, 2.0], [1.0])


def test_pareto_front_matches_brute_force_on_random_points_with_ties():
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(1, 300))
        lat = rng.integers(0, 30, n).astype(float)   # many ties
        acc = rng.integers(0, 30, n).astype(float)
        lat[rng.random(n) < 0.05] = np.nan
        idx = pareto.pareto_front(lat, acc)
        assert set(idx.tolist()) == _brute_force_front(lat, acc)
        assert np.all(np.diff(lat[idx]) >= 0)


@pytest.mark.slow
def test_nb201_latencies_cover_all_cells_and_match_estimate():
    # (its speed is benchmarks/nb201_speed.py's job: a shared machine makes wall-clock limits flaky)
    archs, lat = pareto.nb201_latencies("zcu102-dnndk")
    assert len(archs) == len(lat) == 15625 == len(set(archs))
    assert archs == nb201.all_arch_strings()
    assert np.all(np.isfinite(lat)) and np.all(lat > 0)
    for i in (0, 1, 777, 9001, 15624):
        assert lat[i] == pytest.approx(estimate(nb201.build_network(archs[i]), "zcu102-dnndk").latency_ms, rel=1e-9)


@pytest.mark.slow
def test_space_table_costs_and_several_platforms():
    t = pareto.space_table("nb201", ["zcu102-dnndk", "ncs2"])
    assert set(t.latency_ms) == {"zcu102-dnndk", "ncs2"}
    for i in (5, 12000):
        net = nb201.build_network(t.archs[i])
        assert t.params[i] == net.total_weights and t.ops[i] == net.total_ops
        assert t.latency_ms["ncs2"][i] == pytest.approx(estimate(net, "ncs2").latency_ms, rel=1e-9)


def test_nb101_latencies_sampled_cells():
    archs, lat = pareto.nb101_latencies("zcu102-dnndk", n=40, seed=1)
    assert len(archs) == len(set(archs)) == 40 and lat.shape == (40,)
    sp = get_space("nb101")
    for i in (0, 39):
        assert lat[i] == pytest.approx(estimate(sp.network(sp.decode(archs[i])), "zcu102-dnndk").latency_ms, rel=1e-9)
    assert pareto.nb101_latencies("zcu102-dnndk", n=40, seed=1)[0] == archs  # reproducible
    with pytest.raises(AnnetteError):
        pareto.nb101_latencies("zcu102-dnndk", n=0)


def test_attach_accuracy_partial_and_unmatched(tmp_path):
    t = pareto.space_table("nb101", ["zcu102-dnndk"], samples=20, seed=0)
    path = tmp_path / "acc.csv"
    path.write_text("arch,accuracy\n" + "".join(f"{a},{90 - i}\n" for i, a in enumerate(t.archs[:10])))
    assert pareto.attach_accuracy(t, path) == 10
    assert np.isnan(t.accuracy[10:]).all() and t.accuracy[0] == 90
    front = pareto.fronts(t)["zcu102-dnndk"]
    assert front.size and set(front.tolist()) <= set(range(10))
    assert set(front.tolist()) == _brute_force_front(t.latency_ms["zcu102-dnndk"], t.accuracy)
    # NB101 rows may name a cell by its spec hash instead of its encoding
    sp = get_space("nb101")
    hashed = tmp_path / "hashed.csv"
    hashed.write_text("arch,accuracy\n" + "".join(f"{sp.key(sp.decode(a))},{50 + i}\n" for i, a in enumerate(t.archs)))
    assert pareto.attach_accuracy(t, hashed) == len(t)
    assert t.accuracy.tolist() == [50.0 + i for i in range(len(t))]
    # a table that matches none of the cells is an error
    chain = sp.encode(nb101.validate(np.eye(7, k=1, dtype=int), (nb101.INPUT,) + (nb101.OPS[0],) * 5 + (nb101.OUTPUT,)))
    t2 = pareto.space_table("nb101", ["zcu102-dnndk"], samples=5, seed=3)
    assert chain not in t2.archs
    other = tmp_path / "other.csv"
    other.write_text(f"arch,accuracy\n{chain},50\n")
    with pytest.raises(AnnetteError, match="none of its 1 architectures"):
        pareto.attach_accuracy(t2, other)


@pytest.mark.slow
def test_cli_pareto_nb201_with_accuracy_writes_png_and_front_csv(tmp_path, capsys):
    acc = tmp_path / "acc.csv"
    rng = np.random.default_rng(0)
    archs = nb201.all_arch_strings()
    with acc.open("w") as f:
        f.write("arch,accuracy\n")
        for a in archs:
            f.write(f"{a},{rng.uniform(80, 95):.4f}\n")
    out = tmp_path / "plot.png"
    assert main(["pareto", "--space", "nb201", "--platform", "zcu102-dnndk", "ncs2", "--accuracy", str(acc),
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "15,625" in text and "front" in text
    assert out.stat().st_size > 10_000 and out.read_bytes()[:4] == b"\x89PNG"
    rows = list(csv.DictReader((tmp_path / "plot_front.csv").open()))
    assert {r["platform"] for r in rows} == {"zcu102-dnndk", "ncs2"}
    # each row names its cell by the benchmark's index too
    assert all(nb201.index_to_arch(int(r["index"])) == r["arch"] for r in rows)
    # the front of each platform is non-dominated and sorted by latency
    for p in ("zcu102-dnndk", "ncs2"):
        sub = [r for r in rows if r["platform"] == p]
        lat = [float(r["latency_ms"]) for r in sub]
        a = [float(r["accuracy"]) for r in sub]
        assert lat == sorted(lat) and a == sorted(a)


def test_cli_pareto_nb101_without_accuracy(tmp_path, capsys):
    out = tmp_path / "nb101.png"
    front_csv = tmp_path / "front.csv"
    assert main(["pareto", "--space", "nb101", "--platform", "zcu102-dnndk,ncs2", "--samples", "60", "--out", str(out),
                 "--csv", str(front_csv)]) == 0
    assert "most compute per ms" in capsys.readouterr().out
    assert out.is_file() and front_csv.is_file()
    rows = list(csv.DictReader(front_csv.open()))
    assert rows and all(r["accuracy"] == "" and r["index"] == "" for r in rows)
    assert {r["platform"] for r in rows} == {"zcu102-dnndk", "ncs2"}
    # without accuracy each front holds the cells with the most ops per latency: ops rise with latency
    for p in ("zcu102-dnndk", "ncs2"):
        sub = [r for r in rows if r["platform"] == p]
        lat = [float(r["latency_ms"]) for r in sub]
        ops = [int(r["ops"]) for r in sub]
        assert lat == sorted(lat) and ops == sorted(ops)


@pytest.mark.parametrize("argv,code,needle", [
    (["pareto", "--platform", "tpu9"], 1, "unknown platform"),
    (["pareto", "--space", "mbv2"], 2, "invalid choice"),
    (["pareto", "--space", "nb101", "--samples", "0"], 2, ">= 1"),
    (["pareto", "--accuracy", "missing.csv"], 1, "no such accuracy file"),
])
def test_cli_pareto_errors_are_one_line(argv, code, needle, capsys, tmp_path):
    assert main(argv + ["--out", str(tmp_path / "x.png")]) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("annette: error:") and needle in err


def test_cli_pareto_unwritable_output(tmp_path, capsys):
    assert main(["pareto", "--space", "nb101", "--samples", "5", "--out", str(tmp_path / "no" / "x.png")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not exist" in err
