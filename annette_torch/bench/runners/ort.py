"""``ort-cpu``: ONNX Runtime's CPU execution provider with its built-in profiler.

What ONNX Runtime 1.32 reports (``enable_profiling=True``; checked on these machines):

- a JSON trace with one ``cat == "Node"`` event ``<node>_kernel_time`` per executed node and run (``args``
  carry ``op_name`` and ``provider``) and one ``cat == "Session"`` event ``model_run`` per run;
- fused nodes keep the name of the node they were built from: with the extended optimisations a Conv that
  absorbed a BatchNorm and a Relu runs as ``FusedConv`` named after the Conv (its output tensor is the
  Relu's); Sigmoid+Mul becomes ``<mul>/QuickGeluFusion/``;
- with all optimisations convolutions, pools and per-channel Mul/Add switch to the NCHWc layout: the new
  nodes are named after their *output tensor* plus ``_nchwc`` (``relu1_nchwc`` for a Conv+BN+Relu whose
  output was the Relu's), may absorb a following residual Add and activation (4th input + ``activation``
  attribute), and ``ReorderInput`` / ``ReorderOutput`` (``..._token_<n>`` when repeated) are inserted;
- some nodes carry no layer name at all: the Erf form of GELU fuses into a node called ``Gelu``, a
  HardSwish (opset < 22) is expanded into two unnamed nodes profiled as ``HardSigmoid_<index>`` and
  ``Mul_<index>``; their tensors in the optimised graph lead the matcher back to the layer.

The optimised graph is saved during `prepare` (``optimized_model_filepath``, read and deleted at once)
so `parse` can tell the matcher which original tensors each node produces, which tensors it reads and
writes and which operations it absorbed (``NodeRecord.layers``; ``NodeRecord.extra``: ``inputs``,
``outputs``, ``fused_ops``, ``domain``, ``op_type``). The profiler's times are whole µs. Each node costs
a few µs of dispatch overhead the per-node times do not contain (the sum of node medians is 0.92-1.03 of
the end-to-end median on real networks, less on tiny ones).
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import onnx

from ...errors import AnnetteError
from ..records import NodeRecord
from .base import Profile, Runner, budgeted_iterations, register_runner, warm_up

__all__ = ["OrtRunner"]

log = logging.getLogger(__name__)

_LEVELS = ("disable", "basic", "extended", "all")
_NCHWC_DOMAIN = "com.microsoft.nchwc"
_UNNAMED = "<unnamed>:"  # key prefix of graph nodes without a name
_DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
           "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int8)": np.int8,
           "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_}


def _ort():
    try:
        import onnxruntime
    except ImportError:  # pragma: no cover - depends on the environment
        raise AnnetteError("the ort-cpu hardware module needs onnxruntime (pip install onnxruntime)") from None
    return onnxruntime


@dataclass
class OrtPrepared:
    """A loaded session plus what `profile` needs: input feeds, the optimised graph, the serialized model."""

    session: Any
    feeds: dict[str, np.ndarray]
    graph: dict[str, dict[str, Any]]
    model_bytes: bytes
    profile_prefix: str
    profiled: bool = False
    meta: dict[str, Any] = field(default_factory=dict)


@register_runner
class OrtRunner(Runner):
    """ONNX Runtime CPU execution provider; per-node times from ONNX Runtime's profiler.

    ``threads`` sets ``intra_op_num_threads`` (``inter_op_num_threads`` is 1, execution sequential);
    ``opt_level`` is the graph optimisation level: ``"disable" | "basic" | "extended" | "all"``
    (default ``"all"``: the layout transformations and fusions a deployed model gets).
    """

    name = "ort-cpu"

    def __init__(self, threads: int = 1, opt_level: str = "all") -> None:
        if opt_level not in _LEVELS:
            raise AnnetteError(f"ort-cpu: opt_level {opt_level!r} unknown (use one of {', '.join(_LEVELS)})")
        if int(threads) < 1:
            raise AnnetteError(f"ort-cpu: threads must be >= 1, got {threads}")
        self.threads = int(threads)
        self.opt_level = opt_level

    def toolchain(self) -> dict[str, Any]:
        return {"toolchain": "onnxruntime", "version": _ort().__version__, "provider": "CPUExecutionProvider",
                "threads": self.threads, "opt_level": self.opt_level}

    # ----------------------------------------------------------------------------------------------
    def session_options(self, profiling: bool = False) -> Any:
        """The ``SessionOptions`` of every session this runner loads: threads, sequential execution, the
        graph optimisation level; with ``profiling`` the per-node profiler on."""
        ort = _ort()
        so = ort.SessionOptions()
        if profiling:
            so.enable_profiling = True
        so.intra_op_num_threads = self.threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = {
            "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        }[self.opt_level]
        so.log_severity_level = 3  # saving an NCHWc-optimised model warns on every session
        return so

    def inference(self, model_bytes: bytes) -> Callable[[], None]:
        """An unprofiled session of a serialized ONNX model with this runner's settings and `prepare`'s
        random inputs; returns a callable that runs one inference (for end-to-end timing).

        Errors of ONNX Runtime while loading the model are raised as they are.
        """
        sess = _ort().InferenceSession(model_bytes, self.session_options(), providers=["CPUExecutionProvider"])
        feeds = _random_feeds(sess)

        def run() -> None:
            sess.run(None, feeds)
        return run

    def _session(self, model_bytes: bytes) -> tuple[Any, dict[str, dict[str, Any]], str]:
        ort = _ort()
        so = self.session_options(profiling=True)
        tag = f"annette-ort-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        prefix = os.path.join(tempfile.gettempdir(), tag)
        opt_path = prefix + "-optimized.onnx"
        so.profile_file_prefix = prefix
        so.optimized_model_filepath = opt_path
        try:
            sess = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime raises its own exception classes
            raise AnnetteError(f"ort-cpu: cannot load the model: {str(e).splitlines()[0]}") from None
        graph: dict[str, dict[str, Any]] = {}
        try:
            graph = _graph_info(onnx.load(opt_path, load_external_data=False))
        except Exception as e:  # pragma: no cover - the file is written by every session
            log.warning("ort-cpu: optimised graph not readable (%s); matching by node names only", e)
        finally:
            for p in (opt_path, opt_path + ".data"):
                if os.path.exists(p):
                    os.remove(p)
        return sess, graph, prefix

    def prepare(self, model: onnx.ModelProto) -> OrtPrepared:
        data = model.SerializeToString()
        sess, graph, prefix = self._session(data)
        feeds = _random_feeds(sess)
        return OrtPrepared(sess, feeds, graph, data, prefix,
                           meta={"inputs": {k: list(v.shape) for k, v in feeds.items()}})

    def profile(self, prepared: OrtPrepared, iterations: int = 20, warmup: int = 3,
                max_s: float | None = None) -> Profile:
        """Run ``warmup`` + ``iterations`` inferences (fewer iterations where they would take over ``max_s``);
        per-node times of the measured runs (ms).

        ONNX Runtime's profiler stops for good at ``end_profiling()``: profiling the same prepared model
        again loads a fresh session (same options) first.
        """
        if iterations < 1 or warmup < 0:
            raise AnnetteError(f"ort-cpu: need iterations >= 1 and warmup >= 0 (got {iterations}, {warmup})")
        if prepared.profiled:  # the profiler of a session stops for good at end_profiling(): load it again
            prepared.session, prepared.graph, prepared.profile_prefix = self._session(prepared.model_bytes)
        sess = prepared.session
        iterations = budgeted_iterations(iterations, warm_up(lambda: sess.run(None, prepared.feeds), warmup), max_s)
        for _ in range(iterations):
            sess.run(None, prepared.feeds)
        path = sess.end_profiling()
        prepared.profiled = True
        try:
            with open(path) as f:
                events = json.load(f)
        finally:
            if path and os.path.exists(path):
                os.remove(path)
        nodes, e2e = _per_run(events, warmup, iterations)
        out: dict[str, tuple[str, str, str, np.ndarray]] = {}
        for name, (op, provider, times) in nodes.items():
            info = prepared.graph.get(name, {})
            kind = provider
            if info.get("domain") == _NCHWC_DOMAIN:
                kind = f"{provider}/Nchwc{op}"
            out[name] = (op, kind, "executed", times)
        return Profile(nodes=out, e2e_ms=e2e, raw=events,
                       meta={"graph": prepared.graph, "iterations": iterations, "warmup": warmup,
                             **prepared.meta, **self.toolchain()})

    def parse(self, profile: Profile) -> list[NodeRecord]:
        """Per-node statistics plus, from the optimised graph, the original tensors each node writes
        (``layers``) and what it absorbed (``extra["fused_ops"]``: activation, residual ``Add``)."""
        recs = super().parse(profile)
        graph = dict(profile.meta.get("graph", {}))
        # nodes ONNX Runtime created without a name (a HardSwish expanded into HardSigmoid + Mul) are
        # profiled as "<op>_<index>"; pair them per op type in execution order with the unnamed graph nodes
        unnamed = [info for key, info in graph.items() if key.startswith(_UNNAMED)]
        for op in {info["op_type"] for info in unnamed}:
            infos = [info for info in unnamed if info["op_type"] == op]
            names = [r.node for r in recs
                     if r.node not in graph and re.fullmatch(re.escape(op) + r"_\d+", r.node)]
            if len(infos) == len(names):
                graph.update(zip(names, infos))
        for r in recs:
            info = graph.get(r.node)
            if not info:
                continue
            names = [t for t in info["outputs"] if t and not t.startswith("reorder_token")]
            r.layers = tuple(dict.fromkeys([r.node] + names))
            r.extra = {"domain": info["domain"], "op_type": info["op_type"], "inputs": info["inputs"],
                       "outputs": info["outputs"], "fused_ops": info["fused_ops"]}
        return recs


def _random_feeds(sess: Any) -> dict[str, np.ndarray]:
    """Deterministic random inputs (seed 0) for every input of a session: floats in [0, 1), integers 0 or 1."""
    rng = np.random.default_rng(0)
    feeds = {}
    for inp in sess.get_inputs():
        shape = inp.shape
        if any(not isinstance(d, int) or d <= 0 for d in shape):
            raise AnnetteError(f"ort-cpu: input {inp.name!r} has a dynamic shape {shape}; "
                               "export with static shapes")
        dt = _DTYPES.get(inp.type)
        if dt is None:
            raise AnnetteError(f"ort-cpu: input {inp.name!r} has unsupported type {inp.type}")
        feeds[inp.name] = (rng.random(shape) if np.issubdtype(dt, np.floating)
                           else rng.integers(0, 2, shape)).astype(dt)
    return feeds


def _graph_info(model: onnx.ModelProto) -> dict[str, dict[str, Any]]:
    """Per node of an optimised graph: op, domain, tensor names and the operations it absorbed."""
    out = {}
    for k, n in enumerate(model.graph.node):
        fused: list[str] = []
        ins = list(n.input)
        # FusedConv (com.microsoft) and the NCHWc Conv take the residual to add as 4th input ("Z" / "Sum")
        if n.op_type in ("Conv", "FusedConv") and n.domain in (_NCHWC_DOMAIN, "com.microsoft") \
                and len(ins) >= 4 and ins[3]:
            fused.append("Add")
        for a in n.attribute:
            if a.name == "activation":
                act = onnx.helper.get_attribute_value(a)
                fused.append(act.decode() if isinstance(act, bytes) else str(act))
        if n.op_type in ("FusedGemm", "FusedMatMul") and not fused:
            fused.append(n.op_type[5:])
        out[n.name or f"{_UNNAMED}{k}"] = {"op_type": n.op_type, "domain": n.domain, "inputs": ins,
                                           "outputs": list(n.output), "fused_ops": fused}
    return out


def _per_run(events: list[dict], warmup: int, iterations: int
             ) -> tuple[dict[str, tuple[str, str, np.ndarray]], np.ndarray]:
    """Group the trace's node events by run (``model_run`` intervals); drop the warm-up runs."""
    runs = sorted((e["ts"], e["ts"] + e["dur"], e["dur"]) for e in events
                  if e.get("cat") == "Session" and e.get("name") == "model_run")
    if len(runs) != warmup + iterations:
        raise AnnetteError(f"ort-cpu: the profile holds {len(runs)} runs, expected {warmup + iterations} "
                           "(profiler event limit reached?)")
    runs = runs[warmup:]
    starts = np.array([r[0] for r in runs])
    ends = np.array([r[1] for r in runs])
    e2e = np.array([r[2] for r in runs], dtype=np.float64) / 1000.0
    times: dict[str, np.ndarray] = {}
    meta: dict[str, tuple[str, str]] = {}
    for e in events:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
            continue
        k = int(np.searchsorted(starts, e["ts"], side="right")) - 1
        if k < 0 or e["ts"] > ends[k]:
            continue  # a warm-up run
        name = e["name"][: -len("_kernel_time")]
        if name not in times:
            times[name] = np.zeros(iterations)
            args = e.get("args", {})
            meta[name] = (args.get("op_name", ""), args.get("provider", ""))
        times[name][k] += e["dur"] / 1000.0
    return {n: (*meta[n], times[n]) for n in times}, e2e
