"""ZCU102 hardware module: DPU report parsers on fixture reports, job folders, ingest, and the job scripts'
plumbing run against stand-ins for the Vitis AI tools (no board or toolchain on this machine)."""

from __future__ import annotations

import json
import math
import os
import py_compile
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from annette_torch.bench.parsers import dpu as dr
from annette_torch.bench.parsers.dpu import ReportError, UnknownLayoutError
from annette_torch.bench.runners.base import RUNNERS, Profile
from annette_torch.bench.runners.vitis import BoardRequiredError, VitisRunner, ingest, load_job_report
from annette_torch.errors import AnnetteError

FIX = Path(__file__).parent / "fixtures" / "dpu"


def _model(name="smallnet", shape=(1, 3, 8, 8)):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    y = helper.make_tensor_value_info("r", TensorProto.FLOAT, list(shape))
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"], name="r")], name, [x], [y])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


# -------------------------------------------------------------------------------------------- detection

@pytest.mark.parametrize("fname,fmt", [
    ("dnndk_smallcnn_profile.log", "dnndk"),
    ("dnndk_two_kernels.log", "dnndk"),
    ("dnndk_truncated.log", "dnndk"),
    ("vaitrace_profile_summary.csv", "vaitrace-csv"),
    ("vaitrace_fine_grained_summary.csv", "vaitrace-csv"),
    ("vaitrace_truncated.csv", "vaitrace-csv"),
    ("vaitrace_summary.txt", "vaitrace-txt"),
    ("vaitrace_summary_v14.txt", "vaitrace-txt"),
    ("vaitrace_summary_truncated.txt", "vaitrace-txt"),
    ("job_smallcnn/reports/vart_trace.csv", "vaitrace-vtf"),
    ("job_smallcnn/reports/profile_summary.csv", "vaitrace-csv"),
    ("job_smallcnn/reports/vart_timing.json", "vart-timing"),
])
def test_detect_format(fname, fmt):
    assert dr.detect_format((FIX / fname).read_text(), fname) == fmt


@pytest.mark.parametrize("text", ["", "  \n\n", "hello\nworld\n", "a;b;c\n1;2;3\n", '{"x": 1}', "\x00\x01bin"])
def test_unknown_layouts_rejected(text):
    with pytest.raises(UnknownLayoutError):
        dr.detect_format(text)


def test_unknown_layout_fixture_names_file():
    with pytest.raises(UnknownLayoutError, match=r"unknown_layout\.csv: unknown report layout"):
        dr.parse_report(FIX / "unknown_layout.csv")
    with pytest.raises(ReportError, match="cannot read report"):
        dr.parse_report(FIX / "does_not_exist.csv")


# ------------------------------------------------------------------------------------------------ DNNDK

def test_dnndk_small_cnn_fused_nodes_and_per_run_stats():
    rep = dr.parse_report(FIX / "dnndk_smallcnn_profile.log")
    assert rep.format == "dnndk"
    assert [r.node for r in rep.records] == ["conv1", "conv2", "fc"]  # relu / pool fused into the convs
    conv1 = rep.records[0]
    t = np.array([0.031, 0.030, 0.031])
    assert conv1.median_ms == pytest.approx(np.median(t))
    assert conv1.min_ms == pytest.approx(0.030)
    assert conv1.std_ms == pytest.approx(t.std())
    assert conv1.node_type == "dpu-node" and conv1.exec_kind == "dpu" and conv1.status == "executed"
    assert conv1.layers == ("conv1",)
    assert conv1.extra["kernel"] == "smallcnn_0" and conv1.extra["runs"] == 3
    assert conv1.extra["workload_mop"] == pytest.approx(0.885)
    assert conv1.extra["utilization_pct"] == pytest.approx(2.4)  # '%' stripped
    np.testing.assert_allclose(rep.times["conv1"], t)
    np.testing.assert_allclose(rep.e2e_ms, [0.082, 0.081, 0.083])  # 'All' rows
    assert rep.meta["granularity"] == "layer"


