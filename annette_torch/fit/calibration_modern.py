"""Transformer-era end-to-end calibration networks: the families of `annette_torch.zoo_modern` at sizes the
validation set does not hold.

`annette calibrate` fits its network-level terms (scale, per-executed-layer cost, constant) on whole-network
latencies; with convolutional calibration networks alone those terms never see a network of many small
token-tensor nodes (LayerNorm, Softmax, head reshapes). These architectures come from the same building
blocks as the validation networks (`annette_torch.zoo_modern`) but with other depths, widths, heads and
input sizes, so no calibration network is a validation network (a test compares their weighted layers).

They are measured through ``torch.onnx.export`` of the module (the IR exporter does not write token-tensor
layers), with random weights seeded per network.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

__all__ = ["MODERN_CALIBRATION", "modern_calibration_networks", "calibration_networks_of", "module_of", "onnx_of",
           "measurable"]

PREFIX = "calib-modern-"


def _spec() -> dict[str, tuple[Callable[[], Any], tuple[int, ...]]]:
    """name -> (module factory, input shape); ordered so that any first few span the families."""
    from .. import zoo_modern as Z

    def t(m: Any) -> Any:
        return Z._init_transformer(m)

    return {
        "vit-sdpa-e256-d4-h4-160": (lambda: t(Z.VisionTransformer(256, 4, 4, "sdpa", 160)), (1, 3, 160, 160)),
        "convnext-2242-64": (lambda: t(Z.ConvNeXt((2, 2, 4, 2), (64, 128, 256, 512))), (1, 3, 192, 192)),
        "swin-64-2222": (lambda: t(Z.SwinTransformer(64, (2, 2, 2, 2), (2, 4, 8, 16))), (1, 3, 224, 224)),
        "maxvit-32-1121": (lambda: t(Z.MaxViT(32, (32, 64, 128, 256), (1, 1, 2, 1))), (1, 3, 224, 224)),
        "efficientformer-2242-40": (lambda: t(Z.EfficientFormer((2, 2, 4, 2), (40, 80, 160, 320), img_size=192)),
                                    (1, 3, 192, 192)),
        "vit-manual-e192-d6-h3-192": (lambda: t(Z.VisionTransformer(192, 6, 3, "manual", 192)), (1, 3, 192, 192)),
        "levit-128-122": (lambda: t(Z.LeViT((128, 192, 256), (4, 4, 4), (1, 2, 2), img_size=192)), (1, 3, 192, 192)),
        "poolformer-2242-48": (lambda: t(Z.PoolFormer((2, 2, 4, 2), (48, 96, 192, 384))), (1, 3, 224, 224)),
        "vit-mha-e384-d3-h6-224": (lambda: t(Z.VisionTransformer(384, 3, 6, "mha", 224)), (1, 3, 224, 224)),
        "segformer-mini-256": (lambda: t(Z.SegFormer((32, 64, 128, 160), (1, 2, 4, 5), (1, 1, 2, 1), decoder=128)),
                               (1, 3, 256, 256)),
        "convnext-1131-48": (lambda: t(Z.ConvNeXt((1, 1, 3, 1), (48, 96, 192, 384))), (1, 3, 224, 224)),
        "vit-sdpa-e320-d2-h5-224": (lambda: t(Z.VisionTransformer(320, 2, 5, "sdpa", 224)), (1, 3, 224, 224)),
        "swin-48-2242-160": (lambda: t(Z.SwinTransformer(48, (2, 2, 4, 2), (2, 4, 6, 12))), (1, 3, 160, 160)),
        "maxvit-48-1111-160": (lambda: t(Z.MaxViT(48, (64, 128, 192, 384), (1, 1, 1, 1), partition=5)),
                               (1, 3, 160, 160)),
        "vit-manual-e128-d8-h2-128": (lambda: t(Z.VisionTransformer(128, 8, 2, "manual", 128)), (1, 3, 128, 128)),
    }


#: names (without `PREFIX`) of the transformer-era calibration architectures, in the order they are taken
MODERN_CALIBRATION: tuple[str, ...] = (
    "vit-sdpa-e256-d4-h4-160", "convnext-2242-64", "swin-64-2222", "maxvit-32-1121", "efficientformer-2242-40",
    "vit-manual-e192-d6-h3-192", "levit-128-122", "poolformer-2242-48", "vit-mha-e384-d3-h6-224",
    "segformer-mini-256", "convnext-1131-48", "vit-sdpa-e320-d2-h5-224", "swin-48-2242-160",
    "maxvit-48-1111-160", "vit-manual-e128-d8-h2-128")


@dataclass(frozen=True)
class _Entry:
    factory: Callable[[], Any]
    shape: tuple[int, ...]


def _registries() -> dict[str, Callable[[], dict[str, tuple[Callable[[], Any], tuple[int, ...]]]]]:
    """Name prefix -> spec of the calibration networks measured through their module: the classic-family ones
    (`calibration_classic`) and the transformer-era ones."""
    from . import calibration_classic as classic

    return {classic.PREFIX: classic.spec, PREFIX: _spec}


def _entry(name: str) -> _Entry:
    """A calibration network's factory and input shape, by its full name (a bare name: a transformer-era one)."""
    registries = _registries()
    prefix = next((p for p in registries if name.startswith(p)), "")
    key, spec = name[len(prefix):], registries[prefix or PREFIX]()
    if key not in spec:
        raise KeyError(f"{name!r} is not a calibration network measured through its module")
    return _Entry(*spec[key])


