"""In-context weight residency: a layer's weights are cached in a micro-benchmark but not inside a network.

A micro-kernel benchmark runs one layer over and over, so its weights stay in the CPU's caches between
runs; inside a network the other layers' weights and activations pass through the caches first, and the
layer reads its weights from DRAM. Measured with the ``cold_weights`` suite (a weighted layer after a pool
that streams a chosen amount of activations): a 1280x1000 classifier takes 2-3x its micro-benchmark time
in a network, a 512x512 3x3 convolution at 7x7 ~35% more.

The model adds, per weighted layer, ``cold_share(traffic) * penalty[type] * min(weight MB, capacity)`` and
floors the time at ``cold_share * weight bytes / stream_bandwidth[type]``, where ``traffic`` is the bytes the
whole network moves per inference (activations in + out and weights, at the platform's bit widths) and
``cold_share`` rises from 0 at ``warm_bytes`` to 1 at ``cold_bytes`` (linear in log traffic).

An optional second tier (``dram_warm_bytes``, ``dram_cold_bytes``, ``dram_bandwidth``) covers a large
last-level cache: up to tens of MB of traffic the weights leave the core's private caches but are streamed
from the last level (FC weights at ~23 GB/s on a 2-core Xeon VM listing 480 MB of L3); with hundreds of MB of
traffic per inference they come from DRAM (AlexNet's classifier there: ~10 GB/s). The floor's time per byte
then rises from ``1 / stream_bandwidth`` to ``1 / dram_bandwidth`` as ``cold_share(traffic, dram_warm_bytes,
dram_cold_bytes)`` goes from 0 to 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ..errors import PlatformError
from ..ir import LayerType
from .base import check_number

__all__ = ["CacheModel", "MB", "cold_share"]

MB = float(2**20)


def cold_share(traffic_bytes: Any, warm_bytes: float, cold_bytes: float) -> np.ndarray:
    """0 at ``warm_bytes`` of per-inference traffic or less, 1 from ``cold_bytes``, linear in log traffic."""
    x = np.log(np.maximum(np.asarray(traffic_bytes, dtype=np.float64), 1.0) / warm_bytes)
    return np.clip(x / np.log(cold_bytes / warm_bytes), 0.0, 1.0)


@dataclass(frozen=True)
class CacheModel:
    """Extra time of weighted layers whose weights a network's traffic has pushed out of the caches."""

    warm_bytes: float
    cold_bytes: float
    capacity_bytes: float
    penalty_ms_per_mb: Mapping[str, float]
    stream_bandwidth: Mapping[str, float]  # bytes/s per layer type ("default" for the others)
    origin: str = ""
    #: second tier (None: none): traffic from which weights come from DRAM, and the DRAM streaming bandwidth
    dram_warm_bytes: float | None = None
    dram_cold_bytes: float | None = None
    dram_bandwidth: Mapping[str, float] | None = None
    _pen: np.ndarray = field(init=False, repr=False, compare=False)
    _bw: np.ndarray = field(init=False, repr=False, compare=False)
    _dram_extra: np.ndarray | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_pen", _per_type(self.penalty_ms_per_mb, 0.0))
        object.__setattr__(self, "_bw", _per_type(self.stream_bandwidth, np.inf))
        extra = None
        if self.dram_bandwidth is not None:
            # extra seconds per byte from DRAM over the first tier's streaming (never negative)
            extra = np.maximum(1.0 / _per_type(self.dram_bandwidth, np.inf) - 1.0 / self._bw, 0.0)
        object.__setattr__(self, "_dram_extra", extra)

    @property
    def has_dram_tier(self) -> bool:
        return self._dram_extra is not None and self.dram_warm_bytes is not None and self.dram_cold_bytes is not None

    def cold_share(self, traffic_bytes: Any) -> np.ndarray:
        """0 (weights stay cached) .. 1 (weights come from DRAM) for a network moving this many bytes."""
        return cold_share(traffic_bytes, self.warm_bytes, self.cold_bytes)

    def apply(self, t_ms: np.ndarray, types: np.ndarray, weight_bytes: np.ndarray, traffic_bytes: Any) -> np.ndarray:
        """Layer times (ms) in context: ``t_ms`` plus the cold-weight penalty, floored at DRAM streaming."""
        phi = self.cold_share(traffic_bytes)
        w = np.asarray(weight_bytes, dtype=np.float64)
        extra = phi * self._pen[types] * np.minimum(w, self.capacity_bytes) / MB
        floor = w * self.seconds_per_byte(types, traffic_bytes, phi) * 1e3
        return np.where(w > 0, np.maximum(t_ms + extra, floor), t_ms)

    def seconds_per_byte(self, types: np.ndarray, traffic_bytes: Any, phi: Any = None) -> np.ndarray:
        """Streaming time per weight byte (s) of layers of ``types`` in a network moving ``traffic_bytes``:
        0 while the weights stay cached, ``1 / stream_bandwidth`` once evicted to the last level, rising to
        ``1 / dram_bandwidth`` with the second tier (``phi``: `cold_share` of the traffic, when known)."""
        spb = (self.cold_share(traffic_bytes) if phi is None else phi) / self._bw[types]
        if self.has_dram_tier:
            assert self._dram_extra is not None and self.dram_warm_bytes and self.dram_cold_bytes
            spb = spb + cold_share(traffic_bytes, self.dram_warm_bytes, self.dram_cold_bytes) * self._dram_extra[types]
        return spb

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"warm_bytes": self.warm_bytes, "cold_bytes": self.cold_bytes,
                             "capacity_bytes": self.capacity_bytes,
                             "penalty_ms_per_mb": dict(self.penalty_ms_per_mb),
                             "stream_bandwidth": dict(self.stream_bandwidth)}
        if self.has_dram_tier:
            d.update(dram_warm_bytes=self.dram_warm_bytes, dram_cold_bytes=self.dram_cold_bytes,
                     dram_bandwidth=dict(self.dram_bandwidth or {}))
        if self.origin:
            d["origin"] = self.origin
        return d

    @classmethod
    def from_dict(cls, d: Any, where: str) -> "CacheModel":
        if not isinstance(d, Mapping):
            raise PlatformError(f"{where}: expected an object with warm_bytes, cold_bytes, capacity_bytes, "
                                "penalty_ms_per_mb, stream_bandwidth")
        warm = check_number(d, "warm_bytes", where, positive=True)
        cold = check_number(d, "cold_bytes", where, positive=True)
        if cold <= warm:
            raise PlatformError(f"{where}.cold_bytes: must exceed warm_bytes ({warm:g}), got {cold:g}")
        penalty = _read_per_type(d, "penalty_ms_per_mb", where, "ms per MB", positive=False)
        bandwidth = _read_per_type(d, "stream_bandwidth", where, "bytes/s", positive=True)
        tier = [k for k in ("dram_warm_bytes", "dram_cold_bytes", "dram_bandwidth") if k in d]
        dwarm = dcold = dbw = None
        if tier:
            if len(tier) < 3:
                missing = sorted({"dram_warm_bytes", "dram_cold_bytes", "dram_bandwidth"} - set(tier))
                raise PlatformError(f"{where}: the DRAM tier needs dram_warm_bytes, dram_cold_bytes and "
                                    f"dram_bandwidth (missing {', '.join(missing)})")
            dwarm = check_number(d, "dram_warm_bytes", where, positive=True)
            dcold = check_number(d, "dram_cold_bytes", where, positive=True)
            if dcold <= dwarm:
                raise PlatformError(f"{where}.dram_cold_bytes: must exceed dram_warm_bytes ({dwarm:g}), got {dcold:g}")
            dbw = _read_per_type(d, "dram_bandwidth", where, "bytes/s", positive=True)
        return cls(warm, cold, check_number(d, "capacity_bytes", where, positive=True), penalty, bandwidth,
                   str(d.get("origin", "")), dwarm, dcold, dbw)


def _per_type(values: Mapping[str, float], missing: float) -> np.ndarray:
    """Lookup table type id -> value (``default`` for types not named, else ``missing``)."""
    default = float(values.get("default", missing))
    lut = np.full(max(int(t) for t in LayerType) + 1, default)
    for t in LayerType:
        if t.label in values:
            lut[int(t)] = float(values[t.label])
    return lut


def _read_per_type(d: Mapping[str, Any], key: str, where: str, unit: str, positive: bool) -> dict[str, float]:
    v = d.get(key)
    if not isinstance(v, Mapping) or not v:
        raise PlatformError(f"{where}.{key}: expected an object of layer type -> {unit}")
    labels = {t.label for t in LayerType} | {"default"}
    for k in v:
        if k not in labels:
            raise PlatformError(f"{where}.{key}.{k}: unknown layer type")
    return {str(k): check_number(v, k, f"{where}.{key}", positive=positive, minimum=None if positive else 0)
            for k in v}
