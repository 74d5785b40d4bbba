"""The environment variables the package reads are documented (docs/cli.md), and `annette bench` names
$ANNETTE_REFERENCE_DIR in its --help and uses it for --list."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from annette_torch.cli.app import main

ROOT = Path(__file__).resolve().parents[1]


def _environment_variables() -> set[str]:
    """Every ANNETTE_* / XDG_* name the package and search/ read from the environment."""
    names = set()
    for folder in (ROOT / "annette_torch", ROOT / "search"):
        for path in folder.rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            names |= set(re.findall(r"environ(?:\.get)?\s*[(\[]\s*\"([A-Z_]+)\"", text))
            names |= set(re.findall(r"^[A-Z_]+_ENV\s*=\s*\"([A-Z_]+)\"", text, re.M))
    return names


def test_every_environment_variable_is_documented():
    names = _environment_variables()
    assert {"ANNETTE_REFERENCE_DIR", "ANNETTE_HOME", "ANNETTE_DB", "ANNETTE_LOCK_DIR"} <= names
    docs = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert {n for n in names if f"`{n}`" not in docs} == set()


def test_bench_help_names_the_reference_folder_variable(capsys):
    from annette_torch.bench.suites.reference import REFERENCE_ENV
    from annette_torch.cli import bench

    assert bench.REFERENCE_ENV == REFERENCE_ENV
    assert main(["bench", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"${REFERENCE_ENV}" in out and "paper_conv" in out and "--list" in out


@pytest.fixture
def fresh_paper_suite(monkeypatch):
    """The paper_conv suite without the row count it cached (restored afterwards, for the other tests)."""
    from annette_torch.bench.suites import SUITES

    monkeypatch.setattr(SUITES["paper_conv"], "_counts", {})


def test_bench_list_reads_the_paper_table_from_the_reference_folder(capsys, monkeypatch, tmp_path, fresh_paper_suite):
    configs = tmp_path / "ref" / "benchmark-configs"
    configs.mkdir(parents=True)
    rows = ["width,height,channels,filters,k_size,batch_size"] + [f"{8 * i},{8 * i},3,8,3,1" for i in range(1, 8)]
    (configs / "paper35k.csv").write_text("\n".join(rows) + "\n")
    monkeypatch.setenv("ANNETTE_REFERENCE_DIR", str(tmp_path / "ref"))
    assert main(["bench", "--list"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("paper_conv"))
    assert "[micro; 7 rows]" in line


def test_bench_list_without_reference_data_says_which_variable_to_set(capsys, monkeypatch, fresh_paper_suite):
    from annette_torch.bench.suites import paper, reference

    for module in (reference, paper):  # no reference data anywhere (paper.py caches its rows per folder)
        monkeypatch.setattr(module, "reference_dir", lambda: None)
    assert main(["bench", "--list"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("paper_conv"))
    assert "unavailable" in line and "$ANNETTE_REFERENCE_DIR" in line


def test_demo_finds_graphs_through_the_reference_folder(monkeypatch, tmp_path):
    from annette_torch.cli.demo import find_reference_graphs

    (tmp_path / "graphs").mkdir()
    monkeypatch.setenv("ANNETTE_REFERENCE_DIR", str(tmp_path))
    assert find_reference_graphs() == tmp_path / "graphs"
