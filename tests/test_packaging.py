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
def test_every_data_file_in_a_package_is_listed_as_package_data():
    """A data file the code reads at run time (platform files, suite counts, the NB201 index) ships only
    when a package-data pattern of pyproject.toml names it."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    dirs = {"annette_torch": ROOT / "annette_torch", **{k: ROOT / v for k, v in cfg["package-dir"].items()}}
    unlisted = []
    for pkg in cfg["packages"]:
        top = max((p for p in dirs if pkg == p or pkg.startswith(p + ".")), key=len)
        folder = dirs[top].joinpath(*pkg[len(top):].split(".")[1:])
        patterns = cfg.get("package-data", {}).get(pkg, [])
        for f in folder.iterdir():
            if f.is_file() and f.suffix not in (".py", ".pyc") and not f.name.startswith("."):
                if not any(f.relative_to(folder).match(p) for p in patterns):
                    unlisted.append(f"{pkg}: {f.name}")
        for sub in folder.iterdir():  # data in sub-folders that are no packages (machines/<name>/*.json)
            if sub.is_dir() and not (sub / "__init__.py").exists() and sub.name != "__pycache__":
                for f in sub.rglob("*"):
                    if f.is_file() and not any(f.relative_to(folder).match(p) for p in patterns):
                        unlisted.append(f"{pkg}: {f.relative_to(folder)}")
    assert unlisted == []
    assert "nb201_index.npy" in cfg["package-data"]["annette_torch.search.spaces"]
