"""Accuracy validation: whole-network latency measurements of networks never used in fitting, compared
with what fitted platform variants predict.

Pieces (used by ``benchmarks/accuracy.py``; library code, it logs and never prints):

- `validation_networks`: the validation set, deterministic: the zoo's architectures (traced), the ANNETTE
  reference graphs that convert and export (converted through the IR), and random NAS-Bench-101 cells;
- `measure_latency`: one network's end-to-end latency on ``ort-cpu`` or ``openvino-cpu`` with the runtime
  settings of the benchmark runners (1 thread, all graph optimisations / latency hint, float32) but without
  per-node profiling: the minimum over ``repeats`` of the median of ``runs`` timed inferences, and the spread
  of the per-repeat medians (the network's noise floor);
- `MeasurementCache`: an SQLite file keyed by (platform, network name, network fingerprint, machine key),
  one transaction per network, so an interrupted benchmark resumes where it stopped;
- `metrics` and `compare`: MAPE, share within +-10 %, Spearman rho, max error per platform variant, on
  real architectures, on NAS cells and overall.

Time is in milliseconds everywhere.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import sqlite3
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ..errors import AnnetteError
from ..ir import INT_COLUMNS, LayerType, Network

__all__ = [
    "ValidationNet", "Measurement", "MeasurementCache", "Comparison", "PLATFORMS", "GROUPS",
    "validation_networks", "network_fingerprint", "layer_signature", "WEIGHTED_TYPES", "machine_key", "runtime_info", "measure_latency",
    "measure_all", "metrics", "compare", "load_variants", "store_layer_points", "ValidationError",
]

log = logging.getLogger(__name__)

#: Runtimes `measure_latency` can time.
PLATFORMS = ("ort-cpu", "openvino-cpu")
#: Network groups of the report: real architectures (zoo + reference graphs), NAS cells, all.
GROUPS = ("real", "nb101", "all")
#: Zoo models left out of the validation set (toy networks for tests).
TINY_ZOO = ("tiny_cnn", "tiny_resnet")
#: Reference graphs smaller than this (operations) are building blocks, not architectures.
MIN_REFERENCE_OPS = 1e7


class ValidationError(AnnetteError):
    """A validation measurement or comparison cannot be done (unknown platform, bad arguments)."""


# ------------------------------------------------------------------------------------------------------
# the validation set


@dataclass
class ValidationNet:
    """One validation network: ``name`` (unique, ``zoo/...``, ``ref/...``, ``nb101/...``), ``kind``
    (``zoo`` | ``reference`` | ``nb101``), its IR and input shape.

    ``source`` says how it becomes ONNX for measurement: ``"ir"`` (`annette_torch.bench.export.to_onnx`)
    or ``"torch"`` (``torch.onnx.export`` of the zoo module, for the few zoo models whose IR the exporter
    cannot express).
    """

    name: str
    kind: str
    network: Network
    input_shape: tuple[int, ...]
    source: str = "ir"
    _fp: str | None = field(default=None, repr=False, compare=False)

    @property
    def group(self) -> str:
        """``"nb101"`` for NAS cells, ``"real"`` for architectures."""
        return "nb101" if self.kind == "nb101" else "real"

    @property
    def fingerprint(self) -> str:
        """`network_fingerprint` of the IR (cached)."""
        if self._fp is None:
            self._fp = network_fingerprint(self.network)
        return self._fp

    def to_onnx(self):
        """The ONNX model that is measured (random weights, deterministic); a zoo model whose IR does not
        export falls back to ``torch.onnx.export``."""
        if self.source == "torch":
            return _torch_onnx(self.name.split("/", 1)[1], self.input_shape)
        from ..bench.export import ExportError, to_onnx
        try:
            return to_onnx(self.network)
        except ExportError:
            if self.kind != "zoo":
                raise
            self.source = "torch"
            return _torch_onnx(self.name.split("/", 1)[1], self.input_shape)


def network_fingerprint(net: Network) -> str:
    """Hash (hex, 16 chars) of what determines a network's latency: layer types, every integer column and
    the edges. Layer and network names are left out, so renaming a network keeps its cached measurement."""
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(net.types, dtype=np.int64).tobytes())
    for c in INT_COLUMNS:
        h.update(c.encode())
        h.update(np.ascontiguousarray(net.cols[c], dtype=np.int64).tobytes())
    h.update(b"edges")
    h.update(np.ascontiguousarray(net.edges, dtype=np.int64).reshape(-1).tobytes())
    return h.hexdigest()[:16]


def _torch_onnx(zoo_name: str, input_shape: Sequence[int]):
    import io

    import onnx
    import torch

    from .. import zoo
    torch.manual_seed(0)
    module = zoo.get(zoo_name).eval()
    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(module, torch.randn(*input_shape), buf, dynamo=False, opset_version=17,
                          input_names=["x"])
    return onnx.load_from_string(buf.getvalue())


def _exports(net: Network) -> str | None:
    """None when the IR exports to ONNX, else the exporter's message."""
    from ..bench.export import to_onnx
    try:
        to_onnx(net)
    except AnnetteError as e:
        return str(e)
    return None


