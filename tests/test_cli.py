"""Command line (`annette_torch.cli.main`, in-process and as a real process) and the breakdown chart."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn as nn

from annette_torch.cli.app import main

GRAPHS = Path(__file__).resolve().parents[1].parent / "shared" / "annette-reference" / "graphs"
RESNET50_JSON = GRAPHS / "cf_resnet50.json"
needs_graphs = pytest.mark.skipif(not RESNET50_JSON.is_file(), reason="annette-reference graphs not available")


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(torch.relu(self.bn(self.conv(x)))), 1))


@pytest.fixture(scope="module")
def tiny_onnx(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("onnx") / "tiny.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Tiny().eval(), torch.zeros(1, 3, 32, 32), str(path), dynamo=False, opset_version=17)
    return path


@pytest.fixture(scope="module")
def dynamic_onnx(tmp_path_factory) -> Path:
    """The tiny model exported with dynamic height and width, so --input-shape may set them."""
    path = tmp_path_factory.mktemp("onnx") / "tiny_dynamic.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Tiny().eval(), torch.zeros(1, 3, 32, 32), str(path), dynamo=False, opset_version=17,
                          input_names=["x"], dynamic_axes={"x": {2: "h", 3: "w"}})
    return path


@pytest.fixture
def user_models(tmp_path, monkeypatch) -> str:
    """An importable module of user model factories; returns its module name."""
    name = "annette_cli_test_models"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent("""
        import torch, torch.nn as nn

        class Odd(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 8, 3)

            def forward(self, x):
                return torch.logcumsumexp(self.conv(x), 1)   # no layer model -> Unknown

        def tiny():
            return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())

        def odd():
            return Odd()

        def folded():
            return nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten(2), nn.Fold((14, 14), 1))   # col2im: no ONNX export

        def broken():
            raise RuntimeError("checkpoint missing")

        def not_a_model():
            return 42
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return name


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, out: str, err: str, *fragments: str) -> None:
    assert code != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("annette: error: "), err
    assert "Traceback" not in err + out
    for f in fragments:
        assert f in lines[0], (f, err)


# ------------------------------------------------------------------------------------------------------
# estimate


@needs_graphs
def test_estimate_annette_graph_summary(capsys):
    code, out, err = run(capsys, "estimate", RESNET50_JSON, "--platform", "zcu102-dnndk")
    assert code == 0, err
    assert "cf_resnet50" in out and "zcu102-dnndk" in out
    line = {ln.split()[0]: ln for ln in out.splitlines() if ln.strip() and not ln.startswith(" ")}
    latency, device = float(line["latency"].split()[1]), float(line["device"].split()[1])
    assert latency > device > 0  # whole-application latency: the DPU's time plus the host's
    assert "whole-application latency" in line["latency"] and line["file"].endswith("zcu102-dnndk.json")
    assert "by type" in out and "Conv" in out
    assert err == ""


