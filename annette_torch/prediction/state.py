"""`Run`: what the prediction passes read and write for one network or a stack of networks."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import Network
from ..mapping import MappedNetwork, Placement
from ..platform import Platform

__all__ = ["Run", "RUNS_MS"]

#: a layer whose model gives it less time than this (ms) runs in place (`fit.generator.in_place_model`): it pays
#: no per-layer cost and is not counted among the executed layers of the end-to-end calibration
RUNS_MS = 1e-9


@dataclass
class Run:
    """The input of the passes (network, options) and what each pass leaves (per executed layer).

    ``segments``: per original layer, the index of its network when ``network`` stacks ``n`` networks
    (`Network.concat`); None for one network. Options: ``light`` (no names in the mapped network),
    ``context_bytes`` (the traffic of the network a block belongs to, for the cache model),
    ``input_reorders`` / ``output_reorders`` (a block cut out of a network has neither), ``count_input``
    (a block's Input layer is the previous block's output and costs nothing).
    """

    platform: Platform
    network: Network
    segments: np.ndarray | None = None
    n: int = 1
    light: bool = False
    context_bytes: float | np.ndarray | None = None
    input_reorders: bool = True
    output_reorders: bool = True
    count_input: bool = True
    #: `map_layers`: the network as the toolchain executes it
    mapped: MappedNetwork | None = None
    #: `place_layers`: where each executed layer runs (None: the platform declares no operator support)
    placement: Placement | None = None
    #: `layer_models`: per executed layer, the index of the model that costs it (`Platform.model_labels`)
    model: np.ndarray | None = None
    #: `layer_models`: per executed layer, the bytes it moves at its model's bit widths
    layer_bytes: np.ndarray | None = None
    #: per executed layer, its weights' bytes (for the cache model)
    weight_bytes: np.ndarray | None = None
    #: `layer_models`: the host-run layers' times under the host's models (None: nothing runs on the host)
    host_ms: np.ndarray | None = None
    #: per executed layer, its time in ms so far
    time_ms: np.ndarray | None = None
    #: `fused_work`, on a platform with a ``reorder_scale``: per executed layer, the reorders' part of its time
    reorder_ms: np.ndarray | None = None

    @property
    def executed(self) -> Network:
        """The executed layers (the mapped network)."""
        assert self.mapped is not None, "map_layers has not run"
        return self.mapped.network

    @property
    def executed_segments(self) -> np.ndarray | None:
        """Per executed layer, its network (None for one network)."""
        if self.segments is None:
            return None
        assert self.mapped is not None
        return self.segments[self.mapped.kept]

    @property
    def moves(self) -> bool:
        """Whether any executed layer runs on the host or any tensor crosses sides."""
        return self.placement is not None and self.placement.moves

    def accelerator_time_ms(self) -> np.ndarray:
        """Per executed layer, the accelerator's part of its time (0 on the host, switches left out)."""
        assert self.time_ms is not None
        return self.placement.accelerator_part(self.time_ms) if self.moves else self.time_ms  # type: ignore[union-attr]
