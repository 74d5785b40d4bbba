"""Convert the original ANNETTE release's layer-model and mapping-model JSON files into a `Platform`.

The original's semantics are kept where they are part of the published parameters (pooling counts two
operations per window element; convolutions treat a dimension smaller than its unrolling factor as fully
used, the fused ConvPool does not), and fixed where they were defects (see docs/annette-compat.md).
The statistical parts of the original ``mixed``/``statistical`` models were never published, so those
entries become their refined-roofline part.
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

from ..errors import PlatformError
from ..mapping import Condition, FusionRule, MappingModel
from ..models import LayerModel, RefinedRoofline, Roofline
from . import Platform

__all__ = ["layers_from_annette", "mapping_from_annette", "platform_from_annette"]

#: original layer-model key -> our key (None: the original never matches it, see docs)
_KEYS: dict[str, str | None] = {
    "Base": "Base", "Conv": "Conv", "DepthwiseConv": "DepthwiseConv", "ConvTranspose": "ConvTranspose",
    "Pool": "Pool", "ConvPool": "ConvPool", "FullyConnected": "FullyConnected", "Add": "Add", "Tanh": "Tanh",
    "Input": None, "Exp": None, "Log": None,
}
#: original type names in mapping rules -> our type labels / groups
_TYPES: dict[str, list[str]] = {
    "Conv": ["Conv", "GroupConv"], "DepthwiseConv": ["DepthwiseConv"], "BatchNorm": ["BatchNorm"],
    "Relu": ["Relu"], "Relu6": ["Relu6"], "LeakyRelu": ["LeakyRelu"], "Pool": ["Pool"], "ConvPool": ["ConvPool"],
}
_DIMS = ("h", "w", "c", "f")
_REPLICATING = {"Conv", "DepthwiseConv", "ConvTranspose"}


def _read(src: str | os.PathLike | Mapping[str, Any]) -> tuple[Mapping[str, Any], str]:
    if isinstance(src, Mapping):
        return src, str(src.get("name", "annette-model"))
    with open(src, encoding="utf-8") as f:
        return json.load(f), os.path.basename(os.fspath(src))


def layers_from_annette(src: str | os.PathLike | Mapping[str, Any]) -> dict[str, LayerModel]:
    """Layer models of an original ``models/layer/*.json`` file, keyed by our layer-type keys."""
    d, fname = _read(src)
    out: dict[str, LayerModel] = {}
    for key, e in d.items():
        if key in ("name", "op_s", "bandwidth", "architecture") or not isinstance(e, Mapping):
            continue  # the original ignores the top-level parameters too
        if key not in _KEYS:
            raise PlatformError(f"{fname}: layer model {key!r} has no counterpart in annette-torch")
        ours = _KEYS[key]
        if ours is None:
            continue
        arch = e.get("architecture") or {}
        common = dict(op_s=float(e["op_s"]), bandwidth=float(e["bandwidth"]),
                      bit_act=float(arch.get("bit_act", 8)), bit_weights=float(arch.get("bit_weights", 8)))
        est = e.get("est_type", "roofline")
        unroll = {dim: {"s": float(arch[f"{dim}_par"]), "alpha": float(arch.get(f"{dim}_alpha", 1.0)),
                        "replicate": key in _REPLICATING}
                  for dim in _DIMS if f"{dim}_par" in arch}
        if est in ("refined_roofline", "mixed", "statistical") and unroll:
            m: LayerModel = RefinedRoofline(**common, unroll=unroll)
            how = "refined roofline" if est == "refined_roofline" else \
                f"refined-roofline part of the published {est} model (its statistical part was never published)"
        else:
            m = Roofline(**common)
            how = "roofline"
        m.origin = (f"{fname} entry {key!r} ({how}): op_s, bandwidth, bit widths"  # type: ignore[attr-defined]
                    + (", unrolling s/alpha from architecture.*_par/*_alpha" if isinstance(m, RefinedRoofline)
                       else ""))
        out[ours] = m
    if "Base" not in out:
        raise PlatformError(f"{fname}: no 'Base' layer model")
    return out


def mapping_from_annette(src: str | os.PathLike | Mapping[str, Any]) -> MappingModel:
    """Fusion rules of an original ``models/mapping/*.json`` file (split rules such as Softplus are skipped)."""
    d, fname = _read(src)
    rules: list[FusionRule] = []
    for key, r in d.items():
        if not isinstance(r, Mapping) or not r.get("sec_type"):
            continue
        prim, sec, res = r["prim_type"], r["sec_type"], r.get("out_type")
        when: list[Condition] = []
        secondary = list(_TYPES[sec])
        for c in ((r.get("fuse_cond") or {}).get("secondary") or {}).values():
            if c["name"] == "pooling_type":
                secondary = ["MaxPool"] if str(c["val"]).upper() == "MAX" else ["AvgPool"]
            elif c["name"] == "kernel_shape":
                attr = {1: "kh", 2: "kw"}[int(c["i"])]
                when.append(Condition("secondary", attr, c["cond"], float(c["val"])))
            else:
                raise PlatformError(f"{fname}: rule {key}: condition on {c['name']!r} not supported")
        rules.append(FusionRule(name=str(r.get("name", key)), primary=tuple(_TYPES[prim]), secondary=tuple(secondary),
                                result=None if res == prim else _TYPES[res][0], when=tuple(when),
                                origin=f"{fname} rule {key}"))
    return MappingModel(rules)


def platform_from_annette(layer_model: str | os.PathLike | Mapping[str, Any],
                          mapping: str | os.PathLike | Mapping[str, Any] | None, name: str,
                          description: str = "", **meta: Any) -> Platform:
    """A `Platform` from an original layer-model file and (optionally) an original mapping file."""
    return Platform(name, layers_from_annette(layer_model),
                    mapping_from_annette(mapping) if mapping is not None else MappingModel(), description, meta)


class AnnetteCompatPlatform(Platform):
    """A platform that reproduces the original implementation's numbers, defects included (see
    `annette_torch.prediction.original`); for comparing with results of the original tool only, the shipped
    platforms use the fixed semantics. `annette_torch.estimate` takes it like any platform."""

    original_semantics = True


def compat_platform(layer_model: str | os.PathLike | Mapping[str, Any], mapping: str | os.PathLike | Mapping[str, Any],
                    name: str = "annette-compat") -> AnnetteCompatPlatform:
    """An `AnnetteCompatPlatform` from original model files (reproduces the original's totals)."""
    layers = layers_from_annette(layer_model)
    layers.setdefault("ConvPool", layers["Base"])
    return AnnetteCompatPlatform(name, layers, mapping_from_annette(mapping), "original ANNETTE semantics")