#: Layer types with weights: what makes two graphs the same architecture for `validation_networks`.
WEIGHTED_TYPES = (LayerType.CONV, LayerType.DEPTHWISE_CONV, LayerType.GROUP_CONV, LayerType.CONV_TRANSPOSE,
                  LayerType.FULLY_CONNECTED, LayerType.MATMUL)


def layer_signature(net: Network, types: Sequence[LayerType] | None = None) -> str:
    """Hash of the network's layers as a multiset (type, shapes, kernel, stride, dilation, groups), order,
    padding and edges left out; with ``types`` only layers of those types count.

    Two graphs of one architecture from different sources (layer order, padding stored explicitly or as
    SAME, BatchNorm folded or not, an extra Dropout or Pad node) get the same signature with
    ``types=WEIGHTED_TYPES``.
    """
    cols = [c for c in INT_COLUMNS if c not in ("ph", "pw")]
    rows = np.column_stack([np.asarray(net.types, dtype=np.int64)] + [np.asarray(net.cols[c], np.int64) for c in cols])
    if types is not None:
        rows = rows[np.isin(net.types, np.asarray([int(t) for t in types]))]
    rows = rows[np.lexsort(rows.T[::-1])] if len(rows) else rows
    return hashlib.sha256(np.ascontiguousarray(rows).tobytes()).hexdigest()[:16]


def validation_networks(kinds: Sequence[str] = ("zoo", "reference", "nb101"), n_nb101: int = 50,
                        seed: int = 12345, check_export: bool = True, max_gops: float | None = None,
                        reference: str | os.PathLike | None = None) -> list[ValidationNet]:
    """The validation set, deterministic (same names, networks and order on every call).

    - ``zoo``: every model of `annette_torch.zoo` except the toy ones (`TINY_ZOO`), traced at its input
      shape; a model whose IR does not export is measured through ``torch.onnx.export`` (``source="torch"``);
    - ``reference``: every graph of the ANNETTE reference data (``reference`` folder, default
      `annette_torch.bench.suites.reference_dir`) that converts, has no Unknown layers and (with
      ``check_export``) exports to ONNX; building blocks under `MIN_REFERENCE_OPS` operations are left out;
    - ``nb101``: ``n_nb101`` distinct random NAS-Bench-101 cells drawn with ``seed``.

    A zoo model or reference graph with the same convolution and fully-connected layers
    (`layer_signature` over `WEIGHTED_TYPES`) as an earlier one is left out: the reference data holds
    several copies of ResNet-18, SqueezeNet, MobileNet-v1, VGG-16, DenseNet-121 (NAS cells are distinct by
    their graph hash and all kept). ``max_gops`` leaves out networks above that many giga-operations (to
    bound measurement time). Every skip is logged (INFO) with its reason.
    """
    for k in kinds:
        if k not in ("zoo", "reference", "nb101"):
            raise ValidationError(f"unknown validation kind {k!r} (known: zoo, reference, nb101)")
    out: list[ValidationNet] = []
    seen: dict[str, str] = {}

    def admit(name: str, net: Network, dedupe: bool = True) -> bool:
        if max_gops is not None and net.total_ops > max_gops * 1e9:
            log.info("validation: %s skipped: %.1f GOPs > max_gops=%g", name, net.total_ops / 1e9, max_gops)
            return False
        if not dedupe:
            return True
        sig = layer_signature(net, WEIGHTED_TYPES)
        if sig in seen:
            log.info("validation: %s skipped: same conv/fc layers as %s", name, seen[sig])
            return False
        seen[sig] = name
        return True

    def forget(net: Network) -> None:
        seen.pop(layer_signature(net, WEIGHTED_TYPES), None)

    if "zoo" in kinds:
        from .. import zoo
        from ..frontends.fx import trace
        for name in zoo.names():
            if name in TINY_ZOO:
                continue
            shape = tuple(zoo.INPUT_SHAPES[name])
            net = trace(zoo.get(name), shape)
            if not admit(f"zoo/{name}", net):
                continue
            source = "ir"
            if check_export:
                err = _exports(net)
                if err is not None:
                    log.info("validation: zoo/%s does not export through the IR (%s); measured through "
                             "torch.onnx.export", name, err)
                    source = "torch"
            out.append(ValidationNet(f"zoo/{name}", "zoo", net, shape, source))
    if "reference" in kinds:
        out.extend(_reference_networks(reference, check_export, admit, forget))
    if "nb101" in kinds:
        from ..search.spaces import nb101
        specs = nb101.sample(int(n_nb101), np.random.default_rng(seed))
        for i, spec in enumerate(specs):
            net = nb101.build_network(spec.matrix, spec.ops)
            h = nb101.spec_hash(spec.matrix, spec.ops)[:8]
            net.name = f"nb101-{i:03d}-{h}"
            if admit(f"nb101/{i:03d}-{h}", net, dedupe=False):
                out.append(ValidationNet(f"nb101/{i:03d}-{h}", "nb101", net, tuple(nb101.INPUT_SHAPE)))
    log.info("validation: %d networks (%s)", len(out),
             ", ".join(f"{k}: {sum(v.kind == k for v in out)}" for k in kinds))
    return out


