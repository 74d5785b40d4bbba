"""Argument helpers shared by the command groups."""

from __future__ import annotations

from ..errors import AnnetteError

__all__ = ["platform_names"]


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
