"""Predicted latency of a space's architectures on one platform, cached per architecture (`LatencyOracle`)."""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

from ..errors import AnnetteError
from ..estimator import LATENCY_KINDS, estimate, estimate_many
from ..platform import load_platform
from ..types import PlatformLike
from .spaces.registry import Space, get_space

__all__ = ["LatencyOracle"]


class LatencyOracle:
    """Predicted latency (ms) of architectures of one space on one platform, cached per architecture.

    ``oracle(arch)`` builds the IR and estimates it the first time, later calls are a dict lookup.
    ``many(archs)`` estimates all uncached ones in one `estimate_many` pass. ``seconds`` / ``calls`` /
    ``misses`` account the time spent (the per-trial overhead of the latency constraint). The latency is
    `Estimate.latency_ms` (``latency="latency"``) or the layer sum `Estimate.device_ms` (``"device"``).
    """

    def __init__(self, space: str | Space, platform: PlatformLike, latency: str = "latency") -> None:
        if latency not in LATENCY_KINDS:
            raise AnnetteError(f"latency must be one of {', '.join(LATENCY_KINDS)}, got {latency!r}")
        self.space = get_space(space)
        self.platform = load_platform(platform)
        self.latency = latency
        self._cache: dict[Any, float] = {}
        self.calls = 0
        self.misses = 0
        self.seconds = 0.0

    def _key(self, arch: Any) -> Any:
        f = getattr(self.space, "latency_key", None)
        return f(arch) if f is not None else self.space.encode(arch)

    def __call__(self, arch: Any) -> float:
        t0 = time.perf_counter()
        self.calls += 1
        key = self._key(arch)
        ms = self._cache.get(key)
        if ms is None:
            self.misses += 1
            est = estimate(self.space.network(arch), self.platform)
            ms = est.latency_ms if self.latency == "latency" else est.device_ms
            self._cache[key] = ms
        self.seconds += time.perf_counter() - t0
        return ms

    def many(self, archs: Sequence[Any], chunk: int = 1024) -> np.ndarray:
        """Predicted latency of each architecture; the uncached ones are estimated in batches."""
        t0 = time.perf_counter()
        keys = [self._key(a) for a in archs]
        todo: dict[Any, Any] = {}
        for k, a in zip(keys, archs):
            if k not in self._cache and k not in todo:
                todo[k] = a
        build = getattr(self.space, "networks", None)
        items = list(todo.items())
        for s in range(0, len(items), chunk):
            part = items[s:s + chunk]
            nets = build([a for _, a in part]) if build else [self.space.network(a) for _, a in part]
            for (k, _), ms in zip(part, estimate_many(nets, self.platform, latency=self.latency)):
                self._cache[k] = float(ms)
        self.calls += len(archs)
        self.misses += len(todo)
        self.seconds += time.perf_counter() - t0
        return np.array([self._cache[k] for k in keys], dtype=float)

    @property
    def mean_ms(self) -> float:
        """Mean time per call (ms), cache hits included."""
        return 1e3 * self.seconds / self.calls if self.calls else 0.0

    def __repr__(self) -> str:
        return (f"LatencyOracle({self.space.name} on {self.platform.name}: {len(self._cache)} cached, "
                f"{self.calls} calls, {self.mean_ms:.3f} ms/call)")
