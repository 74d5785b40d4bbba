"""Finding platforms: the user's own files and the shipped ones by name, or any file by path.

A name resolves first in the user's platform folder (`user_platform_dir`: ``$ANNETTE_HOME/platforms``,
default ``~/.local/share/annette-torch/platforms``), where ``annette calibrate`` and ``annette adapt`` write,
then to the shipped files. A measured shipped platform (``ort-cpu``, ``openvino-cpu``) may ship one file per
machine it was measured on (``platforms/machines/<name>/<machine slug>.json``): the name then loads the file of
this machine when its fingerprint matches, else the default file, which warns that it was measured elsewhere.

Names are case-insensitive. A name is resolved once per process and resolved again when the user's platform
folder changes (a file written, replaced or removed there), so estimating by name costs what estimating with
a loaded `Platform` does.
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import PlatformError
from . import machine
from .platform import Platform

__all__ = ["platform_dir", "user_platform_dir", "list_platforms", "platform_files", "PlatformFile", "shipped_machines",
           "shipped_machine_file", "load_platform", "resolve_platform", "refresh_platforms", "ALIASES", "alias_of"]


def platform_dir() -> Path:
    """Folder of the shipped platform files (inside the installed package, or the source tree)."""
    try:
        p = Path(str(resources.files("annette_torch.platforms")))
        if p.is_dir() and any(p.glob("*.json")):
            return p
    except (ModuleNotFoundError, TypeError):
        pass
    return Path(__file__).resolve().parents[2] / "platforms"


def user_platform_dir() -> Path:
    """The user's platform folder: ``$ANNETTE_HOME/platforms``, else ``$XDG_DATA_HOME/annette-torch/platforms``
    (default ``~/.local/share/annette-torch/platforms``). It may not exist yet."""
    home = os.environ.get("ANNETTE_HOME")
    if home:
        return Path(home).expanduser() / "platforms"
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(data) / "annette-torch" / "platforms"


@dataclass(frozen=True)
class PlatformFile:
    """One platform file a name can resolve to: where it is, whose it is, and whether it fits this machine."""

    name: str
    path: str
    origin: str  # "user", "shipped" or "shipped for <machine slug>"
    description: str
    #: None: no machine recorded (a board's published model); else the mismatch warning text, "" if it matches
    machine: str | None
    #: whether ``load_platform(name)`` picks this file
    selected: bool


def _read_head(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
        return d if isinstance(d, dict) else {}
    except (OSError, ValueError):
        return {}


def platform_files() -> list[PlatformFile]:
    """Every user and shipped platform file, user files first, each with the machine check's verdict."""
    out = []
    chosen = {n: resolve_platform(n) for n in _names()}
    entries = [(p, "user") for p in sorted(user_platform_dir().glob("*.json"))]
    for p in sorted(platform_dir().glob("*.json")):
        entries.append((p, "shipped"))
        folder = platform_dir() / "machines" / p.stem
        entries.extend((m, f"shipped for {m.stem}") for m in sorted(folder.glob("*.json")) if folder.is_dir())
    for path, origin in entries:
        name = path.stem if not origin.startswith("shipped for") else path.parent.name
        d = _read_head(str(path))
        fp = d.get("fingerprint")
        verdict = (machine.mismatch(name, fp) or "") if isinstance(fp, dict) else None
        out.append(PlatformFile(name, str(path), origin, str(d.get("description", "")).split("\n")[0], verdict,
                                chosen.get(name) == str(path)))
    return out


#: names that stand for another shipped platform (where no file of that name exists): ``zcu102`` is the board
#: as its users run it today, under the current toolchain; each toolchain's model keeps a stable name of its own
ALIASES: dict[str, str] = {"zcu102": "zcu102-vai3"}


def _names() -> list[str]:
    names = {p.stem for p in user_platform_dir().glob("*.json")} | {p.stem for p in platform_dir().glob("*.json")}
    names |= {a for a, target in ALIASES.items() if target in names}
    return sorted(names)


def alias_of(name: str) -> str | None:
    """The platform ``name`` stands for when it is an alias in use (no file of that name), else None."""
    target = ALIASES.get(name)
    if target is None or (user_platform_dir() / f"{name}.json").is_file() or (platform_dir() / f"{name}.json").is_file():
        return None
    return target


def _canonical(name: str) -> str | None:
    """The platform name ``name`` means, ignoring case (the exact name first); None if there is none."""
    names = _names()
    if name in names:
        return name
    low = {n.lower(): n for n in names}
    return low.get(name.lower())


def _unknown(name: str) -> PlatformError:
    """The error for a name no platform file has: the close names, else every name."""
    names = _names()
    close = difflib.get_close_matches(name.lower(), [n.lower() for n in names], n=3, cutoff=0.6)
    if close:
        alts = " or ".join(repr(next(n for n in names if n.lower() == c)) for c in close)
        return PlatformError(f"unknown platform {name!r}: did you mean {alts}? (or give a path to a platform "
                             ".json file)")
    return PlatformError(f"unknown platform {name!r} (known: {', '.join(names) or 'none'}; or give a path to a "
                         "platform .json file)")


