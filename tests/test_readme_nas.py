"""The README's architecture-search examples run as written (each python block of the section, in order,
in one namespace), and the training-loop example lowers the expected latency."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("optuna")
pytest.importorskip("torch")

README = Path(__file__).resolve().parents[1] / "README.md"


def _blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Architecture search", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_the_section_has_the_examples():
    blocks = _blocks()
    assert len(blocks) >= 4
    joined = "\n".join(blocks)
    for name in ("LatencyConstraint", "from_supernet", "LatencyTable.build", "latency_constrained_search"):
        assert name in joined


@pytest.mark.slow
def test_readme_nas_examples_run_as_written(capsys):
    import torch

    torch.manual_seed(0)
    ns: dict = {}
    for i, code in enumerate(_blocks()):
        before = ns.get("table")
        if "for step in range" in code:
            alpha0 = torch.zeros(ns["table"].lat.shape)
            start = float(ns["table"].expected(alpha0))
        exec(compile(code, f"README.md[architecture search block {i}]", "exec"), ns)  # noqa: S102
        if "for step in range" in code:
            end = float(ns["table"].expected(ns["alpha"].detach()))
            assert ns["table"] is before
            assert end < start, (start, end)  # the latency term pulled the expected latency down
    study = ns["study"]
    assert all("latency_ms" in t.user_attrs for t in study.trials)
    out = capsys.readouterr().out
    assert "expected latency" in out
