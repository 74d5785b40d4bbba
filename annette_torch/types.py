"""Type aliases of the public API: what a function that takes a platform accepts."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:  # the alias names Platform without importing the platform code at run time
    from .platform.platform import Platform

__all__ = ["PlatformLike"]

#: a platform: a name (``"zcu102"``; the user's file of that name first, then the shipped one), a path to a
#: platform ``.json`` file, or a loaded `Platform` (`annette_torch.load_platform` accepts all three)
PlatformLike = Union[str, os.PathLike[str], "Platform"]
