"""The error every validation step raises for bad arguments or files."""

from __future__ import annotations

from ..errors import AnnetteError

__all__ = ["ValidationError"]


class ValidationError(AnnetteError):
    """A validation measurement or comparison cannot be done (unknown platform, bad arguments)."""
