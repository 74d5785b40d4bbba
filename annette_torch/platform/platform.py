"""`Platform`: a mapping model plus a layer model per layer type, read from and written to one JSON file.

The file is plain data with a versioned schema (see docs/platform-format.md), validated on load with an
error naming the offending field; it is never unpickled.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Mapping

import numpy as np

from ..errors import PlatformError, read_json_file
from ..ir import MERGE_TYPES, SLOW_UNITS, LayerType
from ..mapping import MappingModel, OperatorSupport
from ..models import LayerModel, model_from_dict
from ..models.base import check_number
from ..models.cache import CacheModel
from ..models.calibration import Calibration
from .machine import mismatch
from .tables import ModelTables

__all__ = ["Platform", "SCHEMA", "SCHEMA_VERSION", "LAYER_KEYS", "dumps_platform", "VECTOR", "VECTOR_ACT", "CONST",
           "VECTOR_ROWS", "vector_rows"]

log = logging.getLogger(__name__)

SCHEMA = "annette-torch/platform"
#: 2: tree ensembles' node arrays packed (`annette_torch.models.trees.pack_array`); version 1 files still load
SCHEMA_VERSION = 2
#: machine-mismatch warnings already logged in this process
_WARNED: set[str] = set()
#: Layer-model keys a platform may define: every type label plus the fallback groups.
LAYER_KEYS = frozenset({t.label for t in LayerType} | {"Base", "Pool"})


class Platform:
    """A mapping model plus layer models keyed by layer type (``Base`` is the mandatory fallback).

    Plain data, validated on load; `annette_torch.prediction` turns a network into times with it.
    """

    #: whether the layer models follow the original ANNETTE release's semantics (`AnnetteCompatPlatform`)
    original_semantics = False

    def __init__(self, name: str, layers: Mapping[str, LayerModel], mapping: MappingModel | None = None,
                 description: str = "", meta: Mapping[str, Any] | None = None) -> None:
        if "Base" not in layers:
            raise PlatformError(f"platform {name!r}: layers.Base missing (every layer needs a fallback model)")
        self.name = name
        self.description = description
        #: the file this platform was read from (None if built in memory)
        self.source: str | None = None
        self.layers = dict(layers)
        self.mapping = mapping or MappingModel()
        self.meta = dict(meta or {})
        self.overhead = _read_overhead(self.meta.get("overhead"), name)
        #: per layer kind: (type, kernel (kh, kw), `VECTOR` or None, factor on the overhead's scale)
        #: (`_read_kind_scales`)
        self.kind_scales = _read_kind_scales(self.meta.get("overhead"), name)
        #: layer time (ms) below which the overhead's per-layer cost is paid in proportion (0: every layer in full)
        self.per_layer_ramp_ms = _read_ramp(self.meta.get("overhead"), name)
        #: factor on the overhead's scale for the reorders the mapping costs add (`_read_reorder_scale`); None:
        #: a reorder runs at its layer's scale
        self.reorder_scale = _read_reorder_scale(self.meta.get("overhead"), name)
        #: per layer type (indexed by its value), ms per unit of slow-path work (`_read_slow_ns`); None: none
        self.slow_ms = _read_slow_ns(self.meta.get("slow_ns"), name)
        self.cache = None
        if self.meta.get("cache") is not None:  # in-context weight residency (see models.cache)
            self.cache = CacheModel.from_dict(self.meta["cache"], f"platform {name!r}: cache")
        self.end_to_end = None
        if "end_to_end" in self.meta:  # network-level calibration (see models.calibration)
            self.end_to_end = Calibration.from_dict(self.meta["end_to_end"], f"platform {name!r}: end_to_end")
        #: operator support of the accelerator and the host's layer models (None: everything runs on the device)
        self.support: OperatorSupport | None = None
        self.host: Platform | None = None
        if self.meta.get("support") is not None:
            self.support, self.host = _read_support(self.meta["support"], name)
            self.mapping = self.mapping.blocking(self.support.blocked_pairs())
        #: the layer models laid out for vectorised prediction (`annette_torch.prediction`), the host's after them
        self.tables = ModelTables(self.layers, None if self.host is None else self.host.layers)
        self._labels: list[str] | None = None

    def check_machine(self) -> str | None:
        """For platforms measured on a machine (``fingerprint``): a warning text if this machine differs.

        Returned on the first call per platform object, logged once per process; CPU latencies do not
        transfer between CPUs.
        """
        fp = self.meta.get("fingerprint")
        if not isinstance(fp, dict) or getattr(self, "_machine_checked", False):
            return None
        self._machine_checked = True
        msg = mismatch(self.name, fp)
        if msg is not None and msg not in _WARNED:  # logged once per process, returned to every caller
            _WARNED.add(msg)
            log.warning("%s", msg)
        return msg

    @property
    def stand_in_model(self) -> int | None:
        """Model index of ``Base`` where it stands in for layer types the platform's sweeps lacked (a platform
        measured on a machine: ``fingerprint``); None on a published platform, whose ``Base`` is the
        published model of the types it does not list."""
        return self.tables.keys.index("Base") if "fingerprint" in self.meta else None

    def model_labels(self) -> list[str]:
        """Short description of each model slot, in model-index order (`ModelTables`); a model whose origin
        starts with ``published:`` or ``assumed:`` (a type the platform's measurements lack) says so. The
        host's models (platforms with operator support) follow, labelled ``host:...``."""
        if self._labels is None:
            labels = [f"{self.layers[k].kind}:{k}" + _basis(self.layers[k]) for k in self.layers]
            if self.host is not None:
                labels += ["host:" + lab for lab in self.host.model_labels()]
            self._labels = labels
        return self._labels

    # ------------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The platform file's content."""
        layers = {}
        for k, m in self.layers.items():
            d = m.to_dict()
            origin = getattr(m, "origin", None)
            if origin:
                d["origin"] = origin
            layers[k] = d
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "name": self.name,
                "description": self.description, **self.meta, "layers": layers, "mapping": self.mapping.to_dict()}

    def save(self, path: str | os.PathLike) -> None:
        """Write the platform file (JSON, UTF-8): objects indented, arrays of numbers on one line each."""
        from ..atomic import write_text  # a save that fails or is killed leaves the previous file
        write_text(path, dumps_platform(self.to_dict()) + "\n")

    @classmethod
    def from_dict(cls, d: Any, source: str = "platform") -> "Platform":
        """Validate plain data and build the platform; errors name ``source`` and the field."""
        if not isinstance(d, Mapping):
            raise PlatformError(f"{source}: expected a JSON object at the top level")
        if d.get("schema") != SCHEMA:
            raise PlatformError(f"{source}: schema: expected {SCHEMA!r}, got {d.get('schema')!r}")
        v = d.get("schema_version")
        if not isinstance(v, int) or isinstance(v, bool):
            raise PlatformError(f"{source}: schema_version: expected an integer, got {v!r}")
        if v > SCHEMA_VERSION:
            raise PlatformError(f"{source}: schema_version {v} is newer than this annette-torch understands "
                                f"({SCHEMA_VERSION}); upgrade annette-torch")
        if v < 1:
            raise PlatformError(f"{source}: schema_version: must be >= 1, got {v}")
        name = d.get("name")
        if not isinstance(name, str) or not name:
            raise PlatformError(f"{source}: name: expected a non-empty string")
        layers_d = d.get("layers")
        if not isinstance(layers_d, Mapping) or not layers_d:
            raise PlatformError(f"{source}: layers: expected an object of layer models")
        layers = _read_layers(layers_d, f"{source}: layers")
        mapping = MappingModel.from_dict(d.get("mapping", {"rules": []}), f"{source}: mapping")
        meta = {k: v for k, v in d.items() if k not in ("schema", "schema_version", "name", "description",
                                                         "layers", "mapping")}
        return cls(name, layers, mapping, str(d.get("description", "")), meta)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Platform":
        """Read and validate a platform file."""
        p = os.fspath(path)
        plat = cls.from_dict(read_json_file(p, PlatformError, "platform file"), p)
        plat.source = os.path.abspath(p)
        return plat

    def __repr__(self) -> str:
        return f"Platform({self.name!r}, {len(self.layers)} layer models, {len(self.mapping.rules)} fusion rules)"


