"""Estimator: any model description -> `Network` -> the prediction passes -> per-layer and total time.

``estimate`` scores one network and keeps the per-layer detail; ``estimate_many`` stacks many networks
into one and scores them with the same passes (`annette_torch.prediction`) in one go (for NAS loops).
"""

from __future__ import annotations

import csv
import io
import os
import sys
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Sequence

import numpy as np

from .errors import ModelLoadError
from .ir import LayerType, Network
from .mapping import MappedNetwork, Placement
from .platform import Platform, load_platform
from .prediction import Run, run, totals
from .prediction.terms import LATENCY_KINDS, check_kind, network_terms
from .types import PlatformLike

__all__ = ["Estimate", "estimate", "estimate_many", "to_network", "latency_definition", "LATENCY_KINDS"]

TABLE_COLUMNS = ("name", "type", "input_shape", "output_shape", "ops", "bytes", "fused_into", "absorbed",
                 "time_ms", "switch_ms", "model", "executes_on", "flag")
#: `TABLE_COLUMNS`' ``executes_on`` values
ACCELERATOR, HOST = "accelerator", "host"
#: layer types that need no model of their own (the graph input, a no-op; an unknown type is reported apart)
_NO_MODEL_NEEDED = np.array([LayerType.INPUT, LayerType.DROPOUT, LayerType.UNKNOWN])
#: `Estimate.by_type`'s key of the accelerator<->host switches
SWITCHES = "(switches)"


def latency_definition(platform: Platform, kind: str = "latency") -> str:
    """What a latency of ``kind`` (`LATENCY_KINDS`) means on ``platform``, in words (for headers, axes, JSON)."""
    check_kind(kind)
    if kind == "latency" and platform.end_to_end is not None:
        return platform.end_to_end.predicts.split(";")[0].strip() or "end-to-end latency"
    if platform.overhead is not None:  # a CPU runtime: per-layer and per-inference costs fitted end to end
        return "one inference on the runtime: the executed layers' times, calibrated end to end"
    if platform.support is not None:
        return "sum of the executed layers' times (device time, host-run layers and switches included)"
    return "sum of the executed layers' times (device time)"


def to_network(model: Any, input_shape: Sequence[int] | None = None) -> Network:
    """Any supported model description -> `Network`: a Network, an nn.Module (with ``input_shape``),
    a path to an ``.onnx`` file or an ANNETTE ``.json`` graph, or an ``onnx.ModelProto``."""
    if isinstance(model, Network):
        return model
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.exists(path):
            raise ModelLoadError(f"{path}: no such file")
        low = path.lower()
        if low.endswith(".onnx"):
            from .frontends.onnx import from_onnx
            return from_onnx(path, input_shape=input_shape)
        if low.endswith(".json"):
            from .frontends.annette_json import from_annette_json
            return from_annette_json(path)
        raise ModelLoadError(f"{path}: unknown model format (expected .onnx or an ANNETTE .json graph)")
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(model, torch.nn.Module):
        if input_shape is None:
            raise ModelLoadError("an nn.Module needs input_shape, e.g. input_shape=(1, 3, 224, 224)")
        from .frontends.fx import trace
        return trace(model, input_shape)
    onnx = sys.modules.get("onnx")
    if onnx is not None and isinstance(model, onnx.ModelProto):
        from .frontends.onnx import from_onnx
        return from_onnx(model, input_shape=input_shape)
    raise ModelLoadError(f"cannot estimate a {type(model).__name__}: give an nn.Module, a Network, "
                         "or a path to an .onnx / ANNETTE .json file")