@needs_graphs
def test_estimate_json_layers_sum_to_total(capsys):
    code, out, err = run(capsys, "estimate", RESNET50_JSON, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["platform"] == "zcu102-vai3" and d["network"] == "cf_resnet50"  # (zcu102, the default: Vitis AI)
    assert d["device_ms"] > 0
    assert sum(r["time_ms"] for r in d["layers"]) == pytest.approx(d["device_ms"], rel=1e-9)
    assert {"name", "type", "time_ms", "model", "fused_into"} <= set(d["layers"][0])


def test_estimate_zoo_name_several_platforms_json(capsys):
    code, out, err = run(capsys, "estimate", "tiny_resnet", "--platform", "zcu102-dnndk,ncs2", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert [e["platform"] for e in d["estimates"]] == ["zcu102-dnndk", "ncs2"]
    for e in d["estimates"]:
        assert e["network"] == "tiny_resnet"
        assert sum(r["time_ms"] for r in e["layers"]) == pytest.approx(e["device_ms"], rel=1e-9)
    assert d["estimates"][0]["device_ms"] != d["estimates"][1]["device_ms"]


def test_estimate_zoo_name_per_layer_table(capsys):
    code, out, err = run(capsys, "estimate", "tiny_cnn", "-p", "ncs2", "-p", "zcu102-dnndk", "--per-layer")
    assert code == 0, err
    header = next(line for line in out.splitlines() if line.startswith("name"))
    # both platforms declare operator support: the table says where each layer runs
    assert header.split() == ["name", "type", "out", "shape", "MOPs", "time_ms", "model", "fused_into", "runs", "on"]
    assert out.count("# tiny_cnn on") == 2
    assert "host      0 of " in out
    assert "fastest" in out


def test_estimate_onnx_file_with_csv(capsys, tiny_onnx, tmp_path):
    csv_path = tmp_path / "layers.csv"
    code, out, err = run(capsys, "estimate", tiny_onnx, "--csv", csv_path)
    assert code == 0, err
    assert "tiny" in out
    lines = csv_path.read_text().splitlines()
    assert lines[0].startswith("name,type,")
    assert len(lines) > 3


def test_onnx_input_shape_override(capsys, dynamic_onnx):
    _, out_small, _ = run(capsys, "estimate", dynamic_onnx, "--input-shape", "1,3,32,32", "--json")
    code, out_big, err = run(capsys, "estimate", dynamic_onnx, "--input-shape", "1,3,64,64", "--json")
    assert code == 0, err
    assert json.loads(out_big)["device_ms"] > json.loads(out_small)["device_ms"]


def test_onnx_input_shape_conflicting_with_a_static_dimension_is_one_error(capsys, tiny_onnx):
    code, out, err = run(capsys, "estimate", tiny_onnx, "--input-shape", "1,3,64,64")
    assert code != 0 and out == ""
    assert err.count("\n") == 1 and "static shape [1, 3, 32, 32]" in err and "Traceback" not in err


def test_module_callable(capsys, user_models):
    code, out, err = run(capsys, "estimate", f"{user_models}:tiny", "--input-shape", "1,3,16,16", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["network"] == "tiny" and d["device_ms"] > 0


def test_json_output_stays_json_when_a_layer_cannot_be_exported(capfd, user_models):
    """torch prints the whole TorchScript graph to the process's standard output when an export fails (here the
    export of a call the fx front end tries to recover its layers from): ``--json`` still prints one JSON object."""
    code, out, err = run(capfd, "estimate", f"{user_models}:folded", "-i", "1,3,16,16", "-p", "ort-cpu", "--json")
    assert code == 0, err
    assert json.loads(out)["latency_ms"] > 0
    assert "Torch IR graph" not in out + err and "Fold" in err


def test_library_warning_shown_once_as_annette_warning(capsys, user_models):
    code, out, err = run(capsys, "estimate", f"{user_models}:odd", "-i", "1,3,16,16", "-p", "zcu102-dnndk,ncs2")
    assert code == 0, err
    warn = [line for line in err.splitlines() if line.startswith("annette: warning:")]
    assert len(warn) == 1 and "logcumsumexp" in warn[0], err
    # the summary of each platform says so too: flagged, since both declare which operators they run
    assert out.count("flagged   1 layer(s) of unknown type (logcumsumexp)") == 2
    # and the latency line itself carries the caveat
    assert out.count("; includes 1 layer(s) of unknown type, estimated from tensor sizes only") == 2


# ------------------------------------------------------------------------------------------------------
# platforms and errors


def _platform_heads(out: str) -> list[str]:
    """The one line per platform that `annette platforms` starts with (before the files table)."""
    listing = out.split("\nfiles (")[0]
    return [line for line in listing.splitlines() if line and not line.startswith(" ")]


def _file_rows(out: str) -> list[list[str]]:
    """The rows of the files table: [mark, platform, origin, this machine?, file]."""
    table = out.split("\nfiles (")[1].splitlines()[2:]
    rows = []
    for line in table:
        mark, rest = line[:2].strip(), line[3:]
        cells = [c for c in rest.split("  ") if c.strip()]
        rows.append([mark, *(c.strip() for c in cells)])
    return rows


def test_platforms(capsys):
    from annette_torch.estimator import latency_definition
    from annette_torch.platform import load_platform

    code, out, err = run(capsys, "platforms")
    assert code == 0, err
    heads = _platform_heads(out)
    names = [line.split()[0] for line in heads]
    assert "zcu102-dnndk" in names and "ncs2" in names
    assert all(len(line.split(None, 1)) == 2 and len(line) <= 130 for line in heads)  # one short line each
    for name in names:  # what latency_ms is on each platform, not what its description says it predicts
        assert f"latency_ms: {latency_definition(load_platform(name))}" in out
    assert "predicts DPU execution time" not in out
    assert "latency_ms: whole-application latency" in out
    rows = _file_rows(out)
    picked = [r for r in rows if r[0] == "->"]
    from annette_torch.platform import alias_of
    files = sorted(n for n in names if alias_of(n) is None)  # (an alias, zcu102, has no file of its own)
    assert sorted(r[1] for r in picked) == files and "zcu102" in names  # one file loaded per name
    assert all(r[4].endswith(".json") for r in rows)
    assert {r[3] for r in rows} <= {"yes", "no", "n/a (board model)", "yes (ISA not recorded)"}
    assert [r[3] for r in rows if r[1] == "zcu102-dnndk"] == ["n/a (board model)"]
    assert "may not be this machine" not in out


def test_platforms_full_and_json_keep_the_whole_description(capsys):
    from annette_torch.platform import list_platforms

    long_name, long_desc = max(list_platforms().items(), key=lambda kv: len(kv[1]))
    code, out, err = run(capsys, "platforms")
    assert code == 0, err
    assert len(long_desc) > 200 and long_desc not in out
    code, out, err = run(capsys, "platforms", "--full")
    assert code == 0, err
    assert " ".join(long_desc.split()) in " ".join(out.split())
    code, out, err = run(capsys, "platforms", "--json")
    d = json.loads(out)
    assert d["platforms"][long_name] == long_desc
    assert set(d["latency_definitions"]) == set(d["platforms"])
    assert {f["this_machine"] for f in d["files"]} <= {"yes", "no", "n/a (board model)", "yes (ISA not recorded)"}


def test_platforms_this_machine_answers_follow_the_machine_check(monkeypatch):
    from annette_torch.cli.app import _this_machine
    from annette_torch.platform import machine

    monkeypatch.setattr(machine, "machine_fingerprint", lambda: {"cpu": "Other CPU", "cores": 64, "isa": ["avx2"]})
    f = SimpleNamespace(machine=machine.mismatch("x", {"cpu": "Some CPU", "cores": 2, "isa": ["avx2"]}))
    assert _this_machine(f) == "no"
    f = SimpleNamespace(machine=machine.mismatch("x", {"cpu": "Other CPU", "cores": 64}))
    assert _this_machine(f) == "yes (ISA not recorded)"
    f = SimpleNamespace(machine=machine.mismatch("x", {"cpu": "Other CPU", "cores": 64, "isa": ["avx2"]}) or "")
    assert _this_machine(f) == "yes"
    assert _this_machine(SimpleNamespace(machine=None)) == "n/a (board model)"


def test_platforms_lists_user_files_first_and_the_name_loads_them(capsys, monkeypatch, tmp_path):
    import annette_torch as at

    monkeypatch.setenv("ANNETTE_HOME", str(tmp_path))
    (tmp_path / "platforms").mkdir()
    d = at.load_platform("ncs2").to_dict()
    d["description"] = "my own stick"
    (tmp_path / "platforms" / "ncs2.json").write_text(json.dumps(d))
    code, out, err = run(capsys, "platforms")
    assert code == 0, err
    assert ["->", "ncs2", "user", "n/a (board model)", str(tmp_path / "platforms" / "ncs2.json")] in _file_rows(out)
    assert "ncs2          my own stick" in out
    est = at.estimate(at.from_annette_json(RESNET50_JSON), "ncs2") if os.path.exists(RESNET50_JSON) else None
    assert at.load_platform("ncs2").source == str(tmp_path / "platforms" / "ncs2.json")
    if est is not None:
        assert est.to_dict(per_layer=False)["platform_file"] == str(tmp_path / "platforms" / "ncs2.json")
    code, out, err = run(capsys, "platforms", "--json")
    files = json.loads(out)["files"]
    assert [f["origin"] for f in files if f["name"] == "ncs2"] == ["user", "shipped"]
    assert [f["selected"] for f in files if f["name"] == "ncs2"] == [True, False]


@pytest.mark.parametrize("argv, fragment, code", [
    (["estimate", "no/such/model.onnx"], "no such file", 1),
    (["estimate", "tiny_cnn", "--platform", "tpu9000"], "unknown platform 'tpu9000'", 1),
    (["estimate", "tiny_cnn", "--input-shape", "1,3,x"], "--input-shape", 2),
    (["estimate", "tiny_cnn", "--input-shape", "0,3,224,224"], "positive", 2),
    (["estimate", "no_such_model_name"], "unknown model", 1),
    (["estimate"], "MODEL", 2),
    (["frobnicate"], "unknown command 'frobnicate' (choose from estimate, platforms", 2),
])
def test_errors_are_one_line(capsys, argv, fragment, code):
    got, out, err = run(capsys, *argv)
    assert got == code
    assert_one_line_error(got, out, err, fragment)


def test_truncated_onnx(capsys, tiny_onnx, tmp_path):
    bad = tmp_path / "truncated.onnx"
    bad.write_bytes(tiny_onnx.read_bytes()[:200])
    got, out, err = run(capsys, "estimate", bad)
    assert got == 1
    assert_one_line_error(got, out, err, "truncated.onnx")


@needs_graphs
def test_malformed_annette_json(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(RESNET50_JSON.read_text()[:300])
    got, out, err = run(capsys, "estimate", bad)
    assert_one_line_error(got, out, err, "bad.json")


@pytest.mark.parametrize("suffix, fragment", [
    (":broken", "checkpoint missing"),
    (":not_a_model", "expected a torch.nn.Module"),
    (":no_such_factory", "no attribute"),
    (":tiny", "--input-shape"),  # no shape given and not a zoo name
])
def test_bad_module_callable(capsys, user_models, suffix, fragment):
    got, out, err = run(capsys, "estimate", user_models + suffix)
    assert got == 1
    assert_one_line_error(got, out, err, fragment)


def test_unimportable_module(capsys):
    got, out, err = run(capsys, "estimate", "no_such_package_xyz.models:net", "-i", "1,3,8,8")
    assert_one_line_error(got, out, err, "cannot import module 'no_such_package_xyz.models'")


# ------------------------------------------------------------------------------------------------------
# the real console entry point


def _cli(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "annette_torch.cli", *map(str, argv)], capture_output=True,
                          text=True, timeout=120, cwd=cwd, env=env)


def test_console_entry(tiny_onnx, tmp_path):
    ok = _cli("estimate", tiny_onnx, "--platform", "ncs2", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["platform"] == "ncs2"
    bad = _cli("estimate", tiny_onnx, "--platform", "nope", cwd=tmp_path)
    assert bad.returncode == 1
    assert bad.stderr.startswith("annette: error: unknown platform 'nope'")
    assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr


# ------------------------------------------------------------------------------------------------------
# plots


def test_plot_breakdown(tmp_path):
    from annette_torch import estimate, zoo
    from annette_torch.frontends.fx import trace
    from annette_torch.plots import plot_breakdown

    net = trace(zoo.get("tiny_resnet"), zoo.INPUT_SHAPES["tiny_resnet"], name="tiny_resnet")
    one = plot_breakdown(estimate(net, "zcu102-dnndk"), tmp_path / "one.png", top=5)
    both = plot_breakdown([estimate(net, "zcu102-dnndk"), estimate(net, "ncs2")], tmp_path / "both.png")
    for p in (one, both):
        data = Path(p).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_cli_plot_option(capsys, tmp_path):
    png = tmp_path / "chart.png"
    code, out, err = run(capsys, "estimate", "tiny_cnn", "-p", "zcu102-dnndk,ncs2", "--plot", png)
    assert code == 0, err
    assert png.stat().st_size > 5000 and str(png) in out


def test_calibrate_refuses_an_unwritable_output_before_measuring(capsys, tmp_path):
    """The platform file is written after an hour of measuring: a missing folder must fail at the start."""
    db = tmp_path / "store.sqlite"
    code, out, err = run(capsys, "calibrate", "--platform", "ort-cpu", "--db", db, "--out",
                         tmp_path / "missing" / "p.json")
    assert_one_line_error(code, out, err, "does not exist")
    assert not db.exists()  # nothing measured
    code, out, err = run(capsys, "calibrate", "--platform", "ort-cpu", "--db", db, "--out", tmp_path)
    assert_one_line_error(code, out, err, "is a folder")
