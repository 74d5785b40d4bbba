"""Hardware modules (runners): one file each, one small `Runner` interface (`base.py`), chosen by name."""

from __future__ import annotations

from typing import Any

from .base import RUNNERS, Profile, Runner, register_runner

__all__ = ["Runner", "Profile", "RUNNERS", "register_runner", "get_runner"]


def get_runner(name: str, **kwargs: Any) -> Runner:
    """Instantiate a registered runner by name, or a user's runner given as ``package.module:ClassName``."""
    from ...errors import AnnetteError
    if ":" in name:
        import importlib
        mod, _, cls = name.partition(":")
        try:
            return getattr(importlib.import_module(mod), cls)(**kwargs)
        except (ImportError, AttributeError) as e:
            raise AnnetteError(f"cannot load hardware module {name!r}: {e}") from None
    if not RUNNERS:
        from . import openvino, ort, vitis  # noqa: F401  (the built-in runners register themselves)
    if name not in RUNNERS:
        raise AnnetteError(f"unknown hardware module {name!r} (known: {', '.join(sorted(RUNNERS))})")
    return RUNNERS[name](**kwargs)