def _read_layers(d: Mapping[str, Any], where: str) -> dict[str, LayerModel]:
    """Layer models keyed by `LAYER_KEYS`, each with its ``origin``; errors name ``where.<key>``."""
    layers: dict[str, LayerModel] = {}
    for k, md in d.items():
        if k not in LAYER_KEYS:
            raise PlatformError(f"{where}.{k}: unknown layer type")
        m = model_from_dict(md, f"{where}.{k}")
        if isinstance(md, Mapping) and "origin" in md:
            m.origin = str(md["origin"])  # type: ignore[attr-defined]
        layers[k] = m
    return layers


def _read_support(d: Any, name: str) -> tuple[OperatorSupport, "Platform"]:
    """The ``support`` section: the accelerator's declaration and switch cost, and the host as a platform of
    its own (its ``layers``, ``Base`` required; no mapping)."""
    where = f"platform {name!r}: support"
    support = OperatorSupport.from_dict(d, where)
    host = d.get("host")
    if not isinstance(host, Mapping) or not isinstance(host.get("layers"), Mapping) or not host["layers"]:
        raise PlatformError(f"{where}.host: expected an object with 'layers' (the host's layer models, Base "
                            "required)")
    layers = _read_layers(host["layers"], f"{where}.host.layers")
    if "Base" not in layers:
        raise PlatformError(f"{where}.host.layers.Base: missing (every layer the host runs needs a fallback model)")
    return support, Platform(f"{name} host", layers, description=str(host.get("device", "")))


