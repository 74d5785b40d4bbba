"""docs/search-spaces.md holds true: its CSV rows load, its python blocks run as written and print what they say."""

from __future__ import annotations

import re
from pathlib import Path

from annette_torch.fit.adapt import read_latencies
from annette_torch.search.spaces import nb201

DOC = Path(__file__).resolve().parents[1] / "docs" / "search-spaces.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def test_the_index_comments_are_the_benchmarks_pairs():
    code = _blocks("python")[0]
    to_index = re.findall(r'arch_to_index\("([^"]+)"\)\s+#\s*(\d+)', code)
    to_arch = re.findall(r"index_to_arch\((\d+)\)\s+#\s*'([^']+)'", code)
    assert to_index and to_arch
    for arch, index in to_index:
        assert nb201.arch_to_index(arch) == int(index)
    for index, arch in to_arch:
        assert nb201.index_to_arch(int(index)) == arch


def test_the_example_rows_load_with_the_names_the_page_shows(tmp_path):
    (csv_text,) = _blocks("csv")
    path = tmp_path / "lat.csv"
    path.write_text(csv_text)
    names = [r[0] for r in read_latencies(path)]
    text = DOC.read_text(encoding="utf-8")
    shown = re.search(r"\(`(nb201#\d+:\d+)`\)", text).group(1)
    assert shown in names


def test_the_python_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for code in _blocks("python"):
        exec(compile(code, str(DOC), "exec"), {})
    assert (tmp_path / "my-board.json").is_file()