def test_dnndk_two_kernels_long_and_cut_names():
    rep = dr.parse_report(FIX / "dnndk_two_kernels.log")
    assert rep.meta["kernels"] == ["segnet_0", "segnet_2"]
    assert len(rep.records) == 8
    by = {r.node: r for r in rep.records}
    assert by["block1_conv1_convolution"].extra["kernel"] == "segnet_0"
    assert by["add_layer_add_1"].extra["kernel"] == "segnet_2"
    long = "decoder_stage2_conv2d_transpose_conv2d_transpose"  # wider than the 30-char column
    assert long in by and by[long].extra["runs"] == 2
    cut = by["conv2d_transpose_1_*"]
    assert cut.extra["name_truncated"] and "conv2d_transpose_1" in cut.layers
    # per run: sum of both kernels' 'All' rows
    np.testing.assert_allclose(rep.e2e_ms, [5.723 + 0.449, 5.615 + 0.449])
    np.testing.assert_allclose(rep.meta["kernel_total_ms"]["segnet_0"], [5.723, 5.615])


def test_dnndk_skip_runs_and_too_many():
    rep = dr.parse_report(FIX / "dnndk_smallcnn_profile.log", skip_runs=1)
    np.testing.assert_allclose(rep.times["conv1"], [0.030, 0.031])
    with pytest.raises(ReportError, match="cannot skip 3"):
        dr.parse_report(FIX / "dnndk_smallcnn_profile.log", skip_runs=3)


_HDR = "  ID                       NodeName Workload(MOP) Mem(MB) RunTime(ms) Perf(GOPS) Utilization    MB/S"
_ROW = "   1                          conv1         0.885    0.01       0.031       28.5         2.4%   322.6"
_TOT = "                                All         0.885    0.01       0.035       25.3         2.1%   285.7"
_EQ = "=" * 101


def _block(kernel="k_0", rows=(_ROW,), total=_TOT, close=True):
    lines = [f'[DNNDK] Performance profile - DPU Kernel "{kernel}" DPU Task "{kernel}-0"', _EQ, _HDR, *rows, "",
             "                Total Nodes In Avg:", total]
    return "\n".join(lines + ([_EQ] if close else [])) + "\n"


def test_dnndk_same_node_name_in_two_kernels_kept_apart():
    rep = dr.parse_text(_block("a_0") + _block("a_2"))
    assert [r.node for r in rep.records] == ["conv1", "a_2:conv1"]
    assert rep.records[1].layers[0] == "a_2:conv1" and rep.records[1].extra["kernel"] == "a_2"


def test_dnndk_bare_table_without_title_uses_file_name():
    text = _block().split("\n", 1)[1]  # drop the title line
    rep = dr.parse_text(text, "/x/mynet_profile.log")
    assert rep.records[0].extra["kernel"] == "mynet_profile"


@pytest.mark.parametrize("text,match", [
    (_block(close=False), "ends inside the DNNDK profile block"),
    (_block(total="                                All   0.1  0.2"), "malformed DNNDK total row"),
    (_block(rows=(_ROW.replace("0.031", "0.0x1"),)), "non-numeric value in DNNDK node row"),
    (_block(rows=("   1  conv1  0.885  0.01",)), "malformed DNNDK node row"),
    (_block(rows=()), "without node rows"),
    ('[DNNDK] Performance profile - DPU Kernel "k" DPU Task "k-0"\n' + _EQ + "\n", "truncated"),
    (_block().replace("                Total Nodes In Avg:\n", "garbage\n"), "expected 'Total Nodes In Avg:'"),
    (_block().replace(_EQ + "\n", "more output\n", 2).replace(_EQ, "="), "expected the DNNDK column header"),
])
def test_dnndk_corrupt_blocks(text, match):
    with pytest.raises(ReportError, match=match):
        dr.parse_text(text, "r.log")


def test_dnndk_truncated_fixture_names_line_and_returns_nothing():
    with pytest.raises(ReportError) as e:
        dr.parse_report(FIX / "dnndk_truncated.log")
    msg = str(e.value)
    assert "dnndk_truncated.log:31:" in msg and "truncated" in msg and "\n" not in msg


# --------------------------------------------------------------------------------------------- vaitrace