def _reference_networks(reference: str | os.PathLike | None, check_export: bool,
                        admit: Callable[[str, Network], bool],
                        forget: Callable[[Network], None]) -> list[ValidationNet]:
    from ..frontends.annette_json import from_annette_json
    if reference is None:
        from ..bench.suites import reference_dir
        ref = reference_dir()
        if ref is None:
            log.warning("validation: the ANNETTE reference data folder was not found; no reference graphs")
            return []
        reference = ref
    graphs = Path(reference)
    if (graphs / "graphs").is_dir():
        graphs = graphs / "graphs"
    out = []
    for p in sorted(graphs.glob("*.json")):
        name = f"ref/{p.stem}"
        try:
            net = from_annette_json(p)
        except AnnetteError as e:
            log.info("validation: %s skipped: does not convert (%s)", name, str(e).splitlines()[0])
            continue
        unknown = int((net.types == LayerType.UNKNOWN).sum())
        if unknown:
            log.info("validation: %s skipped: %d Unknown layer(s) (%s)", name, unknown,
                     ", ".join(net.unknown_ops())[:80])
            continue
        if net.total_ops < MIN_REFERENCE_OPS:
            log.info("validation: %s skipped: %.0f operations, a building block", name, net.total_ops)
            continue
        if not admit(name, net):  # size and duplicate checks first: exporting big graphs takes seconds
            continue
        if check_export:
            err = _exports(net)
            if err is not None:
                log.info("validation: %s skipped: does not export (%s)", name, err.splitlines()[0])
                forget(net)
                continue
        n0 = np.flatnonzero(net.types == LayerType.INPUT)
        shape = net.out_shape(int(n0[0])) if n0.size else net.in_shape(0)
        out.append(ValidationNet(name, "reference", net, tuple(shape)))
    return out


# ------------------------------------------------------------------------------------------------------
# measurement


@dataclass(frozen=True)
class Measurement:
    """End-to-end latency of one network: ``median_ms`` = min over repeats of the per-repeat median;
    ``spread`` = (max - min) / min of the per-repeat medians (the noise floor of this network).

    ``busy`` is the machine's 1-minute load average right after measuring minus this process's own share
    (1): other runnable processes. On a shared machine a steady competitor slows every repeat alike, which
    the spread cannot show; a ``busy`` near or above the free cores flags such a measurement.
    """

    median_ms: float
    spread: float
    repeat_medians: tuple[float, ...] = ()
    min_ms: float = float("nan")
    runs: int = 0
    repeats: int = 0
    warmup: int = 0
    seconds: float = 0.0
    busy: float = float("nan")

    @classmethod
    def from_times(cls, times_ms: np.ndarray, warmup: int = 0, seconds: float = 0.0,
                   busy: float = float("nan")) -> "Measurement":
        """From a (repeats, runs) array of per-inference times."""
        t = np.atleast_2d(np.asarray(times_ms, dtype=np.float64))
        med = np.median(t, axis=1)
        lo = float(med.min())
        spread = float((med.max() - lo) / lo) if lo > 0 else 0.0
        return cls(lo, spread, tuple(float(x) for x in med), float(t.min()), int(t.shape[1]), int(t.shape[0]),
                   int(warmup), float(seconds), float(busy))

    def merge(self, other: "Measurement") -> "Measurement":
        """Both measurements' repeats as one: the minimum of all repeat medians, their spread."""
        med = np.array(self.repeat_medians + other.repeat_medians) if self.repeat_medians and other.repeat_medians \
            else np.array([self.median_ms, other.median_ms])
        lo = float(med.min())
        return Measurement(lo, float((med.max() - lo) / lo) if lo > 0 else 0.0, tuple(float(x) for x in med),
                           float(np.nanmin([self.min_ms, other.min_ms])), min(self.runs, other.runs),
                           self.repeats + other.repeats, max(self.warmup, other.warmup), self.seconds + other.seconds,
                           float(np.nanmin([self.busy, other.busy])) if not (math.isnan(self.busy) and
                                                                              math.isnan(other.busy)) else math.nan)