#: name -> (user-folder state it was resolved under, absolute path of its file); see `_resolved`
_RESOLVED: dict[str, tuple[tuple, str | None]] = {}


@lru_cache(maxsize=8)
def _user_dir(home: str | None, data: str | None) -> str:
    return str(user_platform_dir())


def _user_state() -> tuple:
    """What a name's resolution depends on that can change while a process runs: the user's platform folder
    (where it is, and its modification time: writing, replacing or removing a file there changes it)."""
    d = _user_dir(os.environ.get("ANNETTE_HOME"), os.environ.get("XDG_DATA_HOME"))
    try:
        return d, os.stat(d).st_mtime_ns
    except OSError:
        return d, None


def refresh_platforms() -> None:
    """Resolve every platform name afresh on its next use: after changing shipped files or the machine's
    identity while a process runs (the user's folder is watched without this)."""
    _RESOLVED.clear()


def _resolved(name: str) -> str | None:
    """`resolve_platform` of the canonical name of ``name`` (None if unknown), once per user-folder state."""
    state = _user_state()
    hit = _RESOLVED.get(name)
    if hit is not None and hit[0] == state:
        return hit[1]
    canon = _canonical(name)
    path = None if canon is None else os.path.abspath(resolve_platform(canon))
    _RESOLVED[name] = (state, path)
    return path


def list_platforms() -> dict[str, str]:
    """Platform names (the user's and the shipped ones) -> one-line description of the file `load_platform`
    picks for the name on this machine."""
    out = {}
    for name in _names():
        d = _read_head(resolve_platform(name))
        text = str(d.get("description", "")).split("\n")[0] if d else "(unreadable platform file)"
        target = alias_of(name)
        out[name] = f"= {target}: {text}" if target else text
    return out


def resolve_platform(name: str) -> str:
    """The file a platform name loads: the user's file of that name, else the shipped one for this machine,
    else (an alias, `ALIASES`) the file of the platform it stands for."""
    mine = user_platform_dir() / f"{name}.json"
    if mine.is_file():
        return str(mine)
    target = alias_of(name)
    return resolve_platform(target) if target is not None else _shipped_path(name)


def shipped_machines(name: str) -> list[str]:
    """Machine slugs for which a measured file of shipped platform ``name`` exists besides its default."""
    folder = platform_dir() / "machines" / name
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


def shipped_machine_file(name: str) -> str | None:
    """The shipped file of platform ``name`` measured on this machine (the one the name loads here, besides the
    default file), if there is one."""
    path = _shipped_path(name)
    return None if path == str(platform_dir() / f"{name}.json") else path


def _shipped_path(name: str) -> str:
    """The shipped file of ``name`` measured on this machine if there is one, else the default file: a file
    of this CPU name and core count whose fingerprint differs in anything else (an instruction set, a
    stepping) is a near miss and not taken."""
    folder = platform_dir() / "machines" / name
    if folder.is_dir():
        mine = folder / f"{machine.this_machine_slug()}.json"
        if mine.is_file() and not machine.differing_fields(_fingerprint(str(mine), mine.stat().st_mtime)):
            return str(mine)
    return str(platform_dir() / f"{name}.json")


@lru_cache(maxsize=32)
def _fingerprint(path: str, mtime: float) -> dict:
    """The ``fingerprint`` a platform file records (empty if none or unreadable), read once per file version."""
    try:
        with open(path, encoding="utf-8") as f:
            fp = json.load(f).get("fingerprint")
    except (OSError, ValueError, AttributeError):
        return {}
    return fp if isinstance(fp, dict) else {}


@lru_cache(maxsize=32)
def _load_cached(path: str, mtime: float) -> Platform:
    return Platform.load(path)


def load_platform(platform: "str | os.PathLike[str] | Platform") -> Platform:
    """A `Platform` from a name (case-insensitive: the user's file of that name, else the shipped one:
    ``zcu102``; for a measured platform, the file of this machine when one is shipped), a path to a platform
    file, or a Platform itself. ``Platform.source`` says which file it came from."""
    if isinstance(platform, Platform):
        return platform
    if not isinstance(platform, (str, os.PathLike)):
        raise PlatformError(f"expected a platform name, a path to a platform .json file or a Platform, got "
                            f"{type(platform).__name__} {platform!r}")
    s = os.fspath(platform)
    if s.endswith(".json") or os.sep in s:
        path: str | None = s
    else:
        path = _resolved(s)
        if path is None:
            if not os.path.isfile(s):
                raise _unknown(s)
            path = s
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        raise PlatformError(f"{path}: no such platform file") from None
    return _load_cached(path if os.path.isabs(path) else os.path.abspath(path), mtime)
