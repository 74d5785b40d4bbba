"""annette-torch: predict a neural network's execution time on hardware accelerators before running it.

Implements the ANNETTE stacked-model method (Wess et al., IEEE Access 2021): a mapping model reproduces
the fusions of a platform's toolchain, layer models (roofline, refined roofline, statistical, mixed)
predict each remaining layer, and the network's time is their sum.

Every name in `__all__` is importable from here; all but the errors and the IR load on first use, so that
importing the package pulls in neither torch nor onnx (a NAS loop on IR networks needs neither).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from .errors import AnnetteError, ModelLoadError, PlatformError
from .ir import LayerType, Network, NetworkBuilder

__version__ = "0.1.0"

#: public name -> the module that defines it (imported on first access)
_LAZY = {
    "trace": ".frontends.fx",
    "from_onnx": ".frontends.onnx",
    "from_annette_json": ".frontends.annette_json",
    "to_network": ".estimator",
    "estimate": ".estimator",
    "estimate_many": ".estimator",
    "Estimate": ".estimator",
    "Platform": ".platform",
    "load_platform": ".platform",
    "list_platforms": ".platform",
    "layer_costs": ".lookup",
    "LatencyTable": ".lookup",
    "adapt": ".fit.adapt",
}

__all__ = ["AnnetteError", "ModelLoadError", "PlatformError", "LayerType", "Network", "NetworkBuilder",
           *_LAZY, "__version__"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'annette_torch' has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