def test_vaitrace_csv_merges_cores_and_skips_cpu_rows():
    rep = dr.parse_report(FIX / "vaitrace_profile_summary.csv")
    assert [r.node for r in rep.records] == ["subgraph_conv1", "subgraph_fc_fix"]
    conv = rep.records[0]
    assert conv.median_ms == pytest.approx((0.342 * 412 + 0.352 * 388) / 800)  # run-weighted mean
    assert conv.min_ms == pytest.approx(0.309) and conv.extra["max_ms"] == pytest.approx(0.702)
    assert math.isnan(conv.std_ms)  # not in the file
    assert conv.extra["runs"] == 800 and conv.extra["cores"] == ["DPUCZDX8G_1", "DPUCZDX8G_2"]
    assert conv.extra["batch"] == 1 and conv.extra["workload_gop"] == pytest.approx(0.327)
    assert conv.node_type == "dpu-subgraph" and conv.layers == ("conv1",)
    assert rep.records[1].layers == ("fc",)  # subgraph_ prefix and _fix suffix removed
    assert rep.meta["xrt_build_version"] == "2.12.0" and rep.meta["cpu_functions"] == 3


def test_vaitrace_csv_cpu_functions_on_request():
    rep = dr.parse_report(FIX / "vaitrace_profile_summary.csv", include_cpu=True)
    cpu = [r for r in rep.records if r.exec_kind == "cpu"]
    assert [r.node for r in cpu] == ["xir::XrtCu::run", "vart::dpu::DpuRunnerBaseImp::execute_async",
                                     "run_once@py"]
    assert cpu[0].node_type == "cpu-function" and cpu[0].median_ms == pytest.approx(0.078) and cpu[0].layers == ()


def test_vaitrace_fine_grained_table_one_record_per_layer():
    rep = dr.parse_report(FIX / "vaitrace_fine_grained_summary.csv", granularity="layer")
    assert [r.layers[0] for r in rep.records] == ["conv1", "pool1", "conv2", "fc"]
    assert all(r.node_type == "dpu-layer" and r.extra["granularity"] == "layer" for r in rep.records)
    assert rep.records[3].node == "subgraph_fc_fix(TransferMatMulToConv2d)"
    assert rep.records[2].median_ms == pytest.approx(0.032)
    with pytest.raises(ReportError, match="granularity"):
        dr.parse_report(FIX / "vaitrace_fine_grained_summary.csv", granularity="op")


def test_vaitrace_txt_uses_hardware_counter_time():
    rep = dr.parse_report(FIX / "vaitrace_summary.txt")
    conv, fc = rep.records
    assert conv.node == "conv1" and conv.median_ms == pytest.approx((0.298 + 0.301) / 2)
    assert conv.extra["sw_mean_ms"] == pytest.approx((0.342 + 0.352) / 2)
    assert "HW_RT" in conv.extra["time_source"] and "runs" not in conv.extra  # the txt has no run counts
    assert fc.layers == ("fc",) and fc.extra["effic_pct"] == 0.0 and fc.extra["load_fm_mb"] == 0.0  # '~0'
    rep = dr.parse_report(FIX / "vaitrace_summary.txt", include_cpu=True)
    assert [r.node for r in rep.records if r.exec_kind == "cpu"] == ["xir::XrtCu::run", "run_once@py"]


def test_vaitrace_txt_v14_layout_and_cut_names():
    rep = dr.parse_report(FIX / "vaitrace_summary_v14.txt", include_cpu=True)
    first = rep.records[0]
    assert first.extra["name_truncated"] and first.node.startswith("subgraph_SmallCNN__SmallCNN")
    assert not first.node.endswith("...") and first.median_ms == pytest.approx(0.344)
    assert rep.records[1].layers == ("fc",)
    assert [r.node for r in rep.records if r.exec_kind == "cpu"] == ["xir::XrtCu::run"]


def test_vaitrace_truncated_files():
    with pytest.raises(ReportError, match=r"vaitrace_truncated\.csv:12: row has 4 fields"):
        dr.parse_report(FIX / "vaitrace_truncated.csv")
    with pytest.raises(ReportError, match=r"summary_truncated\.txt:3: .*no closing"):
        dr.parse_report(FIX / "vaitrace_summary_truncated.txt")
    with pytest.raises(ReportError, match="without a column header"):
        dr.parse_text("Profile Summary\n\nDPU Summary\n", "p.csv", fmt="vaitrace-csv")
    head = (FIX / "vaitrace_profile_summary.csv").read_text().split("subgraph_conv1")[0]
    with pytest.raises(ReportError, match="without DPU rows"):
        dr.parse_text(head, "p.csv")
    with pytest.raises(ReportError, match="non-numeric"):
        dr.parse_text(head + "subgraph_x,3,DPUCZDX8G_1:batch-1,a,b,c,1,1,1,1,\n", "p.csv")