def _ort_timer(model_bytes: bytes, threads: int) -> tuple[Callable[[], None], Callable[[], None]]:
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    sess = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    dtypes = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
              "tensor(int64)": np.int64, "tensor(int32)": np.int32}
    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in i.shape]
        dt = dtypes.get(i.type, np.float32)
        feeds[i.name] = rng.random(shape).astype(dt)

    def run() -> None:
        sess.run(None, feeds)
    return run, lambda: None


def _ov_timer(model_bytes: bytes, threads: int) -> tuple[Callable[[], None], Callable[[], None]]:
    from ..bench.runners.openvino import _ov
    ov = _ov()
    core = ov.Core()
    fd, path = tempfile.mkstemp(prefix="annette-val-", suffix=".onnx")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(model_bytes)
        model = core.read_model(path)
        compiled = core.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": str(threads),
                                                      "PERFORMANCE_HINT": "LATENCY",
                                                      "INFERENCE_PRECISION_HINT": "f32"})
    finally:
        os.remove(path)
    req = compiled.create_infer_request()
    rng = np.random.default_rng(0)
    for port in compiled.inputs:
        shape = [int(d) for d in port.get_shape()]
        dt = port.get_element_type().to_dtype()
        req.set_tensor(port, ov.Tensor(rng.random(shape).astype(dt)))

    def run() -> None:
        req.infer()
    return run, lambda: None


_TIMERS = {"ort-cpu": _ort_timer, "openvino-cpu": _ov_timer}


def runtime_info(platform: str) -> dict[str, Any]:
    """Runtime name, version and the session settings `measure_latency` uses on ``platform``."""
    if platform == "ort-cpu":
        import onnxruntime as ort
        return {"runtime": "onnxruntime", "version": ort.__version__, "provider": "CPUExecutionProvider",
                "threads": 1, "opt_level": "all"}
    if platform == "openvino-cpu":
        from ..bench.runners.openvino import _ov, _ov_version
        return {"runtime": "openvino", "version": _ov_version(_ov()), "device": "CPU", "threads": 1,
                "performance_hint": "LATENCY", "precision": "f32"}
    raise ValidationError(f"unknown platform {platform!r} for measurement (known: {', '.join(PLATFORMS)})")


def machine_key(platform: str) -> str:
    """Hex key of the measuring machine and runtime: `machine_fingerprint` (1 thread) plus the runtime's
    name, version and settings. Measurements cached under another key are not reused."""
    from ..platform.machine import machine_fingerprint
    d = {"machine": machine_fingerprint(threads=1), "runtime": runtime_info(platform)}
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def measure_latency(net_or_onnx: Any, platform: str, runs: int = 30, repeats: int = 3, warmup: int = 5,
                    threads: int = 1) -> Measurement:
    """End-to-end latency (ms) of a `Network`, a `ValidationNet`, an ``onnx.ModelProto`` or ONNX bytes on
    ``platform`` (``"ort-cpu"`` or ``"openvino-cpu"``).

    ``warmup`` untimed inferences, then ``repeats`` rounds of ``runs`` timed ones in the same session:
    the result is the minimum over rounds of the round's median, with the rounds' spread.
    """
    if platform not in _TIMERS:
        raise ValidationError(f"unknown platform {platform!r} for measurement (known: {', '.join(PLATFORMS)})")
    if int(runs) < 1 or int(repeats) < 1 or int(warmup) < 0:
        raise ValidationError(f"need runs >= 1, repeats >= 1, warmup >= 0 (got {runs}, {repeats}, {warmup})")
    t0 = time.perf_counter()
    if isinstance(net_or_onnx, ValidationNet):
        model = net_or_onnx.to_onnx().SerializeToString()
    elif isinstance(net_or_onnx, Network):
        from ..bench.export import to_onnx
        model = to_onnx(net_or_onnx).SerializeToString()
    elif isinstance(net_or_onnx, (bytes, bytearray)):
        model = bytes(net_or_onnx)
    elif hasattr(net_or_onnx, "SerializeToString"):
        model = net_or_onnx.SerializeToString()
    else:
        raise ValidationError(f"cannot measure a {type(net_or_onnx).__name__}: give a Network, a ValidationNet, "
                              "an onnx.ModelProto or serialized ONNX bytes")
    run, close = _TIMERS[platform](model, int(threads))
    del model
    try:
        for _ in range(int(warmup)):
            run()
        times = np.empty((int(repeats), int(runs)))
        clock = time.perf_counter_ns
        for r in range(int(repeats)):
            for k in range(int(runs)):
                a = clock()
                run()
                times[r, k] = (clock() - a) * 1e-6
    finally:
        close()
    return Measurement.from_times(times, warmup, time.perf_counter() - t0, _busy())