@dataclass
class Estimate:
    """The predicted execution time of one network on one platform, per layer and in total.

    Per original layer: ``time_ms`` (0 for layers fused into another), the model that produced it, the
    layer that executes it (``fused_into``) and, on a platform with operator support, whether the accelerator
    or its host runs it (``placement``; see `annette_torch.mapping.support`).

    Which total includes what: `device_ms` is the sum of all executed layers' times, host-run
    layers and accelerator<->host switches included (`accelerator_ms` + `host_ms` + `switch_ms`);
    `latency_ms` is the platform's end-to-end model applied to the accelerator's part plus `host_ms` and
    `switch_ms` where the platform has one, else `device_ms`.
    """

    #: what the prediction passes left (`annette_torch.prediction.Run`)
    run: Run

    @property
    def network(self) -> Network:
        """The network as given (before mapping)."""
        return self.run.network

    @property
    def platform(self) -> Platform:
        """The platform the estimate was made for."""
        return self.run.platform

    @property
    def mapped(self) -> MappedNetwork:
        """The network as the platform's toolchain executes it, and where each original layer went."""
        assert self.run.mapped is not None
        return self.run.mapped

    @property
    def mapped_time_ms(self) -> np.ndarray:
        """Per executed layer: its time in ms (host-run layers and switches included)."""
        assert self.run.time_ms is not None
        return self.run.time_ms

    @property
    def mapped_model(self) -> np.ndarray:
        """Per executed layer: the index of the model that costed it (into `Platform.model_labels`)."""
        assert self.run.model is not None
        return self.run.model

    @property
    def placement(self) -> Placement | None:
        """Where each executed layer runs (None: the platform declares no operator support, all on its device)."""
        return self.run.placement

    @cached_property
    def device_ms(self) -> float:
        """The executed layers' times in ms: the accelerator's (or CPU runtime's) execution time, plus the
        host-run layers and the switches between them on a platform with operator support."""
        return float(totals(self.run, "device")[0])

    @cached_property
    def on_host(self) -> np.ndarray:
        """Per executed layer: whether the host runs it (all False without operator support)."""
        pl = self.placement
        return np.zeros(len(self.mapped_time_ms), dtype=bool) if pl is None else pl.on_host

    @cached_property
    def _switch(self) -> np.ndarray:
        pl = self.placement
        return np.zeros(len(self.mapped_time_ms)) if pl is None else pl.switch_ms

    @cached_property
    def accelerator_time_ms(self) -> np.ndarray:
        """Per executed layer: its time on the accelerator (0 for host-run layers, switches left out)."""
        return self.run.accelerator_time_ms()

    @property
    def accelerator_ms(self) -> float:
        """The accelerator's part of `device_ms` (all of it without host-run layers and switches)."""
        return float(self.accelerator_time_ms.sum())

    @property
    def host_ms(self) -> float:
        """Time of the host-run layers in ms (their switches not included)."""
        on = self.on_host
        return float((self.mapped_time_ms[on] - self._switch[on]).sum()) if on.any() else 0.0

    @property
    def switch_ms(self) -> float:
        """Time of the tensors crossing between accelerator and host, in ms."""
        return float(self._switch.sum())

    @property
    def switches(self) -> int:
        """Number of tensors crossing between accelerator and host."""
        return 0 if self.placement is None else self.placement.switches

    @property
    def host_layers(self) -> list[str]:
        """Names of the executed layers the host runs."""
        names = self.network.names
        return [names[int(r)] for r in self.mapped.kept[self.on_host]]

    def host_summary(self) -> str:
        """``3 of 57 executed layers run on the host (SiLU x2, Resize)``; '' without operator support."""
        if self.platform.support is None:
            return ""
        n, k = len(self.mapped.kept), int(self.on_host.sum())
        text = f"{k} of {n} executed layers run on the host"
        if k:
            labels = self.mapped.network.type_labels()
            counts: dict[str, int] = {}
            for i in np.flatnonzero(self.on_host):
                counts[labels[i]] = counts.get(labels[i], 0) + 1
            text += " (" + ", ".join(f"{lab} x{c}" if c > 1 else lab
                                     for lab, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))) + ")"
        return text

    @property
    def latency_ms(self) -> float:
        """The latency the platform's users measure, in ms (see `latency_definition`): end to end where the
        platform has a network-level model (the ZCU102's whole-application latency), else the layer sum."""
        e2e = self.e2e_ms
        return self.device_ms if e2e is None else e2e

    @property
    def latency_definition(self) -> str:
        """What `latency_ms` is on this platform, in words."""
        return latency_definition(self.platform)

    @cached_property
    def e2e_ms(self) -> float | None:
        """End-to-end latency from the platform's network-level calibration (None if it has none).

        E.g. the ZCU102's whole-application latency: accelerator time scaled plus host-side overheads; layers
        the accelerator leaves to the host and the switches to them add their own time (`host_ms`,
        `switch_ms`) unscaled.
        """
        if self.platform.end_to_end is None:
            return None
        return float(totals(self.run, "latency")[0])

    @property
    def terms(self) -> dict[str, float]:
        """The network-level terms of this estimate (`annette_torch.prediction.terms`), which a platform's
        end-to-end calibration maps to `latency_ms`."""
        return {k: float(v[0]) for k, v in network_terms(self.run).items()}

    @cached_property
    def time_ms(self) -> np.ndarray:
        """Per original layer: its predicted time (a fused group's time sits on its executing layer)."""
        t = np.zeros(len(self.network))
        t[self.mapped.kept] = self.mapped_time_ms
        return t

    @cached_property
    def model_used(self) -> list[str]:
        """Per original layer: ``kind:key`` of the layer model that estimated it ('fused' if absorbed)."""
        labels = self.platform.model_labels()
        out = ["fused"] * len(self.network)
        for row, m in zip(self.mapped.kept, self.mapped_model):
            out[row] = labels[m]
        return out

    @property
    def unknown_layers(self) -> list[str]:
        """Names of layers of unsupported type (estimated from their tensor sizes only)."""
        return [self.network.names[i] for i in np.flatnonzero(self.network.types == LayerType.UNKNOWN)]

    @property
    def flagged_layers(self) -> list[str]:
        """On a platform with operator support: names of the layers of a type nobody declared (Unknown), kept
        on the accelerator and costed from their tensor sizes; [] elsewhere."""
        return self.unknown_layers if self.platform.support is not None else []

    @cached_property
    def fallback_rows(self) -> np.ndarray:
        """Original rows of the executed layers that no model of their own type estimated: the platform's
        generic ``Base`` roofline stood in (`Platform.stand_in_model`), e.g. for a Softplus its sweeps lacked."""
        base = self.platform.stand_in_model
        if base is None:
            return np.zeros(0, dtype=np.int64)
        hit = (self.mapped_model == base) & ~np.isin(self.mapped.network.types, _NO_MODEL_NEEDED)
        return self.mapped.kept[hit]

    @property
    def fallback_layers(self) -> list[str]:
        """Names of the layers `fallback_rows` holds: their times may be far off."""
        return [self.network.names[i] for i in self.fallback_rows]

    def fallback_summary(self) -> str:
        """The types of the `fallback_layers` with counts, largest count first (e.g. ``Softplus x72``)."""
        labels = self.network.type_labels()
        return ", ".join(f"{k} x{v}" for k, v in Counter(labels[i] for i in self.fallback_rows).most_common())

    def by_type(self) -> dict[str, float]:
        """Predicted time per executed layer type (after fusion), in ms, largest first; accelerator<->host
        switches under ``(switches)``."""
        labels = self.mapped.network.type_labels()
        acc: dict[str, float] = {}
        moves = self.placement is not None and self.placement.moves
        times = self.mapped_time_ms - self._switch if moves else self.mapped_time_ms
        for lab, t in zip(labels, times):
            acc[lab] = acc.get(lab, 0.0) + float(t)
        if moves and self.switches:
            acc[SWITCHES] = self.switch_ms
        return dict(sorted(acc.items(), key=lambda kv: -kv[1]))

    def table(self) -> list[dict[str, Any]]:
        """One row per original layer with the columns of `TABLE_COLUMNS`: ``time_ms`` is what the layer costs
        (0 when fused into another), ``switch_ms`` the part of it spent waiting for tensors crossing between
        accelerator and host (`switch_ms`)."""
        net, m = self.network, self.mapped
        labels = net.type_labels()
        mapped_labels = m.network.type_labels()
        kept_pos = {int(r): i for i, r in enumerate(m.kept)}
        absorbed: dict[int, list[str]] = {}
        for i, r in enumerate(m.fused_into):
            if r != i:
                absorbed.setdefault(int(r), []).append(net.names[i])
        plat_bytes = self.run.layer_bytes  # (host-run layers at the host's widths)
        assert plat_bytes is not None
        switch = self._switch
        host_of = {int(r): bool(h) for r, h in zip(m.kept, self.on_host)}
        flags = self._flags()
        dims = net.attrs.get("dims")  # a tensor's own shape where the NCHW columns fold it (front ends)
        first_parent = {int(d): int(p) for p, d in net.edges[::-1].tolist()}
        rows = []
        for i, name in enumerate(net.names):
            r = int(m.fused_into[i])
            k = kept_pos.get(i)
            p = first_parent.get(i, i if net.types[i] == LayerType.INPUT else None)  # an input reads itself
            shape_in = dims[p] if dims is not None and p is not None and dims[p] is not None else net.in_shape(i)
            shape_out = dims[i] if dims is not None and dims[i] is not None else net.out_shape(i)
            rows.append({
                "name": name,
                "type": mapped_labels[k] if k is not None else labels[i],
                "input_shape": "x".join(map(str, shape_in)),
                "output_shape": "x".join(map(str, shape_out)),
                "ops": float(net.ops[i]),
                "bytes": float(plat_bytes[k]) if k is not None else 0.0,
                "fused_into": net.names[r] if r != i else "",
                "absorbed": ";".join(absorbed.get(i, [])),
                "time_ms": float(self.time_ms[i]),
                "switch_ms": float(switch[k]) if k is not None else 0.0,
                "model": self.model_used[i],
                "executes_on": HOST if host_of.get(r, False) else ACCELERATOR,
                "flag": flags.get(i, ""),
            })
        return rows

    def _flags(self) -> dict[int, str]:
        """Per original layer row: why it is flagged (layers no model of their type estimated; layers of unknown
        type on a platform with operator support)."""
        labels = self.network.type_labels()
        out = {int(i): f"no {labels[i]} model in {self.platform.name}: costed by its generic Base roofline, may be "
                       "far off" for i in self.fallback_rows}
        if self.platform.support is None:
            return out
        ops = self.network.attrs.get("op")
        for i in np.flatnonzero(self.network.types == LayerType.UNKNOWN):
            op = (ops[i] if ops else None) or "?"
            out[int(i)] = (f"unknown type (op {op}): not in the operator support, kept on the accelerator and "
                           "costed from its tensor sizes")
        return out

    def to_dict(self, per_layer: bool = True) -> dict[str, Any]:
        """JSON-ready summary: network, platform (its file and the toolchain release it models, where it says),
        latency_ms with its definition, device_ms
        time by type, unknown layers, layers; on a platform with operator support
        also the accelerator, host and switch parts, the host-run and the flagged layers."""
        d: dict[str, Any] = {"network": self.network.name, "platform": self.platform.name,
                             "platform_file": self.platform.source, "toolchain": self.platform.meta.get("toolchain"),
                             "latency_ms": self.latency_ms,
                             "latency_definition": self.latency_definition, "device_ms": self.device_ms,
                             "layers_in": len(self.network),
                             "layers_executed": len(self.mapped.kept), "by_type_ms": self.by_type(),
                             "unknown_layers": self.unknown_layers, "fallback_layers": self.fallback_layers}
        if self.platform.support is not None:
            d.update(accelerator_ms=self.accelerator_ms, host_ms=self.host_ms, switch_ms=self.switch_ms,
                     switches=self.switches, layers_on_host=int(self.on_host.sum()), host_layers=self.host_layers,
                     host_summary=self.host_summary(), flagged_layers=self.flagged_layers)
        if self.platform.end_to_end is not None:
            d["e2e_ms"] = self.e2e_ms
            d["e2e_predicts"] = self.platform.end_to_end.predicts
        if per_layer:
            d["layers"] = self.table()
        return d

    def to_csv(self, path: str | os.PathLike | None = None) -> str:
        """The per-layer table as CSV text; also written to ``path`` when given."""
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(TABLE_COLUMNS), lineterminator="\n")
        w.writeheader()
        w.writerows(self.table())
        text = buf.getvalue()
        if path is not None:
            from .atomic import write_text
            write_text(path, text)
        return text

    def __repr__(self) -> str:
        return (f"Estimate({self.network.name!r} on {self.platform.name}: {self.latency_ms:.4f} ms, "
                f"{len(self.network)} layers -> {len(self.mapped.kept)} executed)")


