"""Finding platforms: shipped files by name (per machine where several were measured), or any file by path.

``load_platform("zcu102")`` finds a shipped platform by name; any path to a ``.json`` file works too. A
measured platform (``ort-cpu``, ``openvino-cpu``) may ship one file per machine it was measured on
(``platforms/machines/<name>/<machine slug>.json``): the name then loads the file of this machine's CPU,
else the default file, which warns that it was measured elsewhere.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from importlib import resources
from pathlib import Path

from ..errors import PlatformError
from . import machine
from .platform import Platform

__all__ = ["platform_dir", "list_platforms", "shipped_machines", "load_platform"]


def platform_dir() -> Path:
    """Folder of the shipped platform files (inside the installed package, or the source tree)."""
    try:
        p = Path(str(resources.files("annette_torch.platforms")))
        if p.is_dir() and any(p.glob("*.json")):
            return p
    except (ModuleNotFoundError, TypeError):
        pass
    return Path(__file__).resolve().parents[2] / "platforms"


def list_platforms() -> dict[str, str]:
    """Shipped platforms: name -> one-line description (of the file `load_platform` picks on this machine)."""
    out = {}
    for p in sorted(platform_dir().glob("*.json")):
        try:
            with open(_shipped_path(p.stem), encoding="utf-8") as f:
                d = json.load(f)
            out[p.stem] = str(d.get("description", "")).split("\n")[0]
        except (OSError, json.JSONDecodeError):
            out[p.stem] = "(unreadable platform file)"
    return out


def shipped_machines(name: str) -> list[str]:
    """Machine slugs for which a measured file of shipped platform ``name`` exists besides its default."""
    folder = platform_dir() / "machines" / name
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


def _shipped_path(name: str) -> str:
    """The shipped file of ``name`` measured on this machine's CPU if there is one, else the default file."""
    folder = platform_dir() / "machines" / name
    if folder.is_dir():
        mine = folder / f"{machine.this_machine_slug()}.json"
        if mine.is_file():
            return str(mine)
    return str(platform_dir() / f"{name}.json")


@lru_cache(maxsize=32)
def _load_cached(path: str, mtime: float) -> Platform:
    return Platform.load(path)


def load_platform(platform: "str | os.PathLike | Platform") -> Platform:
    """A `Platform` from a shipped name (``zcu102``; for a measured platform, the file of this machine's CPU
    when one is shipped), a path to a platform file, or a Platform itself."""
    if isinstance(platform, Platform):
        return platform
    s = os.fspath(platform)
    if s.endswith(".json") or os.sep in s or os.path.isfile(s):
        path = s
    else:
        path = _shipped_path(s)
        if not os.path.isfile(path):
            known = ", ".join(list_platforms()) or "none"
            raise PlatformError(f"unknown platform {s!r} (shipped: {known}; or give a path to a platform .json)")
    if not os.path.isfile(path):
        raise PlatformError(f"{path}: no such platform file")
    return _load_cached(os.path.abspath(path), os.path.getmtime(path))
