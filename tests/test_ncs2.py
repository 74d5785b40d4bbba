"""NCS2: benchmark_app report parser, ingest through the matcher into the store, the fitted ncs2 platform."""

from __future__ import annotations

import json
import sqlite3
import warnings
from pathlib import Path

import numpy as np
import pytest

from annette_torch.bench.ingest import GRAPH_SUITE, ingest_benchmark_app
from annette_torch.bench.parsers.benchmark_app import (BenchmarkAppReportError, detect_format, parse_counters,
                                                       parse_statistics)
from annette_torch.bench.store import Store
from annette_torch.estimator import estimate
from annette_torch.frontends.annette_json import from_annette_json
from annette_torch.platform import Platform, load_platform

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
REPORTS = SHARED / "ncs2-reports"
GRAPHS = SHARED / "annette-reference" / "graphs"
FIX = Path(__file__).resolve().parent / "fixtures" / "ncs2"
#: report -> (graph, executed rows, Total row in ms) from ../shared/ncs2-reports/README.md
CASES = {
    "tf_resnet50_imagenet_224_224_6.97G_avg_cnt_rep.csv": ("tf_resnet50", 91, 45.5),
    "tf_inceptionv1_imagenet_224_224_3G_avg_cnt_rep.csv": ("tf_inceptionv1", 76, 15.912),
    "cf_inceptionv3_imagenet_299_299_11.4G_avg_cnt_rep.csv": ("cf_inceptionv3", 118, 75.583),
    "cf_inceptionv4_imagenet_299_299_24.5G_avg_cnt_rep.csv": ("cf_inceptionv4", 184, 144.435),
}
#: the shipped ncs2 platform is fitted on these four networks: its estimate of each must be within this of
#: the report's Total (the fit's in-sample error is 0.3-3.7%)
IN_SAMPLE_TOLERANCE = 0.06

needs_reports = pytest.mark.skipif(not REPORTS.is_dir() or not GRAPHS.is_dir(),
                                   reason="../shared/ncs2-reports or ../shared/annette-reference not present")
warnings.filterwarnings("ignore", message=".*unsupported layer types.*")


def _pairs() -> list[tuple[str, str]]:
    return [(str(GRAPHS / f"{g}.json"), str(REPORTS / r)) for r, (g, _, _) in CASES.items()]


def _rows(path: Path) -> list[list[str]]:
    return [ln.split(";") for ln in path.read_text().splitlines()[1:] if ln and not ln.startswith("Total;")]


# ------------------------------------------------------------------------------------------------ parser

@needs_reports
@pytest.mark.parametrize("report", sorted(CASES))
def test_parser_reads_the_four_myriad_reports(report: str) -> None:
    _, n_exec, total = CASES[report]
    rep = parse_counters(REPORTS / report)
    assert rep.format == "average_counters" and rep.plugin == "MYRIAD"
    assert len(rep.executed()) == n_exec
    assert rep.total_ms == pytest.approx(total)
    assert sum(r.median_ms for r in rep.executed()) == pytest.approx(total, abs=1e-6)
    rows = _rows(REPORTS / report)
    assert len(rep.records) == len(rows)
    for r, row in zip(rep.records, rows):
        assert r.node == row[0] and r.median_ms == pytest.approx(float(row[4]))
        hw = row[3].startswith("MyriadXHwOp")
        if row[1] == "EXECUTED":
            assert r.exec_kind == ("nce+shave" if "injected" in row[3] else "nce") if hw else r.exec_kind == "shave"
        else:
            assert r.status == "not-run" and r.exec_kind == ""


@needs_reports
@pytest.mark.parametrize("cut", ["line", "mid-line"])
def test_truncated_report_is_one_error(tmp_path: Path, cut: str) -> None:
    text = (REPORTS / "cf_inceptionv3_imagenet_299_299_11.4G_avg_cnt_rep.csv").read_text()
    lines = text.splitlines(keepends=True)
    bad = "".join(lines[:120]) if cut == "line" else "".join(lines[:120]) + lines[120][:12]
    p = tmp_path / "trunc.csv"
    p.write_text(bad)
    with pytest.raises(BenchmarkAppReportError, match="trunc.csv"):
        parse_counters(p)


