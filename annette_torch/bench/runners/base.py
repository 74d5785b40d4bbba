"""Hardware-module interface: one small abstract base, one file per toolchain (Optuna-sampler style)."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import onnx

from ..records import NodeRecord

__all__ = ["Runner", "Profile", "RUNNERS", "register_runner"]


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
    def profile(self, prepared: Any, iterations: int = 20, warmup: int = 3) -> Profile:
        """Run ``warmup`` + ``iterations`` inferences with per-node profiling on."""

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
