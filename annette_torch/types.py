"""Types of the public API: what may stand for a platform."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    from .platform import Platform

__all__ = ["PlatformLike"]

#: a shipped or user platform name (``"zcu102"``), a path to a platform file, or a loaded `Platform`
PlatformLike = Union[str, "os.PathLike[str]", "Platform"]