def test_foreign_and_empty_files_are_one_error(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkAppReportError, match="not a benchmark_app counters report"):
        parse_counters(FIX / "foreign.csv")
    with pytest.raises(BenchmarkAppReportError, match="not a benchmark_app counters report"):
        parse_counters(FIX / "benchmark_report.csv")  # the statistics report is not a counters report
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(BenchmarkAppReportError):
        parse_counters(tmp_path / "empty.csv")
    (tmp_path / "bin.csv").write_bytes(b"\x00\x01\x02layerName")
    with pytest.raises(BenchmarkAppReportError, match="binary"):
        parse_counters(tmp_path / "bin.csv")
    with pytest.raises(BenchmarkAppReportError, match="no such report"):
        parse_counters(tmp_path / "missing.csv")


def test_bad_status_and_bad_number_name_the_line(tmp_path: Path) -> None:
    good = (FIX / "average_counters_cpu_2022.csv").read_text().splitlines()
    p = tmp_path / "r.csv"
    p.write_text("\n".join(good[:2] + ["conv1;RUNNING;Convolution;jit;0.1;0.1"] + good[3:]))
    with pytest.raises(BenchmarkAppReportError, match=r"r.csv:3: unknown execStatus"):
        parse_counters(p)
    p.write_text("\n".join(good[:2] + ["conv1;EXECUTED;Convolution;jit;fast;0.1"] + good[3:]))
    with pytest.raises(BenchmarkAppReportError, match=r"r.csv:3: 'fast' is not a number"):
        parse_counters(p)


def test_detailed_counters_give_per_request_statistics() -> None:
    rep = parse_counters(FIX / "detailed_counters_myriad.csv")
    assert rep.format == "detailed_counters" and rep.plugin == "MYRIAD"
    assert list(rep.totals_ms) == pytest.approx([1.84, 2.16, 2.0]) and rep.total_ms == pytest.approx(2.0)
    by = {r.node: r for r in rep.records}
    assert by["conv1"].median_ms == pytest.approx(1.1) and by["conv1"].min_ms == pytest.approx(1.0)
    assert by["conv1"].std_ms == pytest.approx(np.std([1.0, 1.2, 1.1]))
    assert by["conv1"].extra["runs"] == 3
    assert by["conv2"].exec_kind == "nce+shave" and by["add"].exec_kind == "shave"
    assert by["<Extra>"].node_type == "Convert"  # the plugin's own conversion stage, an inserted node
    assert by["relu1"].status == "not-run" and by["relu1"].extra["exec_status"] == "OPTIMIZED_OUT"


def test_cpu_plugin_2022_layout() -> None:
    rep = parse_counters(FIX / "average_counters_cpu_2022.csv")
    assert rep.plugin == "CPU" and rep.total_ms == pytest.approx(1.265)
    assert [r.node for r in rep.executed()] == ["conv1", "conv2", "add"]
    assert {r.exec_kind for r in rep.executed()} == {"cpu"}


def test_statistics_report() -> None:
    st = parse_statistics(FIX / "benchmark_report.csv")
    assert st.latency_ms == pytest.approx(45.74) and st.throughput_fps == pytest.approx(87.12)
    assert st.sections["Command line parameters"]["target device"] == "MYRIAD"
    assert detect_format((FIX / "benchmark_report.csv").read_text()) == "statistics"
    with pytest.raises(BenchmarkAppReportError, match="not a benchmark_app statistics report"):
        parse_statistics(FIX / "average_counters_cpu_2022.csv")


# ------------------------------------------------------------------------------------------------ ingest

def test_ingest_fixture_through_the_matcher(tmp_path: Path) -> None:
    db = str(tmp_path / "m.sqlite")
    assert ingest_benchmark_app([(str(FIX / "tiny_graph.json"), str(FIX / "detailed_counters_myriad.csv"))],
                                "ncs2", db) == (1, 0)
    with Store(db) as st:
        recs = {r.layer: r for _, _, _, r in st.layer_records("ncs2", GRAPH_SUITE)}
    assert recs["relu1"].fused == "fused" and recs["relu1"].fused_into == "conv1"
    assert recs["conv1"].time_ms == pytest.approx(1.1) and recs["conv1"].exec_kind == "nce"
    assert recs["add"].exec_kind == "shave" and recs["<Extra>"].fused == "inserted"



def test_ingest_replace_swaps_a_stored_network_in_one_transaction(tmp_path: Path) -> None:
    db = str(tmp_path / "m.sqlite")
    pair = [(str(FIX / "tiny_graph.json"), str(FIX / "detailed_counters_myriad.csv"))]
    assert ingest_benchmark_app(pair, "ncs2", db) == (1, 0)
    assert ingest_benchmark_app(pair, "ncs2", db) == (0, 1)  # kept without --replace
    assert ingest_benchmark_app(pair, "ncs2", db, replace_stored=True) == (1, 0)
    with Store(db) as st:
        assert st.counts("ncs2") == {("ncs2", GRAPH_SUITE): {"ok": 1, "failed": 0}}
        assert len([r for *_, r in st.layer_records("ncs2", GRAPH_SUITE) if r.layer == "conv1"]) == 1