def module_of(name: str) -> tuple[Any, tuple[int, ...]]:
    """The eval-mode module (seeded random weights) and input shape of calibration network ``name``."""
    import torch

    e = _entry(name)
    torch.manual_seed(0)
    return e.factory().eval(), e.shape


def calibration_networks_of(names: tuple[str, ...] | list[str]) -> list:
    """The calibration networks of these full names (``calib-modern-*``, ``calib-classic-*``), traced."""
    from ..frontends.fx import trace

    out = []
    for name in names:
        module, shape = module_of(name)
        net = trace(module, shape)
        net.name = name
        out.append(net)
    return out


#: the stored layer types of the calibration networks (`scripts/calibration_types.py` writes it; a test checks it
#: against their traces): which networks cover a platform's types is known without tracing all 24 (13 s)
TYPES_FILE = Path(__file__).with_name("calibration_types.json")


@functools.lru_cache(maxsize=1)
def _stored_types() -> dict[str, list[str]]:
    try:
        with open(TYPES_FILE, encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, ValueError):
        return {}
    return d if isinstance(d, dict) else {}


@functools.lru_cache(maxsize=None)
def layer_types(name: str, stored: bool = True) -> frozenset[str]:
    """The layer type labels of calibration network ``name``: stored (`TYPES_FILE`) or, for one not stored or
    with ``stored=False``, traced (once per process)."""
    types = _stored_types().get(name) if stored else None
    if isinstance(types, list) and all(isinstance(t, str) for t in types):
        return frozenset(types)
    return frozenset(calibration_networks_of([name])[0].type_labels())


def all_names() -> list[str]:
    """The full names of every calibration network of the transformer-era and classic families."""
    return [prefix + key for prefix, spec in _registries().items() for key in spec()]


def modern_calibration_networks(n: int) -> list:
    """The first ``n`` transformer-era calibration networks, traced (names ``calib-modern-<arch>``)."""
    if n > len(MODERN_CALIBRATION):
        raise ValueError(f"only {len(MODERN_CALIBRATION)} transformer-era calibration networks, asked for {n}")
    return calibration_networks_of([PREFIX + key for key in MODERN_CALIBRATION[:n]])


def onnx_of(name: str) -> Any:
    """The ONNX model measured for calibration network ``name`` (``torch.onnx.export``, opset 17)."""
    from ..validate.networks import module_onnx

    return module_onnx(*module_of(name))


def measurable(net: Any) -> Any:
    """What `annette_torch.validate.measure_latency` measures for calibration network ``net``: the ONNX export
    of its module for a transformer-era or classic-family one, the network itself otherwise."""
    name = getattr(net, "name", "")
    return onnx_of(name) if isinstance(name, str) and name.startswith(tuple(_registries())) else net
