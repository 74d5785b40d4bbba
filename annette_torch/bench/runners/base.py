"""Hardware-module interface: one small abstract base, one file per toolchain (Optuna-sampler style)."""

from __future__ import annotations

import abc
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import numpy as np
import onnx

from ..records import NodeRecord

__all__ = ["Runner", "Profile", "RUNNERS", "register_runner", "MIN_ITERATIONS", "budgeted_iterations", "warm_up"]

#: the fewest timed iterations a time budget leaves a configuration (its median still robust to a slow one)
MIN_ITERATIONS = 8


def budgeted_iterations(iterations: int, warm_ms: float | None, max_s: float | None) -> int:
    """How many of ``iterations`` fit in ``max_s`` seconds at ``warm_ms`` per inference (the fastest warm-up
    run), never fewer than `MIN_ITERATIONS`: slow configurations need fewer runs for a stable median."""
    if max_s is None or warm_ms is None or not warm_ms > 0:
        return iterations
    return int(min(iterations, max(MIN_ITERATIONS, math.ceil(max_s * 1000.0 / warm_ms))))


def warm_up(run: Callable[[], Any], warmup: int) -> float | None:
    """Call ``run`` ``warmup`` times; the fastest call in ms (None without warm-up), for `budgeted_iterations`."""
    fastest = None
    for _ in range(warmup):
        t0 = time.perf_counter()
        run()
        ms = (time.perf_counter() - t0) * 1000.0
        fastest = ms if fastest is None else min(fastest, ms)
    return fastest


@dataclass
class Profile:
    """Raw result of profiling one compiled model: per-node per-iteration times and end-to-end times.

    ``nodes`` maps an executed node name to (node_type, exec_kind, status, times_ms array over iterations);
    ``e2e_ms`` holds the whole-model time of each iteration; ``raw`` keeps the toolchain's own report
    (for debugging / re-parsing).
    """

    nodes: dict[str, tuple[str, str, str, np.ndarray]]
    e2e_ms: np.ndarray
    raw: Any = None
    meta: dict[str, Any] = field(default_factory=dict)


class Runner(abc.ABC):
    """Compile an ONNX model with a platform's toolchain, run it, and parse the per-node profile."""

    name: ClassVar[str] = "base"
    #: whether the measurement times work on this machine's own CPU: such measurements take the machine's
    #: measuring lock, one at a time across all workers here; a board with its own host sets it False
    uses_host_cpu: ClassVar[bool] = True

    @abc.abstractmethod
    def toolchain(self) -> dict[str, Any]:
        """Toolchain name, version and the settings that affect timing (threads, optimisation level)."""

    @abc.abstractmethod
    def prepare(self, model: onnx.ModelProto) -> Any:
        """Compile / load the model; returns a handle for `profile`."""

    @abc.abstractmethod
    def profile(self, prepared: Any, iterations: int = 20, warmup: int = 3, max_s: float | None = None) -> Profile:
        """Run ``warmup`` + ``iterations`` inferences with per-node profiling on; with ``max_s``, fewer
        iterations where the warm-up runs show that they would take longer (`budgeted_iterations`)."""

    def parse(self, profile: Profile) -> list[NodeRecord]:
        """Per-node medians / min / std in the standard record format."""
        out = []
        for node, (typ, kind, status, t) in profile.nodes.items():
            t = np.asarray(t, dtype=np.float64)
            out.append(NodeRecord(node=node, node_type=typ, exec_kind=kind, status=status,
                                  median_ms=float(np.median(t)) if t.size else 0.0,
                                  min_ms=float(t.min()) if t.size else 0.0,
                                  std_ms=float(t.std()) if t.size else 0.0))
        return out


RUNNERS: dict[str, type[Runner]] = {}


def register_runner(cls: type[Runner]) -> type[Runner]:
    """Class decorator: make a runner available by its ``name``."""
    RUNNERS[cls.name] = cls
    return cls