@needs_reports
def test_ingest_store_gives_the_same_layer_times_back(tmp_path: Path) -> None:
    db = str(tmp_path / "m.sqlite")
    assert ingest_benchmark_app(_pairs(), "ncs2", db) == (4, 0)
    assert ingest_benchmark_app(_pairs(), "ncs2", db) == (0, 4)  # already stored: kept, not doubled
    with Store(db) as st:
        by_net: dict[str, dict] = {}
        for _, cid, params, r in st.layer_records("ncs2", GRAPH_SUITE):
            by_net.setdefault(cid, {})[r.layer] = r
        e2e = {cid: m for (_, cid), m in st.e2e_medians("ncs2").items()}
    for report, (graph, _, total) in CASES.items():
        recs = by_net[graph]
        names = set(from_annette_json(GRAPHS / f"{graph}.json").names)
        assert names <= set(recs)  # every layer of the graph has a record
        assert sum(r.time_ms for r in recs.values()) == pytest.approx(total, abs=1e-6)
        assert e2e[graph] == pytest.approx(total)
        matched = 0
        rows = _rows(REPORTS / report)
        for row in rows:
            name, status, _, exec_type, t = row[0], row[1], row[2], row[3], float(row[4])
            if status == "EXECUTED" and name in names:
                matched += 1
                # the layer's time is its own row plus the stages named after it (``<name>/Transpose``)
                own = t + sum(float(r[4]) for r in rows if r[1] == "EXECUTED" and r[0].startswith(name + "/")
                              and r[0] not in names)
                assert recs[name].fused == "not-fused" and recs[name].time_ms == pytest.approx(own)
                assert recs[name].exec_kind == ("nce" if exec_type == "MyriadXHwOp" else recs[name].exec_kind)
            if status == "OPTIMIZED_OUT" and name in names:
                # fused flags from OPTIMIZED_OUT: the layer is fused into the node that ran it, with no time
                assert recs[name].fused == "fused" and recs[name].time_ms == 0.0
                assert recs[recs[name].fused_into].fused == "not-fused"
        assert matched >= 0.95 * CASES[report][1] - 2


@needs_reports
def test_bad_report_among_good_ones_stores_nothing(tmp_path: Path) -> None:
    db = str(tmp_path / "m.sqlite")
    bad = tmp_path / "bad.csv"
    bad.write_text("".join((REPORTS / "cf_inceptionv4_imagenet_299_299_24.5G_avg_cnt_rep.csv").read_text()
                           .splitlines(keepends=True)[:200]))
    pairs = _pairs()[:3] + [(str(GRAPHS / "cf_inceptionv4.json"), str(bad))]
    with pytest.raises(BenchmarkAppReportError, match="bad.csv"):
        ingest_benchmark_app(pairs, "ncs2", db)
    if Path(db).exists():
        n = sqlite3.connect(db).execute("SELECT COUNT(*) FROM configs").fetchone()[0]
        assert n == 0
    # a report of another network is refused too
    with pytest.raises(BenchmarkAppReportError, match="another network"):
        ingest_benchmark_app([(str(GRAPHS / "cf_inceptionv3.json"), _pairs()[0][1])], "ncs2", db)


# ------------------------------------------------------------------------------------------------ platform

def test_fitted_platform_round_trips_through_json(tmp_path: Path) -> None:
    plat = load_platform("ncs2")
    assert plat.meta.get("fit_report", {}).get("in_sample_error")
    again = Platform.from_dict(json.loads(json.dumps(plat.to_dict())), "again")
    p = tmp_path / "ncs2.json"
    again.save(p)
    third = Platform.load(p)
    assert third.to_dict() == plat.to_dict()
    net = from_annette_json(FIX / "tiny_graph.json")
    assert estimate(net, third).device_ms == pytest.approx(estimate(net, plat).device_ms, rel=1e-12)