def test_vtf_trace_per_run_durations_and_merge():
    p = FIX / "job_smallcnn" / "reports"
    vtf = dr.parse_report(p / "vart_trace.csv")
    np.testing.assert_allclose(vtf.times["subgraph_conv1"], [0.402, 0.341, 0.338, 0.352, 0.339, 0.344])
    vtf = dr.parse_report(p / "vart_trace.csv", skip_runs=1)  # drop the warm-up run
    r = vtf.records[0]
    assert r.median_ms == pytest.approx(0.341) and r.min_ms == pytest.approx(0.338)
    assert r.std_ms == pytest.approx(np.std([0.341, 0.338, 0.352, 0.339, 0.344]))
    assert r.extra["cores"] == ["DPUCZDX8G_1"] and vtf.meta["xrt_version"] == "2.12.0"
    merged = dr.merge_vtf_with_summary(vtf, dr.parse_report(p / "profile_summary.csv"))
    assert merged.records[0].extra["workload_gop"] == pytest.approx(0.327)
    assert merged.records[0].median_ms == pytest.approx(0.341)  # times stay the trace's


def _vtf(events, resolution="ms"):
    return "\n".join(["HEADER", "VTF File Version,1.0", f"Resolution,{resolution}", "", "STRUCTURE",
                      "Dynamic_Row, 1, DPUCZDX8G_1", "", "MAPPING", "1,subgraph_a", "", "EVENTS", *events]) + "\n"


def test_vtf_units_and_corruption():
    ev = ["1,0,100.0,1,VART_RUNNER,1,7,1,0.1,1,1,0,0,,", "2,1,350.0,1,VART_RUNNER,1,7,1,0.1,1,1,0,0,,"]
    assert dr.parse_text(_vtf(ev, "us")).records[0].median_ms == pytest.approx(0.25)
    with pytest.raises(ReportError, match="without its start event"):
        dr.parse_text(_vtf(ev[1:]))
    with pytest.raises(ReportError, match=":13: truncated event line"):
        dr.parse_text(_vtf([ev[0], "2,1,350.0,1,VART_RUN"]))
    with pytest.raises(ReportError, match="no complete DPU run"):
        dr.parse_text(_vtf(ev[:1]))
    with pytest.raises(ReportError, match="missing from MAPPING"):
        dr.parse_text(_vtf([e.replace("VART_RUNNER,1,", "VART_RUNNER,4,") for e in ev]))
    with pytest.raises(ReportError, match="unknown time resolution"):
        dr.parse_text(_vtf(ev, "fortnights"))


def test_vart_timing_json():
    rep = dr.parse_report(FIX / "job_smallcnn" / "reports" / "vart_timing.json")
    assert rep.records[0].median_ms == pytest.approx(0.503) and rep.records[0].min_ms == pytest.approx(0.498)
    np.testing.assert_allclose(rep.e2e_ms, [0.531, 0.517, 0.526, 0.521, 0.520])
    assert rep.meta["warmup"] == 1
    with pytest.raises(ReportError, match=r"vart_timing_truncated\.json:\d+: invalid JSON"):
        dr.parse_report(FIX / "vart_timing_truncated.json")
    bad = json.dumps({"format": "annette-vart-timing", "subgraphs": {"s": [1.0, -2.0]}})
    with pytest.raises(ReportError, match="empty or invalid"):
        dr.parse_text(bad)


@pytest.mark.parametrize("raw,norm,canon", [
    ("subgraph_conv1", "conv1", "conv1"),
    ("quant_Conv-Out_relu_fix", "quant_Conv-Out_relu", "quant_Conv_Out_relu"),
    ("fc_fix(TransferMatMulToConv2d)", "fc", "fc"),
    ("ResNet::ResNet/Conv2d[conv1]/aten::_convolution", "ResNet::ResNet/Conv2d[conv1]", "ResNet_ResNet_Conv2d_conv1"),
    ("k0/conv_DequantizeLinear_Output", "k0/conv", "k0_conv"),
    ("conv2d_transpose_1_*", "conv2d_transpose_1_", "conv2d_transpose_1"),
    ("_fix", "_fix", "fix"),
])
def test_name_normalisation(raw, norm, canon):
    assert dr.normalize_node_name(raw) == norm
    assert dr.canonical_name(raw) == canon
    assert dr.candidate_layers(raw)[0] == norm