def _basis(model: LayerModel) -> str:
    """`` (published)`` / `` (assumed)`` for a model not fitted on the platform's own measurements, else ''."""
    origin = str(getattr(model, "origin", "") or "")
    for basis in ("published", "assumed"):
        if origin.startswith(basis + ":"):
            return f" ({basis})"
    return ""


def dumps_platform(d: Any, indent: int = 2, _level: int = 0) -> str:
    """JSON text of platform data: objects indented for reading, each list of scalars on one line.

    Tree ensembles are long number arrays; one number per line (``json.dumps(indent=2)``) triples the file
    (15 MB instead of 5 MB for ONNX Runtime's platform) and the time to parse it. Same content either way.
    """
    if isinstance(d, Mapping) and d:
        pad, inner = " " * (indent * _level), " " * (indent * (_level + 1))
        items = (f"{inner}{json.dumps(str(k))}: {dumps_platform(v, indent, _level + 1)}" for k, v in d.items())
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(d, (list, tuple)) and any(isinstance(v, (Mapping, list, tuple)) for v in d):
        pad, inner = " " * (indent * _level), " " * (indent * (_level + 1))
        return "[\n" + ",\n".join(inner + dumps_platform(v, indent, _level + 1) for v in d) + "\n" + pad + "]"
    return json.dumps(d, separators=(", ", ": "))


def _read_overhead(d: Any, name: str) -> tuple[float, float, float, float] | None:
    """Optional ``overhead``: {scale, per_layer_ms, per_network_ms[, depthwise_scale]} applied to the layer
    models' times.

    A runtime's per-node dispatch cost and per-inference cost, fitted end to end (``annette calibrate``);
    the per-network cost sits on the network's input layer(s), so per-layer times still add up to the total.
    ``per_layer_ms`` may be negative (profiled layer times over-count a per-node profiler cost); a layer's
    time is never below 0. ``depthwise_scale`` (default: ``scale``) scales depthwise convolutions instead:
    how much slower or faster they run inside a network than as micro-kernels depends on the CPU.
    """
    if d is None:
        return None
    where = f"platform {name!r}: overhead"
    if not isinstance(d, Mapping):
        raise PlatformError(f"{where}: expected an object with scale, per_layer_ms, per_network_ms")
    scale = check_number(d, "scale", where, positive=True)
    dw = check_number(d, "depthwise_scale", where, positive=True) if "depthwise_scale" in d else scale
    return (scale, check_number(d, "per_layer_ms", where, minimum=-1.0), check_number(d, "per_network_ms", where,
                                                                                     minimum=0), dw)


def _read_ramp(d: Any, name: str) -> float:
    """Optional ``overhead.per_layer_ramp_ms`` (positive): a layer whose model gives it t ms, below this, pays
    t / ramp of ``per_layer_ms`` (``annette calibrate`` writes `models.calibration.RAMP_MS` where a ramped cost
    predicts left-out networks better); absent: every executed layer pays it in full."""
    if not isinstance(d, Mapping) or d.get("per_layer_ramp_ms") is None:
        return 0.0
    return check_number(d, "per_layer_ramp_ms", f"platform {name!r}: overhead", positive=True)


def _read_reorder_scale(d: Any, name: str) -> float | None:
    """Optional ``overhead.reorder_scale`` (positive): the reorders the mapping costs add (at graph inputs and
    outputs, and between the blocked and the plain layout) run this times the overhead's scale instead of their
    layer's (its kind's factor): a reorder is a copy at the machine's memory speed, which another CPU changes
    unlike its compute (``annette adapt`` measures it on its micro-kernels)."""
    if not isinstance(d, Mapping) or d.get("reorder_scale") is None:
        return None
    return check_number(d, "reorder_scale", f"platform {name!r}: overhead", positive=True)


