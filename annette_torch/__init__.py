"""annette-torch: predict a neural network's execution time on hardware accelerators before running it.

Implements the ANNETTE stacked-model method (Wess et al., IEEE Access 2021): a mapping model reproduces
the fusions of a platform's toolchain, layer models (roofline, refined roofline, statistical, mixed)
predict each remaining layer, and the network's time is their sum.
"""

from __future__ import annotations

from .errors import AnnetteError, ModelLoadError, PlatformError
from .ir import LayerType, Network, NetworkBuilder

__version__ = "0.1.0"

__all__ = [
    "AnnetteError", "ModelLoadError", "PlatformError", "LayerType", "Network", "NetworkBuilder",
    "trace", "from_onnx", "from_annette_json", "estimate", "estimate_many", "load_platform", "list_platforms",
]


def __getattr__(name: str):
    # lazy: importing the package must not import torch or onnx (a NAS loop may need neither)
    if name == "trace":
        from .frontends.fx import trace
        return trace
    if name == "from_onnx":
        from .frontends.onnx import from_onnx
        return from_onnx
    if name == "from_annette_json":
        from .frontends.annette_json import from_annette_json
        return from_annette_json
    if name in ("estimate", "estimate_many", "Estimate"):
        from . import estimator as _e
        return getattr(_e, name)
    if name in ("load_platform", "list_platforms", "Platform"):
        from . import platform as _p
        return getattr(_p, name)
    raise AttributeError(f"module 'annette_torch' has no attribute {name!r}")
