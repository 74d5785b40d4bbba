"""The README's examples run as written: every Python block of its Quickstart and Architecture search
sections (in order, one namespace per section) and the Quickstart's command lines; the user docs point at
no folder a user does not have."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def _section(title: str) -> str:
    """The README's text under the level-2 heading ``title``, up to the next level-2 heading."""
    text = README.read_text(encoding="utf-8")
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, flags=re.S | re.M)
    assert m, f"README has no '## {title}' section"
    return m.group(1)


def _blocks(section: str, lang: str) -> list[str]:
    """The fenced blocks of ``section`` whose info string is ``lang`` (``""``: plain fences)."""
    out: list[str] = []
    current: list[str] | None = None
    info = ""
    for line in section.splitlines():
        if line.startswith("```"):
            if current is None:
                current, info = [], line[3:].strip()
            else:
                if info == lang:
                    out.append("\n".join(current) + "\n")
                current = None
        elif current is not None:
            current.append(line)
    assert current is None, "unclosed code fence"
    return out


def _run(blocks: list[str], where: str) -> dict:
    ns: dict = {"__name__": "readme"}
    for i, code in enumerate(blocks):
        exec(compile(code, f"README.md[{where} block {i}]", "exec"), ns)  # noqa: S102 - the README's own code
    return ns


def test_the_sections_have_python_examples():
    assert len(_blocks(_section("Quickstart"), "python")) >= 2
    assert len(_blocks(_section("Architecture search"), "python")) >= 4


@pytest.mark.slow
def test_quickstart_runs_as_written(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    from annette_torch.cli import main

    monkeypatch.chdir(tmp_path)  # the example writes a CSV into the working directory
    section = _section("Quickstart")
    ns = _run(_blocks(section, "python"), "quickstart")
    assert (tmp_path / "resnet50_zcu102.csv").stat().st_size > 0
    est = ns["est"]
    # the figures the README quotes are the estimator's
    assert f"{est.latency_ms:.2f} ms" in section and f"{est.device_ms:.2f} ms" in section
    lines = [ln for block in _blocks(section, "") for ln in block.splitlines() if ln.startswith("annette ")]
    assert lines
    for line in lines:
        argv = shlex.split(line.split("#", 1)[0])[1:]
        assert main(argv) == 0, line
    assert "latency" in capsys.readouterr().out


@pytest.mark.slow
def test_architecture_search_runs_as_written(capsys):
    """Including the training loop, which must pull the expected latency down."""
    pytest.importorskip("optuna")
    torch = pytest.importorskip("torch")

    torch.manual_seed(0)
    ns: dict = {"__name__": "readme"}
    loops = 0
    for i, code in enumerate(_blocks(_section("Architecture search"), "python")):
        loop = "for step in range" in code
        if loop:
            table = ns["table"]
            start = float(table.expected(torch.zeros(table.lat.shape)))
        exec(compile(code, f"README.md[architecture search block {i}]", "exec"), ns)  # noqa: S102
        if loop:
            loops += 1
            assert ns["table"] is table
            assert float(table.expected(ns["alpha"].detach())) < start  # the latency term pulled it down
    assert loops == 1
    assert all("latency_ms" in t.user_attrs for t in ns["study"].trials)
    assert "expected latency" in capsys.readouterr().out


def test_user_docs_name_no_folder_outside_the_package():
    """A user has the package and its docs, not the developers' data folder beside the checkout."""
    docs = [README, *sorted((ROOT / "docs").glob("*.md"))]
    bad = [f"{p.name}:{i}" for p in docs for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
           if "../shared" in line]
    assert bad == []


def test_accuracy_page_stays_short():
    assert (ROOT / "docs" / "accuracy.md").stat().st_size <= 20_000