def estimate(model: Any, platform: PlatformLike = "zcu102", input_shape: Sequence[int] | None = None) -> Estimate:
    """Predict the execution time of ``model`` on ``platform`` (a shipped name or a platform file; default
    ``zcu102``); ``input_shape`` is needed for an nn.Module (and may override an ONNX model's)."""
    plat = load_platform(platform)
    plat.check_machine()
    return Estimate(run(plat, to_network(model, input_shape)))


def estimate_many(networks: Sequence[Any], platform: PlatformLike = "zcu102", chunk_layers: int = 200_000,
                  latency: str = "latency") -> np.ndarray:
    """Predicted latency (ms) of each network on ``platform`` (default ``zcu102``), scored in vectorised
    passes over stacks of networks: `Estimate.latency_ms` by default, `Estimate.device_ms` (the layer sum)
    with ``latency="device"``.

    Networks are stacked ``chunk_layers`` layers at a time: large enough that numpy's per-call overhead
    vanishes, small enough that the working set stays in cache and memory is reused between chunks.
    """
    check_kind(latency)
    plat = load_platform(platform)
    nets = [n if isinstance(n, Network) else to_network(n) for n in networks]
    out = np.zeros(len(nets))
    start = 0
    while start < len(nets):
        stop, layers = start, 0
        while stop < len(nets) and (layers == 0 or layers + len(nets[stop].types) <= chunk_layers):
            layers += len(nets[stop].types)
            stop += 1
        big, seg = Network.concat(nets[start:stop], keep_names=False)
        out[start:stop] = totals(run(plat, big, seg, stop - start, light=True), latency)
        start = stop
    return out
