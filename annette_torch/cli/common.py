"""Argument helpers shared by the command groups: platform lists and the checks every output path gets."""

from __future__ import annotations

import os
import re

from ..errors import AnnetteError, check_writable

__all__ = ["platform_names", "check_output", "check_output_folder", "check_output_store"]


def platform_names(values: list[str] | None, default: str = "zcu102") -> list[str]:
    """``-p a,b -p c`` -> ``[a, b, c]`` (duplicates dropped, order kept); ``default`` when none is given."""
    names: list[str] = []
    for v in values or [default]:
        for n in v.split(","):
            n = n.strip()
            if n and n not in names:
                names.append(n)
    if not names:
        raise AnnetteError("--platform: no platform given")
    return names


def check_output(path: str | os.PathLike | None, option: str, chart: bool = False) -> None:
    """Refuse an output file before any work, in one line naming the option: its folder must exist (never
    created), and a chart's extension must name a format the charts are written in (.png, .pdf, .svg)."""
    if path is None:
        return
    try:
        check_writable(path)
        if chart:
            from ..plots import plot_format
            plot_format(path)
    except AnnetteError as e:
        raise AnnetteError(f"{option} {e}") from None


def check_output_folder(path: str | os.PathLike, option: str) -> None:
    """Refuse an output folder whose parent folder does not exist (the folder itself may be created)."""
    p = os.fspath(path)
    if os.path.exists(p) and not os.path.isdir(p):
        raise AnnetteError(f"{option} {p}: is a file; give a folder")
    parent = os.path.dirname(os.path.abspath(p))
    if not os.path.isdir(parent):
        raise AnnetteError(f"{option} {p}: folder {parent} does not exist")


def check_output_store(target: str | None, option: str) -> None:
    """Refuse a store that would be created in a missing folder: an SQLite file path, ``sqlite:///FILE`` or
    ``journal:FILE``; other database URLs (a server) are not checked here."""
    if not target or target == "sqlite://" or target.startswith("sqlite:///:memory:"):
        return
    if target.startswith("journal:"):
        path = target[len("journal:"):]
    elif target.lower().startswith("sqlite:///"):
        path = target[len("sqlite:///"):].split("?")[0]
    elif re.match(r"^[A-Za-z][A-Za-z0-9+.\-]*://", target):
        return
    else:
        path = target
    if path:
        check_output(path, option)