#: a fully connected layer with fewer rows (batch x tokens) than this is a classifier's, a matrix-vector product
#: (kind ``"FullyConnected vector"`` of ``overhead.kind_scales``)
VECTOR_ROWS = 8
VECTOR = "vector"
#: ... that runs its activation inside (the mapping fused it: ``"FullyConnected vector act"``). Why a kind of its own:
#: OpenVINO on an AMD EPYC with AVX-512 ran a 9216x4096 classifier layer with its ReLU 1.44x as long as without
VECTOR_ACT = "vector act"
#: an element-wise Add / Sub / Mul / Div with one input, its other operand a constant (kind ``"Add const"``)
CONST = "const"


def vector_rows(cols: Mapping[str, Any]) -> np.ndarray:
    """Per layer of a network's columns: whether it has fewer than `VECTOR_ROWS` rows (batch x height x width of
    its input), as a classifier's fully connected layer."""
    return np.asarray(cols["n"] * cols["h_in"] * cols["w_in"], np.float64) < VECTOR_ROWS


def _read_kind_scales(d: Any, name: str) -> tuple[tuple[int, tuple[int, int] | str | None, float], ...]:
    """Optional ``overhead.kind_scales``: {kind: factor}, a kind being a layer type (``"AvgPool"``), a type
    with its kernel (``"Conv 3x3"``) or a fully connected layer of fewer than `VECTOR_ROWS` rows
    (``"FullyConnected vector"``: a classifier's matrix-vector product, memory-bound where a transformer's rows
    are compute-bound; ``"FullyConnected vector act"``: one with a fused activation) or an element-wise layer of
    `MERGE_TYPES` with a constant operand (``"Add const"``: one input, a kernel of its own); these win over the
    type alone. An executed layer of that kind runs ``factor`` times
    the overhead's scale: a runtime's relative speed per layer kind (``annette adapt`` fits them where a
    device's runtime differs from the file's)."""
    if not isinstance(d, Mapping) or d.get("kind_scales") is None:
        return ()
    where = f"platform {name!r}: overhead.kind_scales"
    ks = d["kind_scales"]
    if not isinstance(ks, Mapping):
        raise PlatformError(f"{where}: expected an object {{kind: factor}}")
    out = []
    for kind, _ in ks.items():
        label, _, kernel = str(kind).partition(" ")
        k: tuple[int, ...] | str | None
        try:
            t = int(LayerType.from_label(label))
            if kernel in ("", VECTOR, VECTOR_ACT, CONST):  # ("": the type alone)
                k = kernel or None
            else:
                k = tuple(int(x) for x in kernel.split("x"))
        except (ValueError, KeyError):
            raise PlatformError(f"{where}: {kind!r} is not a layer type, a type and kernel like 'Conv 3x3', "
                                "'FullyConnected vector', 'FullyConnected vector act' or 'Add const'") from None
        if k in (VECTOR, VECTOR_ACT) and t != LayerType.FULLY_CONNECTED:
            raise PlatformError(f"{where}: {kind!r}: only a fully connected layer has a vector kind")
        if k == CONST and t not in MERGE_TYPES:
            raise PlatformError(f"{where}: {kind!r}: only Add, Sub, Mul and Div have a const kind")
        if isinstance(k, tuple) and len(k) != 2:
            raise PlatformError(f"{where}: {kind!r}: the kernel is written like 3x3")
        out.append((t, k, check_number(ks, kind, where, positive=True)))
    # (kernel or vector) specific entries last, a vector layer with its activation after a vector one: they win
    return tuple(sorted(out, key=lambda e: (e[1] is not None, e[1] == VECTOR_ACT)))


def _read_slow_ns(d: Any, name: str) -> np.ndarray | None:
    """Optional ``slow_ns``: {layer type: ns per unit of the layer's slow-path work (`ir.SLOW_UNITS`)}, e.g. a
    subnormal multiply-add of a MatMul, measured by ``annette calibrate``; returned in ms per unit, indexed by
    type value."""
    if d is None:
        return None
    where = f"platform {name!r}: slow_ns"
    if not isinstance(d, Mapping):
        raise PlatformError(f"{where}: expected an object {{layer type: ns per unit}}")
    out = np.zeros(max(int(t) for t in LayerType) + 1)
    for label in d:
        try:
            t = LayerType.from_label(str(label))
        except KeyError:
            raise PlatformError(f"{where}: {label!r} is not a layer type") from None
        if t not in SLOW_UNITS:
            raise PlatformError(f"{where}: {label!r} has no slow path (types with one: "
                                f"{', '.join(sorted(u.label for u in SLOW_UNITS))})")
        out[int(t)] = check_number(d, label, where, minimum=0.0) * 1e-6
    return out