def test_unmeasured_types_are_marked_in_the_model_column() -> None:
    layers = {
        "input": {"type": "DataInput", "parents": [], "children": ["dw"], "output_shape": [-1, 28, 28, 32]},
        "dw": {"type": "Conv", "parents": ["input"], "children": ["hs"], "input_shape": [-1, 28, 28, 32],
               "output_shape": [-1, 28, 28, 32], "kernel_shape": [3, 3, 1, 32], "strides": [1, 1, 1, 1],
               "pads": [0, 1, 1, 0, 0, 1, 1, 0], "dilations": [1, 1, 1, 1]},
        "hs": {"type": "HardSwish", "parents": ["dw"], "children": ["pw"], "input_shape": [-1, 28, 28, 32],
               "output_shape": [-1, 28, 28, 32]},
        "pw": {"type": "Conv", "parents": ["hs"], "children": [], "input_shape": [-1, 28, 28, 32],
               "output_shape": [-1, 28, 28, 64], "kernel_shape": [1, 1, 32, 64], "strides": [1, 1, 1, 1],
               "pads": [0] * 8, "dilations": [1, 1, 1, 1]},
    }
    est = estimate(from_annette_json({"name": "dwhs", "layers": layers}), "ncs2")
    model = {r["name"]: r["model"] for r in est.table()}
    assert model["dw"].endswith("(published)") and "DepthwiseConv" in model["dw"]
    assert model["hs"].endswith("(assumed)")
    assert "(published)" not in model["pw"] and "(assumed)" not in model["pw"]
    assert "assumed" in load_platform("ncs2").description and "published" in load_platform("ncs2").description


@needs_reports
@pytest.mark.parametrize("report", sorted(CASES))
def test_ncs2_estimate_against_the_report_total(report: str) -> None:
    graph, _, total = CASES[report]
    est = estimate(str(GRAPHS / f"{graph}.json"), "ncs2")
    assert abs(est.device_ms / total - 1.0) <= IN_SAMPLE_TOLERANCE


@needs_reports
@pytest.mark.slow
def test_leave_one_network_out_beats_the_published_model(tmp_path: Path) -> None:
    """Each network estimated by a platform fitted on the other three: within 20% (docs/accuracy.md has the
    table; the issue's 10% target is not met on Inception v1 / v3 and ResNet-50), and better on average
    than the published ANNETTE model."""
    from annette_torch.fit.ncs2 import (leave_one_network_out, load_graph_measurements, published_errors,
                                        published_platform)
    db = str(tmp_path / "m.sqlite")
    ingest_benchmark_app(_pairs(), "ncs2", db)
    with Store(db) as st:
        measured = load_graph_measurements(st, "ncs2")
    pub = published_platform(SHARED / "annette-reference")
    loo = leave_one_network_out(measured, pub)
    perr = published_errors(measured, pub)
    errs = {k: v["error"] for k, v in loo["networks"].items()}
    assert set(errs) == {g for g, _, _ in CASES.values()}
    assert all(abs(e) <= 0.20 for e in errs.values()), errs
    assert np.mean(np.abs(list(errs.values()))) < np.mean([abs(v["error"]) for v in perr["networks"].values()])
    assert abs(loo["types"]["Conv"]["error"]) <= 0.05


# ------------------------------------------------------------------------------------------------ live path

def test_no_myriad_plugin_stops_before_measuring(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from annette_torch.cli.app import main
    try:
        import openvino as ov
        if any(d.startswith("MYRIAD") for d in ov.Core().available_devices):
            pytest.skip("a stick is attached and this OpenVINO has the MYRIAD plugin")
    except ImportError:
        pass
    db = tmp_path / "m.sqlite"
    rc = main(["bench", "--platform", "ncs2", "--suite", "conv", "-n", "1", "--db", str(db)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1
    assert len([ln for ln in err if "error" in ln]) == 1
    line = next(ln for ln in err if "error" in ln)
    assert "2022.3" in line and "MYRIAD" in line and "annette bench ingest --platform ncs2 --graph" in line
    assert "benchmark_app" in line and "average_counters" in line
    assert not db.exists() or sqlite3.connect(db).execute("SELECT COUNT(*) FROM configs").fetchone()[0] == 0


def test_the_per_stage_overhead_is_never_above_the_fastest_measured_stage(tmp_path: Path) -> None:
    """Every executed stage pays the plugin's per-stage cost, so the search stops at the fastest stage: with
    Inception v1 left out an unbounded search took 0.05 ms, more than several measured stages."""
    from annette_torch.fit.ncs2 import _choose_overhead, load_graph_measurements, published_platform
    db = str(tmp_path / "m.sqlite")
    ingest_benchmark_app(_pairs(), "ncs2", db)
    with Store(db) as st:
        measured = [m for m in load_graph_measurements(st, "ncs2") if "inceptionv1" not in m.config_id]
    assert len(measured) == 3
    fastest = min(r.time_ms for m in measured for r in [*m.records.values(), *m.inserted] if r.time_ms > 0)
    assert _choose_overhead(measured, published_platform(SHARED / "annette-reference")) <= fastest < 0.05
