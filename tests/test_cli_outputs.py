"""Every output option of the CLI refuses a missing folder in one line before any work, and charts are written in
the format their extension names (.png, .pdf, .svg; any other extension is one error line)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from annette_torch.cli.app import main
from annette_torch.cli.common import check_output, check_output_store
from annette_torch.errors import AnnetteError
from annette_torch.plots import PLOT_FORMATS, plot_format

needs_optuna = pytest.mark.skipif(importlib.util.find_spec("optuna") is None, reason="optuna not installed")

PNG, PDF = b"\x89PNG\r\n\x1a\n", b"%PDF"


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(code: int, out: str, err: str, *fragments: str) -> str:
    assert code != 0, out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("annette: error: "), err
    assert "Traceback" not in out + err
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    return lines[0]


# (argv with M for the missing folder and T for an existing one, the option the error names)
MISSING_FOLDER_CASES = [
    (["estimate", "tiny_cnn", "--csv", "M/x.csv"], "--csv"),
    (["estimate", "tiny_cnn", "--plot", "M/x.png"], "--plot"),
    (["bench", "export", "--db", "T/none.sqlite", "--out", "M/x.csv"], "--out"),
    (["bench", "-p", "ort-cpu", "-s", "conv", "--db", "M/x.sqlite"], "--db"),
    (["bench", "-p", "zcu102-dnndk", "-s", "conv", "--db", "T/s.sqlite", "--jobs-dir", "M/jobs"], "--jobs-dir"),
    (["bench", "ingest", "--db", "M/x.sqlite", "T"], "--db"),
    (["calibrate", "-p", "ort-cpu", "--db", "M/x.sqlite"], "--db"),
    (["calibrate", "-p", "ort-cpu", "--db", "T/s.sqlite", "--out", "M/p.json"], "--out"),
    (["adapt", "-p", "zcu102-dnndk", "--latencies", "T/none.csv", "--out", "M/p.json"], "--out"),
    (["pareto", "--out", "M/x.png"], "--out"),
    (["pareto", "--out", "T/x.png", "--csv", "M/x.csv"], "--csv"),
    (["pareto", "--out", "M/x.png", "--csv", "T/x.csv"], "--out"),
    pytest.param(["search", "--space", "nb201", "--latency-ms", "1", "--trials", "1", "--out", "M/x.csv"], "--out",
                 marks=needs_optuna),
    pytest.param(["search", "--space", "nb201", "--latency-ms", "1", "--trials", "1", "--storage",
                  "sqlite:///M/x.db"], "--storage", marks=needs_optuna),
    pytest.param(["search", "--space", "nb201", "--latency-ms", "1", "--trials", "1", "--storage",
                  "journal:M/x.log"], "--storage", marks=needs_optuna),
]


@pytest.mark.parametrize("argv, option", MISSING_FOLDER_CASES)
def test_every_output_option_refuses_a_missing_folder(capsys, tmp_path, argv, option):
    missing = tmp_path / "missing" / "deeper"
    here = tmp_path / "here"
    here.mkdir()
    args = [a.replace("M/", f"{missing}/").replace("T/", f"{here}/") if a.startswith(("M/", "T/", "sqlite:///",
                                                                                       "journal:")) else a
            for a in argv]
    args = [str(here) if a == "T" else a for a in args]
    code, out, err = run(capsys, *args)
    line = one_error_line(code, out, err, f"{option} ", "does not exist", str(missing))
    assert code == 1, line
    assert not (tmp_path / "missing").exists()  # no folder created
    assert list(here.iterdir()) == []  # and nothing written: refused before any work


@pytest.mark.parametrize("argv", [
    ["estimate", "tiny_cnn", "--plot", "T/x.jpg"],
    ["estimate", "tiny_cnn", "--plot", "T/x"],
    ["estimate", "tiny_cnn", "--plot", "T/x.png.bak"],
    ["pareto", "--out", "T/x.gif"],
])
def test_an_unknown_chart_extension_is_one_error_line(capsys, tmp_path, argv):
    args = [a.replace("T/", f"{tmp_path}/") for a in argv]
    code, out, err = run(capsys, *args)
    one_error_line(code, out, err, "unknown chart format", ".png, .pdf or .svg")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name, magic", [("c.png", PNG), ("c.PNG", PNG), ("c.pdf", PDF), ("c.svg", b"<svg")])
def test_estimate_plot_writes_the_format_its_extension_names(capsys, tmp_path, name, magic):
    path = tmp_path / name
    code, out, err = run(capsys, "estimate", "tiny_cnn", "-p", "zcu102-dnndk,ncs2", "--plot", path)
    assert code == 0, err
    data = path.read_bytes()
    assert (magic in data[:400]) if magic == b"<svg" else data.startswith(magic), data[:40]
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no temporary file left beside it


def test_library_charts_refuse_a_missing_folder_and_create_none(tmp_path):
    from annette_torch import estimate, zoo
    from annette_torch.frontends.fx import trace
    from annette_torch.plots import plot_breakdown, plot_pred_vs_measured

    net = trace(zoo.get("tiny_cnn"), zoo.INPUT_SHAPES["tiny_cnn"], name="tiny_cnn")
    with pytest.raises(AnnetteError, match="does not exist"):
        plot_breakdown(estimate(net, "zcu102-dnndk"), tmp_path / "sub" / "x.png")
    with pytest.raises(AnnetteError, match="unknown chart format"):
        plot_pred_vs_measured({"a": ([1.0, 2.0], [1.1, 2.1])}, tmp_path / "x.bmp")
    assert list(tmp_path.iterdir()) == []
    assert Path(plot_pred_vs_measured({"a": ([1.0, 2.0], [1.1, 2.1])}, tmp_path / "x.pdf")).read_bytes()[:4] == PDF


@given(stem=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/\\\x00."), min_size=1,
                    max_size=12),
       ext=st.one_of(st.sampled_from(["png", "PDF", "Svg", "jpg", "", "png.tmp", "p ng"]),
                     st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/\\\x00"),
                             max_size=6)))
@settings(max_examples=200, deadline=None)
def test_plot_format_accepts_exactly_the_three_extensions(stem, ext):
    path = f"{stem}.{ext}" if ext else stem
    want = Path(path).suffix.lower().lstrip(".")
    if want in PLOT_FORMATS:
        assert plot_format(path) == want
    else:
        with pytest.raises(AnnetteError, match="unknown chart format") as e:
            plot_format(path)
        assert "\n" not in str(e.value) or "\n" in path


@pytest.mark.parametrize("target, refused", [
    ("postgresql://u:p@host/db", False),  # a server: not a local folder
    ("sqlite://", False),                # in memory
    ("sqlite:///:memory:", False),
    ("sqlite:///{m}/x.db", True),
    ("journal:{m}/x.log", True),
    ("{m}/x.sqlite", True),
    ("{t}/x.sqlite", False),
    ("journal:{t}/x.log", False),
])
def test_check_output_store(tmp_path, target, refused):
    target = target.format(m=tmp_path / "missing", t=tmp_path)
    if refused:
        with pytest.raises(AnnetteError, match=r"^--db .*does not exist"):
            check_output_store(target, "--db")
    else:
        check_output_store(target, "--db")


def test_check_output_names_the_option_and_accepts_an_existing_folder(tmp_path):
    check_output(tmp_path / "a.csv", "--csv")
    check_output(None, "--csv")
    with pytest.raises(AnnetteError, match=r"^--csv .*is a folder"):
        check_output(tmp_path, "--csv")