# ---------------------------------------------------------------------------------------------- runner

def test_runner_registered_and_toolchain():
    assert RUNNERS["vitis"] is VitisRunner
    tc = VitisRunner().toolchain()
    assert tc["toolchain"] == "vitis-ai" and tc["arch"] == "DPUCZDX8G_ISA1_B4096" and tc["note"]


def test_prepare_writes_job_folder(tmp_path):
    job = Path(VitisRunner(workdir=str(tmp_path)).prepare(_model()))
    assert job == tmp_path / "smallnet"
    names = {p.name for p in job.iterdir()}
    assert {"model.onnx", "job.json", "params.env", "arch.json", "quantize.py", "host.sh", "run_dpu.py",
            "board.sh", "README.txt"} <= names
    meta = json.loads((job / "job.json").read_text())
    assert meta["name"] == "smallnet" and meta["arch"] == "DPUCZDX8G_ISA1_B4096" and meta["iterations"] == 20
    host = (job / "host.sh").read_text()
    assert "/opt/vitis_ai/compiler/arch/DPUCZDX8G/ZCU102/arch.json" in host
    assert 'vai_c_xir -x quantized.onnx -a "$ARCH_JSON" -o compiled -n smallnet' in host
    assert "vai_q_onnx.quantize_static(" in (job / "quantize.py").read_text()
    board = (job / "board.sh").read_text()
    assert "vaitrace -p" in board and "compiled/smallnet.xmodel" in board
    assert "vart.Runner.create_runner" in (job / "run_dpu.py").read_text()
    assert os.access(job / "host.sh", os.X_OK) and os.access(job / "board.sh", os.X_OK)
    for f in ("quantize.py", "run_dpu.py"):
        py_compile.compile(str(job / f), doraise=True, cfile=str(tmp_path / (f + "c")))
    if shutil.which("bash"):
        subprocess.run(["bash", "-n", str(job / "host.sh")], check=True)
        subprocess.run(["bash", "-n", str(job / "board.sh")], check=True)


def test_prepare_reuses_same_model_and_separates_different_ones(tmp_path):
    r = VitisRunner(workdir=str(tmp_path))
    a = r.prepare(_model())
    (Path(a) / "reports").mkdir()
    assert r.prepare(_model()) == a and (Path(a) / "reports").is_dir()  # resumable: reports kept
    b = r.prepare(_model(shape=(1, 3, 16, 16)))
    assert b != a and Path(b).name.startswith("smallnet-")
    assert Path(r.prepare(_model(), name="conv k3/c64")).name == "conv_k3_c64"


def test_prepare_rejects_bad_input(tmp_path):
    with pytest.raises(AnnetteError, match="no static shape"):
        VitisRunner(workdir=str(tmp_path)).prepare(_model(shape=(0, 3, 8, 8)))
    with pytest.raises(AnnetteError, match="unknown DPU arch"):
        VitisRunner(arch="B4096", workdir=str(tmp_path)).prepare(_model())
    with pytest.raises(AnnetteError, match="board_python"):
        VitisRunner(board_python="python3 \"; rm", workdir=str(tmp_path)).prepare(_model())
    with pytest.raises(AnnetteError, match="onnx.ModelProto"):
        VitisRunner(workdir=str(tmp_path)).prepare("model.onnx")


def test_other_arch_uses_job_arch_json(tmp_path):
    job = Path(VitisRunner(arch="DPUCZDX8G_ISA1_B2304", workdir=str(tmp_path)).prepare(_model()))
    assert json.loads((job / "arch.json").read_text()) == {"target": "DPUCZDX8G_ISA1_B2304"}
    assert 'ARCH_JSON="${ARCH_JSON:-arch.json}"' in (job / "host.sh").read_text()


