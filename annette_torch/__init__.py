"""annette-torch: predict a neural network's execution time on hardware accelerators before running it.

Implements the ANNETTE stacked-model method (Wess et al., IEEE Access 2021): a mapping model reproduces
the fusions of a platform's toolchain, layer models (roofline, refined roofline, statistical, mixed)
predict each remaining layer, and the network's time is their sum.

Every name in `__all__` is importable from here; all but the errors, the IR and `PlatformLike` load on first
use, so that importing the package pulls in neither torch nor onnx (a NAS loop on IR networks needs neither).
Type checkers see the lazily loaded names through the ``TYPE_CHECKING`` imports below.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .errors import AnnetteError, ModelLoadError, PlatformError
from .ir import LayerType, Network, NetworkBuilder
from .types import PlatformLike

if TYPE_CHECKING:  # what `_LAZY` loads on first use, spelled out for type checkers and editors
    # (``import X as X``: an explicit re-export, also under mypy --strict)
    from .estimator import Estimate as Estimate
    from .estimator import estimate as estimate
    from .estimator import estimate_many as estimate_many
    from .estimator import to_network as to_network
    from .fit.adapt import adapt as adapt
    from .frontends.annette_json import from_annette_json as from_annette_json
    from .frontends.fx import trace as trace
    from .frontends.onnx import from_onnx as from_onnx
    from .lookup import LatencyTable as LatencyTable
    from .lookup import layer_costs as layer_costs
    from .platform import Platform as Platform
    from .platform import list_platforms as list_platforms
    from .platform import load_platform as load_platform

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

__all__ = ["AnnetteError", "ModelLoadError", "PlatformError", "LayerType", "Network", "NetworkBuilder", "PlatformLike",
           *_LAZY, "__version__"]


if not TYPE_CHECKING:  # hidden from type checkers, which would otherwise take any misspelt name for Any
    def __getattr__(name: str) -> Any:
        """Import a lazily loaded public name on first access."""
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module 'annette_torch' has no attribute {name!r}")
        value = getattr(import_module(module, __name__), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