def _busy() -> float:
    """Other runnable processes: 1-minute load average minus this measuring process (nan if unknown)."""
    try:
        return max(0.0, os.getloadavg()[0] - 1.0)
    except (OSError, AttributeError):  # pragma: no cover - no load average on this OS
        return math.nan


# ------------------------------------------------------------------------------------------------------
# cache

_CACHE_SCHEMA = """
CREATE TABLE IF NOT EXISTS measurements (
    platform TEXT NOT NULL,
    network TEXT NOT NULL,
    fingerprint TEXT NOT NULL,       -- network_fingerprint of the IR
    machine TEXT NOT NULL,           -- machine_key: machine + runtime version + settings
    median_ms REAL NOT NULL,
    spread REAL NOT NULL,
    repeat_medians TEXT NOT NULL,    -- JSON list
    min_ms REAL, runs INTEGER NOT NULL, repeats INTEGER NOT NULL, warmup INTEGER NOT NULL,
    seconds REAL, busy REAL, info TEXT, created REAL NOT NULL,
    PRIMARY KEY (platform, network, fingerprint, machine)
);
"""


class MeasurementCache:
    """SQLite cache of whole-network measurements, keyed by (platform, network name, network fingerprint,
    machine key). Each `put` is one transaction, so a benchmark killed at any moment keeps every network it
    finished and re-measures only the rest."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        d = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(d):
            raise ValidationError(f"{self.path}: folder {d} does not exist")
        try:
            self.db = sqlite3.connect(self.path, timeout=30)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.executescript(_CACHE_SCHEMA)
            cols = {r[1] for r in self.db.execute("PRAGMA table_info(measurements)")}
            if "busy" not in cols:  # a cache written before the column existed
                with self.db:
                    self.db.execute("ALTER TABLE measurements ADD COLUMN busy REAL")
        except sqlite3.DatabaseError as e:
            raise ValidationError(f"{self.path}: not a measurement cache ({e})") from None

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "MeasurementCache":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(self, platform: str, network: str, fingerprint: str, machine: str, runs: int = 0,
            repeats: int = 0) -> Measurement | None:
        """The cached measurement, or None; entries taken with fewer ``runs`` / ``repeats`` than asked
        for do not count (a full pass re-measures what a quick pass stored)."""
        row = self.db.execute(
            "SELECT median_ms, spread, repeat_medians, min_ms, runs, repeats, warmup, seconds, busy FROM measurements "
            "WHERE platform=? AND network=? AND fingerprint=? AND machine=?",
            (platform, network, fingerprint, machine)).fetchone()
        if row is None or row[4] < runs or row[5] < repeats:
            return None
        return Measurement(row[0], row[1], tuple(json.loads(row[2])), row[3] if row[3] is not None else math.nan,
                           row[4], row[5], row[6], row[7] or 0.0, row[8] if row[8] is not None else math.nan)

    def put(self, platform: str, network: str, fingerprint: str, machine: str, m: Measurement,
            info: Mapping[str, Any] | None = None) -> None:
        """Store (or replace) one measurement atomically."""
        with self.db:
            self.db.execute(
                "INSERT OR REPLACE INTO measurements (platform, network, fingerprint, machine, median_ms, spread, "
                "repeat_medians, min_ms, runs, repeats, warmup, seconds, busy, info, created) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (platform, network, fingerprint, machine, m.median_ms, m.spread, json.dumps(list(m.repeat_medians)),
                 None if math.isnan(m.min_ms) else m.min_ms, m.runs, m.repeats, m.warmup, m.seconds,
                 None if math.isnan(m.busy) else m.busy,
                 json.dumps(dict(info or {}), sort_keys=True), time.time()))

    def __len__(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM measurements").fetchone()[0])

    def entries(self, platform: str | None = None) -> list[dict[str, Any]]:
        """All cached rows (as dicts), optionally of one platform."""
        q = ("SELECT platform, network, fingerprint, machine, median_ms, spread, runs, repeats, seconds, busy "
             "FROM measurements")
        args: tuple = ()
        if platform:
            q += " WHERE platform=?"
            args = (platform,)
        cols = ("platform", "network", "fingerprint", "machine", "median_ms", "spread", "runs", "repeats", "seconds",
                "busy")
        return [dict(zip(cols, r)) for r in self.db.execute(q + " ORDER BY rowid", args)]


def measure_all(nets: Sequence[ValidationNet], platform: str, cache: MeasurementCache | None = None,
                runs: int = 30, repeats: int = 3, warmup: int = 5, remeasure_above: float | None = 0.10,
                extra_rounds: int = 1, rounds: int = 1,
                progress: Callable[[ValidationNet, Measurement | None, bool], None] | None = None,
                errors: dict[str, str] | None = None, stats: dict[str, int] | None = None,
                measure: Callable[..., Measurement] | None = None) -> dict[str, Measurement]:
    """Measure every network (cached ones are read from ``cache``; new ones are stored one by one).

    With ``rounds`` > 1, every network measured in this call is measured again in ``rounds`` - 1 further
    passes over all of them and the rounds merged (`Measurement.merge`: minimum of all repeat medians,
    spread over all of them): a network's latency is then its fastest pass, as `annette calibrate` measures
    its calibration networks, so a slow spell of a shared machine has to last all passes to bias it.
    Networks whose repeat spread still exceeds ``remeasure_above`` (a burst of load) are measured again
    after that, up to ``extra_rounds`` times, and merged the same way.
    ``progress(net, measurement or None, was_cached)`` is called after each network of the first pass;
    networks that fail (export or runtime error) are logged, left out of the result and, with ``errors``,
    recorded there; ``stats`` receives the counts ``cached``, ``measured``, ``remeasured``, ``failed``.
    ``measure`` replaces `measure_latency` (tests).
    """
    measure = measure or measure_latency
    key = machine_key(platform) if cache is not None else ""
    info = runtime_info(platform) if cache is not None else {}
    out: dict[str, Measurement] = {}
    fresh: list[ValidationNet] = []
    st = {"cached": 0, "measured": 0, "remeasured": 0, "failed": 0}

    def one(v: ValidationNet) -> Measurement | None:
        try:
            return measure(v, platform, runs=runs, repeats=repeats, warmup=warmup)
        except Exception as e:  # noqa: BLE001 - one failing network must not stop the benchmark
            msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            log.warning("validation: %s on %s failed: %s", v.name, platform, msg)
            if errors is not None:
                errors[v.name] = msg
            return None

    for v in nets:
        m = cache.get(platform, v.name, v.fingerprint, key, runs, repeats) if cache is not None else None
        cached = m is not None
        if m is None:
            m = one(v)
            if m is not None:
                fresh.append(v)
                if cache is not None:
                    cache.put(platform, v.name, v.fingerprint, key, m, {**info, "source": v.source})
        if m is not None:
            out[v.name] = m
            st["cached" if cached else "measured"] += 1
        else:
            st["failed"] += 1
        if progress is not None:
            progress(v, m, cached)
    for _ in range(int(rounds) - 1):
        for v in fresh:
            m = one(v)
            if m is None:
                continue
            out[v.name] = out[v.name].merge(m)
            if cache is not None:
                cache.put(platform, v.name, v.fingerprint, key, out[v.name], {**info, "source": v.source})
    if remeasure_above is not None:
        for _ in range(int(extra_rounds)):
            noisy = [v for v in fresh if out[v.name].spread > remeasure_above]
            for v in noisy:
                m = one(v)
                if m is None:
                    continue
                merged = out[v.name].merge(m)
                log.info("validation: %s re-measured (spread %.1f%%): %.4f -> %.4f ms", v.name,
                         100 * out[v.name].spread, out[v.name].median_ms, merged.median_ms)
                out[v.name] = merged
                st["remeasured"] += 1
                if cache is not None:
                    cache.put(platform, v.name, v.fingerprint, key, merged, {**info, "source": v.source})
    if stats is not None:
        stats.update(st)
    return out


# ------------------------------------------------------------------------------------------------------
# comparison


def metrics(pred_ms: Any, meas_ms: Any) -> dict[str, float]:
    """Accuracy of predictions against measurements (same order, ms).

    ``mape_pct``: mean absolute percentage error; ``within10_pct``: share of networks within +-10 %;
    ``spearman``: Spearman rank correlation (nan with fewer than 2 networks or constant values);
    ``max_err_pct``: largest absolute percentage error; ``bias_pct``: mean signed percentage error
    (positive = over-prediction); ``n``: number of networks.
    """
    p = np.asarray(pred_ms, dtype=np.float64).reshape(-1)
    m = np.asarray(meas_ms, dtype=np.float64).reshape(-1)
    if p.shape != m.shape:
        raise ValidationError(f"metrics: {p.size} predictions for {m.size} measurements")
    if p.size == 0:
        return {"n": 0, "mape_pct": math.nan, "within10_pct": math.nan, "spearman": math.nan,
                "max_err_pct": math.nan, "bias_pct": math.nan}
    if np.any(m <= 0) or not np.all(np.isfinite(m)):
        raise ValidationError("metrics: measurements must be positive and finite")
    rel = (p - m) / m
    err = np.abs(rel)
    rho = math.nan
    if p.size >= 2 and np.ptp(p) > 0 and np.ptp(m) > 0:
        from scipy.stats import spearmanr
        rho = float(spearmanr(p, m).statistic)
    return {"n": int(p.size), "mape_pct": float(100 * err.mean()), "within10_pct": float(100 * np.mean(err <= 0.10)),
            "spearman": rho, "max_err_pct": float(100 * err.max()), "bias_pct": float(100 * rel.mean())}


@dataclass
class Comparison:
    """Measured and predicted whole-network latency of the validation networks, per platform variant."""

    names: list[str]
    kinds: list[str]
    measured_ms: np.ndarray
    spread: np.ndarray
    predicted: dict[str, np.ndarray]
    busy: np.ndarray | None = None  # other runnable processes while measuring (`Measurement.busy`)

    @property
    def variants(self) -> list[str]:
        return list(self.predicted)

    def mask(self, group: str = "all") -> np.ndarray:
        """Rows of a group: ``real`` (zoo + reference), ``nb101``, ``all``, or a kind (``zoo``, ...)."""
        kinds = np.asarray(self.kinds, dtype=object)
        if group == "all":
            return np.ones(len(self.names), bool)
        if group == "real":
            return kinds != "nb101"
        return kinds == group

    def metrics(self, variant: str, group: str = "all") -> dict[str, float]:
        """`metrics` of one variant on one group."""
        k = self.mask(group)
        return metrics(self.predicted[variant][k], self.measured_ms[k])

    def noise_floor(self, group: str = "all") -> dict[str, float]:
        """Median and max of the measurement spread (repeat-to-repeat) in percent, and the network count."""
        s = self.spread[self.mask(group)]
        if s.size == 0:
            return {"n": 0, "median_pct": math.nan, "max_pct": math.nan}
        return {"n": int(s.size), "median_pct": float(100 * np.median(s)), "max_pct": float(100 * s.max())}

    def summary(self) -> list[dict[str, Any]]:
        """One row per (variant, group) with the metrics."""
        return [{"variant": v, "group": g, **self.metrics(v, g)} for v in self.predicted for g in GROUPS
                if self.mask(g).any()]

    def rows(self) -> list[dict[str, Any]]:
        """One row per network: name, kind, measured ms, spread, busy, and each variant's prediction (ms)."""
        out = []
        for i, n in enumerate(self.names):
            r = {"network": n, "kind": self.kinds[i], "measured_ms": float(self.measured_ms[i]),
                 "spread_pct": float(100 * self.spread[i]),
                 "busy": float(self.busy[i]) if self.busy is not None else math.nan}
            for v, p in self.predicted.items():
                r[v] = float(p[i])
            out.append(r)
        return out

    def format(self) -> str:
        """Side-by-side text table: per variant MAPE, within +-10 %, Spearman rho on real architectures,
        NAS cells and all networks, max error and bias overall; the noise floor below."""
        groups = [g for g in GROUPS if self.mask(g).any()]
        w = max([len("variant")] + [len(v) for v in self.predicted]) + 1
        head1 = " " * w + "".join(f"| {g + f' (n={int(self.mask(g).sum())})':^25s}" for g in groups) + "| overall"
        head2 = f"{'variant':<{w}s}" + "".join(f"| {'MAPE%':>7s} {'±10%':>7s} {'rho':>7s} " for _ in groups) + \
            f"| {'max%':>7s} {'bias%':>7s}"
        lines = [head1, head2, "-" * len(head2)]
        for v in self.predicted:
            s = f"{v:<{w}s}"
            for g in groups:
                m = self.metrics(v, g)
                s += f"| {_fit(m['mape_pct'], 2)} {m['within10_pct']:7.1f} {m['spearman']:7.3f} "
            m = self.metrics(v, "all")
            s += f"| {_fit(m['max_err_pct'], 1)} {_fit(m['bias_pct'], 1, '+')}"
            lines.append(s)
        lines.append("")
        nf = ", ".join(f"{g}: median {self.noise_floor(g)['median_pct']:.2f}% / max {self.noise_floor(g)['max_pct']:.2f}%"
                       for g in groups)
        lines.append(f"measurement noise floor (spread of repeat medians): {nf}")
        return "\n".join(lines)