def test_profile_without_reports_explains_and_records_iterations(tmp_path):
    r = VitisRunner(workdir=str(tmp_path))
    job = r.prepare(_model())
    with pytest.raises(BoardRequiredError) as e:
        r.profile(job, iterations=50, warmup=5)
    assert isinstance(e.value, AnnetteError)
    assert "host.sh" in str(e.value) and "annette bench ingest --platform zcu102" in str(e.value)
    env = (Path(job) / "params.env").read_text()
    assert 'ITERATIONS="${ITERATIONS:-50}"' in env and 'WARMUP="${WARMUP:-5}"' in env
    assert json.loads((Path(job) / "job.json").read_text())["iterations"] == 50
    with pytest.raises(AnnetteError, match="not a vitis job folder"):
        r.profile(str(tmp_path), 10, 1)
    with pytest.raises(AnnetteError, match="iterations"):
        r.profile(job, 0, 1)


def test_profile_parses_reports_in_job_folder(tmp_path):
    r = VitisRunner(workdir=str(tmp_path))
    job = Path(r.prepare(_model()))
    shutil.copytree(FIX / "job_smallcnn" / "reports", job / "reports")
    prof = r.profile(str(job))
    assert isinstance(prof, Profile) and prof.meta["format"] == "vaitrace-vtf"
    typ, kind, status, t = prof.nodes["subgraph_conv1"]
    assert (typ, kind, status) == ("dpu-subgraph", "dpu", "executed")
    np.testing.assert_allclose(t, [0.341, 0.338, 0.352, 0.339, 0.344])  # warm-up run (vart_timing: 1) dropped
    np.testing.assert_allclose(prof.e2e_ms, [0.531, 0.517, 0.526, 0.521, 0.520])
    recs = r.parse(prof)
    assert recs[0].median_ms == pytest.approx(0.341) and recs[0].extra["workload_gop"] == pytest.approx(0.327)
    assert recs[0] is not prof.raw.records[0]


# ---------------------------------------------------------------------------------------------- ingest

def test_ingest_job_folder_reports_folder_and_files():
    job = FIX / "job_smallcnn"
    (name, recs), = ingest([str(job)])
    assert name == "smallcnn" and [r.node for r in recs] == ["subgraph_conv1"]
    assert recs[0].extra["runs"] == 5 and recs[0].extra["mb_s"] == pytest.approx(3433.428)
    assert ingest([str(job / "reports")])[0][0] == "smallcnn"
    (name, recs), = ingest([str(job / "reports" / "profile_summary.csv")])
    assert name == "smallcnn" and math.isnan(recs[0].std_ms)
    out = ingest([str(FIX / "dnndk_smallcnn_profile.log"), str(FIX / "vaitrace_summary.txt")])
    assert [n for n, _ in out] == ["dnndk_smallcnn", "dpu"]  # generic file name: folder name
    assert VitisRunner().ingest([str(job)])[0][1][0].node == "subgraph_conv1"
    assert load_job_report(job).format == "vaitrace-vtf"


def test_ingest_folder_of_job_folders_and_name_from_folder(tmp_path):
    for n in ("a", "b"):
        shutil.copytree(FIX / "job_smallcnn", tmp_path / "jobs" / n)
        meta = json.loads((tmp_path / "jobs" / n / "job.json").read_text())
        (tmp_path / "jobs" / n / "job.json").write_text(json.dumps({**meta, "name": n}))
    assert [n for n, _ in ingest([str(tmp_path / "jobs")])] == ["a", "b"]
    loose = tmp_path / "conv_k3" / "reports"
    loose.mkdir(parents=True)
    shutil.copy(FIX / "vaitrace_profile_summary.csv", loose / "profile_summary.csv")
    (loose / "vitis_ai_profile.csv").write_text("DPU Throughput\ntimestamp,FPS\n\n")  # not a DPU report
    assert ingest([str(loose / "profile_summary.csv")])[0][0] == "conv_k3"
    assert ingest([str(tmp_path / "conv_k3")])[0][0] == "conv_k3"


