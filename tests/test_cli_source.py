"""The CLI package carries no dead code: every private top-level function is used, and every section header
of a module heads some code (no empty sections left behind by removed shims)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

CLI = Path(__file__).resolve().parents[1] / "annette_torch" / "cli"
MODULES = sorted(CLI.glob("*.py"))


def test_every_private_function_of_the_cli_is_used():
    texts = {p: p.read_text(encoding="utf-8") for p in MODULES}
    unused = []
    for path, text in texts.items():
        for node in ast.parse(text).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name.startswith("_") \
                    and not node.name.startswith("__"):
                uses = sum(len(re.findall(rf"\b{node.name}\b", t)) for t in texts.values())
                if uses < 2:  # only its own definition
                    unused.append(f"{path.name}: {node.name}")
    assert unused == []


def test_no_empty_sections():
    rule = "# " + "-" * 20
    for path in MODULES:
        lines = path.read_text(encoding="utf-8").splitlines()
        heads = [i for i, line in enumerate(lines) if line.startswith(rule)]
        for k, i in enumerate(heads):
            end = heads[k + 1] if k + 1 < len(heads) else len(lines)
            body = [ln for ln in lines[i + 2:end] if ln.strip() and not ln.lstrip().startswith("#")]
            assert body, f"{path.name}:{i + 2}: section {lines[i + 1].strip()!r} is empty"