def _fit(x: float, prec: int, sign: str = "") -> str:
    """A number in 7 characters: fixed point, or scientific when it is too large (an exploding model)."""
    s = f"{x:{sign}7.{prec}f}"
    return s if len(s) <= 7 else f"{x:{sign}7.0e}"


def load_variants(variants: Mapping[str, Any]) -> dict[str, Any]:
    """``{name: Platform or platform file path or shipped name}`` -> ``{name: Platform}``."""
    from ..platform import load_platform
    return {str(k): load_platform(v) for k, v in variants.items()}


def compare(variants: Mapping[str, Any], nets: Sequence[ValidationNet],
            measured: Mapping[str, Measurement | float]) -> Comparison:
    """Predict every measured network with every variant (`annette_torch.estimate_many`).

    ``measured`` maps network names to a `Measurement` or a latency in ms; networks without a measurement
    are left out (logged).
    """
    from ..estimator import estimate_many
    plats = load_variants(variants)
    if not plats:
        raise ValidationError("compare: no platform variants given")
    keep = [v for v in nets if v.name in measured]
    missing = [v.name for v in nets if v.name not in measured]
    if missing:
        log.info("compare: %d network(s) without measurement left out: %s", len(missing), ", ".join(missing[:10]))
    meas = np.array([_ms(measured[v.name]) for v in keep], dtype=np.float64)
    spread = np.array([getattr(measured[v.name], "spread", 0.0) for v in keep], dtype=np.float64)
    pred = {}
    networks = [v.network for v in keep]
    for name, plat in plats.items():
        pred[name] = np.asarray(estimate_many(networks, plat), dtype=np.float64) if networks else np.zeros(0)
    busy = np.array([getattr(measured[v.name], "busy", math.nan) for v in keep], dtype=np.float64)
    return Comparison([v.name for v in keep], [v.kind for v in keep], meas, spread, pred, busy)