def test_ingest_errors(tmp_path):
    with pytest.raises(AnnetteError, match="no such file"):
        ingest([str(tmp_path / "missing")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match="no DPU profiler report"):
        ingest([str(tmp_path / "empty")])
    two = tmp_path / "two"
    two.mkdir()
    shutil.copy(FIX / "vaitrace_profile_summary.csv", two / "x.csv")
    shutil.copy(FIX / "vaitrace_fine_grained_summary.csv", two / "y.csv")
    with pytest.raises(ReportError, match="several vaitrace-csv reports"):
        ingest([str(two)])
    bad = tmp_path / "bad"
    bad.mkdir()
    shutil.copy(FIX / "vaitrace_truncated.csv", bad / "profile_summary.csv")
    with pytest.raises(ReportError, match="truncated"):  # a recognised but corrupt report is not skipped
        ingest([str(bad)])
    with pytest.raises(UnknownLayoutError):
        ingest([str(FIX / "unknown_layout.csv")])


def test_fine_grained_job_gives_layer_records(tmp_path):
    r = VitisRunner(workdir=str(tmp_path), fine_grained=True)
    job = Path(r.prepare(_model()))
    assert json.loads((job / "job.json").read_text())["fine_grained"] is True
    assert 'FINE_GRAINED="${FINE_GRAINED:-1}"' in (job / "params.env").read_text()
    (job / "reports").mkdir()
    shutil.copy(FIX / "vaitrace_fine_grained_summary.csv", job / "reports" / "profile_summary.csv")
    (_, recs), = ingest([str(job)])
    assert [x.node_type for x in recs] == ["dpu-layer"] * 4


# ------------------------------------------------------------------- scripts against tool stand-ins

_FAKE_VAI_Q = '''
import shutil
class _NS:
    def __getattr__(self, k):
        return k
QuantFormat = PowerOfTwoMethod = QuantType = CalibrationMethod = _NS()
def quantize_static(src, dst, reader, **kw):
    n = 0
    while True:
        d = reader.get_next()
        if d is None:
            break
        assert d["x"].shape == (1, 3, 8, 8), d["x"].shape
        n += 1
    assert n > 0 and kw["enable_dpu"] is True
    shutil.copy(src, dst)
'''
_FAKE_VART = '''
class _T:
    dims = [1, 8, 8, 3]
    dtype = "xint8"
class _R:
    def get_input_tensors(self): return [_T()]
    def get_output_tensors(self): return [_T()]
    def execute_async(self, i, o):
        assert i[0].dtype.name == "int8"
        return (1, 0)
    def wait(self, job): return 0
class Runner:
    @staticmethod
    def create_runner(sg, mode):
        assert mode == "run"
        return _R()
'''
_FAKE_XIR = '''
class _S:
    is_leaf = False
    def toposort_child_subgraph(self): return [_D("subgraph_r"), _C()]
class _D:
    def __init__(self, n): self.n = n
    def has_attr(self, k): return True
    def get_attr(self, k): return "DPU"
    def get_name(self): return self.n
class _C(_D):
    def __init__(self): self.n = "subgraph_cpu"
    def get_attr(self, k): return "CPU"
class Graph:
    @staticmethod
    def deserialize(p):
        open(p).read()
        g = Graph(); return g
    def get_root_subgraph(self): return _S()
'''
_FAKE_VAI_C_XIR = '''#!/bin/sh
echo "$@" > vai_c_xir.args
while [ $# -gt 0 ]; do
  case "$1" in -x) X=$2; shift;; -a) A=$2; shift;; -o) O=$2; shift;; -n) N=$2; shift;; esac; shift
done
test -f "$X" && test -f "$A" && mkdir -p "$O" && echo xmodel > "$O/$N.xmodel"
'''
_FAKE_VAITRACE = '''#!/bin/sh
echo "$@" > vaitrace.args
OUT=""
while [ $# -gt 0 ]; do
  case "$1" in -t) shift;; -o) OUT=$2; shift;; -p|--txt_summary|--fine_grained) ;; *) break;; esac; shift
done
python3 "$@" || exit 1
cp "$FIXDIR/vaitrace_profile_summary.csv" profile_summary.csv
cp "$FIXDIR/vaitrace_summary.txt" "$OUT"
'''


@pytest.mark.skipif(not shutil.which("bash"), reason="needs bash and sh")
def test_job_scripts_run_against_tool_stand_ins(tmp_path):
    """host.sh and board.sh end to end with stand-ins for vai_q_onnx, vai_c_xir, vaitrace, VART and XIR:
    checks the scripts' plumbing (arguments, files, folders), not the vendor tools."""
    bin_dir, py_dir = tmp_path / "bin", tmp_path / "py"
    bin_dir.mkdir()
    py_dir.mkdir()
    (py_dir / "vai_q_onnx.py").write_text(_FAKE_VAI_Q)
    (py_dir / "vart.py").write_text(_FAKE_VART)
    (py_dir / "xir.py").write_text(_FAKE_XIR)
    (py_dir / "onnxruntime").mkdir()  # quantize.py's base class; keeps the test independent of onnxruntime
    (py_dir / "onnxruntime" / "__init__.py").write_text("")
    (py_dir / "onnxruntime" / "quantization.py").write_text("class CalibrationDataReader:\n    pass\n")
    for name, body in {"vai_c_xir": _FAKE_VAI_C_XIR, "vaitrace": _FAKE_VAITRACE,
                       "python3": f'#!/bin/sh\nexec "{sys.executable}" "$@"\n'}.items():
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    r = VitisRunner(arch="DPUCZDX8G_ISA1_B2304", workdir=str(tmp_path / "jobs"))  # job's own arch.json
    job = Path(r.prepare(_model()))
    with pytest.raises(BoardRequiredError):
        r.profile(str(job), iterations=4, warmup=2)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(py_dir),
           "FIXDIR": str(FIX)}
    host = subprocess.run(["bash", str(job / "host.sh")], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert host.returncode == 0, host.stderr
    assert (job / "compiled" / "smallnet.xmodel").is_file() and (job / "quantized.onnx").is_file()
    assert (job / "vai_c_xir.args").read_text().split() == [
        "-x", "quantized.onnx", "-a", "arch.json", "-o", "compiled", "-n", "smallnet"]
    board = subprocess.run(["sh", str(job / "board.sh")], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert board.returncode == 0, board.stderr
    args = (job / "reports" / "vaitrace.args").read_text().split()
    assert args[:5] == ["-p", "-t", "300", "--txt_summary", "-o"] and "../run_dpu.py" in args
    timing = json.loads((job / "reports" / "vart_timing.json").read_text())
    assert timing["iterations"] == 4 and timing["warmup"] == 2 and timing["traced"] is True
    assert list(timing["subgraphs"]) == ["subgraph_r"] and len(timing["e2e_ms"]) == 4  # CPU subgraph skipped
    prof = r.profile(str(job))  # reports now present: parsed (summary CSV preferred over the text summary)
    assert prof.meta["format"] == "vaitrace-csv" and prof.e2e_ms.size == 4
    no_trace = subprocess.run(["sh", str(job / "board.sh")], env={**env, "NO_TRACE": "1", "ITERATIONS": "3"},
                              capture_output=True, text=True, cwd=tmp_path)
    assert no_trace.returncode == 0, no_trace.stderr
    (name, recs), = ingest([str(job)])
    assert name == "smallnet" and recs[0].node == "subgraph_r" and recs[0].extra["runs"] == 3


def test_collect_keeps_job_folder_and_report():
    from annette_torch.bench.runners.vitis import collect
    run, = collect([str(FIX / "job_smallcnn" / "reports" / "vart_trace.csv")])
    assert run.name == "smallcnn" and run.job_dir == FIX / "job_smallcnn"
    assert run.report.format == "vaitrace-vtf" and run.records is run.report.records
    loose, = collect(str(FIX / "dnndk_two_kernels.log"))
    assert loose.job_dir is None and loose.report.e2e_ms.size == 2


def test_bare_summary_table_and_foreign_job_json(tmp_path):
    text = (FIX / "vaitrace_profile_summary.csv").read_text().split("DPU Summary\n", 1)[1]
    assert dr.detect_format(text) == "vaitrace-csv"
    assert len(dr.parse_text(text).records) == 2
    d = tmp_path / "run1"
    d.mkdir()
    (d / "job.json").write_text('{"some": "other tool"}')  # not ours: ignored, not an error
    (d / "profile_summary.csv").write_text(text)
    assert ingest([str(d)])[0][0] == "run1"


def test_write_run_params(tmp_path):
    from annette_torch.bench.runners.vitis import write_run_params
    job = VitisRunner(workdir=str(tmp_path)).prepare(_model())
    write_run_params(job, iterations=7, warmup=0)
    assert 'ITERATIONS="${ITERATIONS:-7}"' in (Path(job) / "params.env").read_text()
    VitisRunner(workdir=str(tmp_path)).prepare(_model())  # preparing again keeps the chosen counts
    assert json.loads((Path(job) / "job.json").read_text())["iterations"] == 7
