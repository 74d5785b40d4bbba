"""The wheel holds every package of the source tree (the package list in pyproject.toml is explicit)."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = None

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(tomllib is None, reason="tomllib needs Python >= 3.11")
def test_every_package_folder_is_listed_in_pyproject():
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    listed = set(cfg["packages"])
    dirs = {"annette_torch": ROOT / "annette_torch", **{k: ROOT / v for k, v in cfg["package-dir"].items()}}
    found = set()
    for pkg, folder in dirs.items():
        for init in folder.rglob("__init__.py"):
            rel = init.parent.relative_to(folder).parts
            found.add(".".join([pkg, *rel]))
    assert found - listed == set()
    assert listed - found == set()


@pytest.mark.skipif(tomllib is None, reason="tomllib needs Python >= 3.11")
def test_the_wheel_marks_the_package_typed():
    """``py.typed`` (PEP 561) makes type checkers read the installed package's annotations."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    assert "py.typed" in cfg["package-data"]["annette_torch"]
    assert (ROOT / "annette_torch" / "py.typed").is_file()
