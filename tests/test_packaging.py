"""The wheel holds every package of the source tree (the package list in pyproject.toml is explicit), the shipped
platform files and the ``py.typed`` marker, and building it raises no setuptools warning."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = None

import pytest

ROOT = Path(__file__).resolve().parents[1]
needs_tomllib = pytest.mark.skipif(tomllib is None, reason="tomllib needs Python >= 3.11")


def _setuptools_cfg() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]


def _folder(cfg: dict, pkg: str) -> Path:
    """The source folder of package ``pkg`` under the package-dir mapping."""
    for mapped, src in sorted(cfg["package-dir"].items(), key=lambda kv: -len(kv[0])):
        if pkg == mapped or pkg.startswith(mapped + "."):
            return ROOT / src / Path(*pkg[len(mapped):].strip(".").split(".") if pkg != mapped else ())
    return ROOT / Path(*pkg.split("."))


@needs_tomllib
def test_every_package_folder_is_listed_in_pyproject():
    cfg = _setuptools_cfg()
    listed = set(cfg["packages"])
    dirs = {"annette_torch": ROOT / "annette_torch", **{k: ROOT / v for k, v in cfg["package-dir"].items()}}
    found = set()
    for pkg, folder in dirs.items():
        for init in folder.rglob("__init__.py"):
            rel = init.parent.relative_to(folder).parts
            found.add(".".join([pkg, *rel]))
    assert found - listed == set()
    # a listed package without __init__.py holds data only: it must exist and name its files in package-data
    data_only = listed - found
    assert all(_folder(cfg, p).is_dir() and p in cfg["package-data"] for p in data_only), data_only


@needs_tomllib
def test_every_shipped_platform_file_is_named_in_package_data():
    cfg = _setuptools_cfg()
    shipped = {p.relative_to(ROOT / "platforms").as_posix() for p in (ROOT / "platforms").rglob("*.json")}
    assert shipped, "no shipped platform files found"
    covered = set()
    for pkg, globs in cfg["package-data"].items():
        if not pkg.startswith("annette_torch.platforms"):
            continue
        folder = _folder(cfg, pkg)
        for g in globs:
            covered |= {p.relative_to(ROOT / "platforms").as_posix() for p in folder.glob(g)}
    assert shipped - covered == set()


@pytest.mark.slow
def test_wheel_ships_platform_files_and_py_typed_without_warnings(tmp_path):
    pytest.importorskip("setuptools")
    src = tmp_path / "src"
    src.mkdir()
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, src / name)
    for name in ("annette_torch", "platforms", "search"):
        shutil.copytree(ROOT / name, src / name, ignore=skip)
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                          "--no-index", str(src), "-w", str(tmp_path / "dist")],
                         capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    out = res.stdout + res.stderr
    assert "Warning" not in out and "absent from" not in out, out[-2000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "annette_torch/py.typed" in names
    expected = {"annette_torch/platforms/" + p.relative_to(ROOT / "platforms").as_posix()
                for p in (ROOT / "platforms").rglob("*.json")}
    assert any("/machines/" in e for e in expected)
    assert expected - names == set()


@needs_tomllib
def test_every_data_file_in_a_package_is_listed_as_package_data():
    """A data file the code reads at run time (platform files, suite counts, the NB201 index) ships only
    when a package-data pattern of pyproject.toml names it."""
    cfg = _setuptools_cfg()
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