def _ms(m: Measurement | float) -> float:
    return float(m.median_ms) if isinstance(m, Measurement) else float(m)


# ------------------------------------------------------------------------------------------------------
# measured layers for the roofline plot


def store_layer_points(db_path: str | os.PathLike, platform: str, bit_width: float = 32.0,
                       suites: Iterable[str] | None = None, limit: int | None = 5000) -> dict[str, np.ndarray]:
    """Measured layers of a benchmark store as roofline points: ``ops``, ``bytes``, ``time_ms``, ``type``.

    Each stored configuration's network is rebuilt from its suite and parameters; a layer that executed
    (time > 0, not an inserted toolchain node) gives one point with its own operations and bytes (inputs,
    outputs and weights at ``bit_width`` bits). At most ``limit`` points (a fixed random sample of all).
    """
    from ..bench.store import Store
    from ..bench.suites import SuiteError, get_suite
    ops, byts, times, types = [], [], [], []
    nets: dict[tuple[str, str], tuple[Network, list[str]] | None] = {}
    want = set(suites) if suites is not None else None
    with Store(db_path) as st:
        for suite, cid, params, rec in st.layer_records(platform):
            if want is not None and suite not in want:
                continue
            if rec.fused == "inserted" or not rec.time_ms or rec.time_ms <= 0:
                continue
            k = (suite, cid)
            if k not in nets:
                try:
                    built = get_suite(suite).build(params)
                    nets[k] = (built, built.type_labels())
                except (SuiteError, AnnetteError, KeyError, TypeError, ValueError) as e:
                    log.debug("store_layer_points: %s/%s not rebuilt: %s", suite, cid, e)
                    nets[k] = None
            if nets[k] is None:
                continue
            net, labels = nets[k]
            try:
                i = net.index(rec.layer)
            except KeyError:
                continue
            ops.append(float(net.ops[i]))
            byts.append(float((net.in_elems[i] + net.out_elems[i] + net.weights[i]) * bit_width / 8))
            times.append(float(rec.time_ms))
            types.append(labels[i])
    keep = np.arange(len(ops))
    if limit is not None and len(ops) > limit:  # an even, deterministic sample over all suites
        keep = np.sort(np.random.default_rng(0).choice(len(ops), int(limit), replace=False))
    return {"ops": np.array(ops)[keep], "bytes": np.array(byts)[keep], "time_ms": np.array(times)[keep],
            "type": np.array(types, dtype=object)[keep]}
