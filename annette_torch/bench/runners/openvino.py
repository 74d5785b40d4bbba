"""``openvino``: OpenVINO runtime with per-node performance counters (``PERF_COUNT``).

What OpenVINO 2026.4 (CPU plugin) reports, checked on these machines:

- ``InferRequest.profiling_info`` lists, per inference, ``node_name, node_type, exec_type, real_time,
  status``; nodes absorbed into another node are listed with status ``NOT_RUN`` under their original
  name (``relu1  Relu  NOT_RUN``), some absorbed layers are not listed at all (a folded BatchNorm);
- an executed node may carry a *new* name: a Conv that absorbed a BatchNorm is called ``Multiply_<n>``
  (the BN's decomposition), a Conv with bias ``<conv>/WithoutBiases``; a chain of element-wise ops
  becomes a ``Subgraph`` (or ``Eltwise``/``MulAdd``) node named after the chain's *last* layer;
- the compiled model's runtime graph tells, per executed node, every original layer it contains
  (``rt_info["originalLayersNames"]``, e.g. ``Multiply_3877,bn1,relu1`` or ``add0,m0,t0`` for a
  Subgraph); `parse` puts them in ``NodeRecord.layers`` for the matcher;
- layout ``Reorder`` nodes are inserted, named ``<producer>_<layout>_<layout>_<consumer>``
  (``x_abcd_acdb_conv1/WithoutBiases``); depthwise convolutions run as ``GroupConvolution``.

On a CPU with AVX512-BF16 / AMX the plugin computes in bf16 unless told otherwise; ``precision="f32"``
(the default) pins float32 so measurements are comparable across machines and with ONNX Runtime;
``precision=None`` keeps the plugin's default.

Device ``MYRIAD`` (Intel Neural Compute Stick 2): the same code path; only OpenVINO <= 2022.3 ships the
MYRIAD plugin, and a stick must be attached. CPU-only settings (thread count, precision hint) are not
passed to other devices; MYRIAD computes in FP16.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import onnx

from ...errors import AnnetteError
from ..records import NodeRecord
from .base import Profile, Runner, budgeted_iterations, register_runner, warm_up

__all__ = ["OpenVinoRunner"]

log = logging.getLogger(__name__)


def _ov():
    try:
        import openvino as ov
        if not hasattr(ov, "Core"):  # OpenVINO 2022.x: the API 2.0 lives in openvino.runtime
            import openvino.runtime as ov  # type: ignore[no-redef]
    except ImportError:  # pragma: no cover - depends on the environment
        raise AnnetteError("the openvino hardware module needs OpenVINO (pip install openvino)") from None
    return ov


def _ov_version(ov) -> str:
    v = getattr(ov, "__version__", None)
    if v is None:  # pragma: no cover - older releases
        v = ov.get_version() if hasattr(ov, "get_version") else "unknown"
    return str(v)


def _rt_str(value: Any) -> str:
    """A runtime-info value as a string (OVAny in API 2.0)."""
    for get in (lambda v: v.astype(str), lambda v: v.value, str):
        try:
            return str(get(value))
        except Exception:  # noqa: BLE001 - OVAny conversions differ between releases
            continue
    return ""  # pragma: no cover


def _status(s: Any) -> str:
    return "not-run" if "NOT_RUN" in str(s) or "OPTIMIZED_OUT" in str(s) else "executed"


def _compile(core: Any, model_bytes: bytes, device: str, config: dict[str, str]) -> Any:
    """``core.compile_model`` of a serialized ONNX model (read from a temporary file, removed at once)."""
    fd, path = tempfile.mkstemp(prefix="annette-ov-", suffix=".onnx")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(model_bytes)
        return core.compile_model(core.read_model(path), device, config)
    finally:
        os.remove(path)


def _set_random_inputs(ov: Any, compiled: Any, request: Any) -> dict[str, list[int]]:
    """Deterministic random inputs (seed 0; floats in [0, 1), integers 0 or 1) set on ``request``; returns
    each input's shape."""
    rng = np.random.default_rng(0)
    shapes = {}
    for port in compiled.inputs:
        ps = port.get_partial_shape()
        if ps.is_dynamic:
            raise AnnetteError(f"openvino: input {port.get_any_name()!r} has a dynamic shape {ps}; "
                               "export with static shapes")
        shape = [int(d) for d in port.get_shape()]
        dt = port.get_element_type().to_dtype()
        data = (rng.random(shape) if np.issubdtype(dt, np.floating) else rng.integers(0, 2, shape)).astype(dt)
        request.set_tensor(port, ov.Tensor(data))
        shapes[port.get_any_name()] = shape
    return shapes


@dataclass
class OvPrepared:
    """A compiled model, its infer request with inputs set, and the runtime graph's per-node info."""

    compiled: Any
    request: Any
    runtime: dict[str, dict[str, Any]]
    meta: dict[str, Any] = field(default_factory=dict)


@register_runner
class OpenVinoRunner(Runner):
    """OpenVINO runtime; per-node times from the performance counters of each inference.

    ``device``: ``"CPU"`` (default) or another OpenVINO device (``"MYRIAD"`` = NCS2, needs OpenVINO
    <= 2022.3 and an attached stick); ``threads``: ``INFERENCE_NUM_THREADS`` (CPU); ``precision``:
    ``INFERENCE_PRECISION_HINT`` on CPU (``"f32"``, ``"bf16"``, ``"f16"``, or None for the default).
    """

    name = "openvino"

    def __init__(self, device: str = "CPU", threads: int = 1, precision: str | None = "f32") -> None:
        if int(threads) < 1:
            raise AnnetteError(f"openvino: threads must be >= 1, got {threads}")
        self.device = str(device).upper()
        self.threads = int(threads)
        self.precision = precision

    def config(self, profiling: bool = True) -> dict[str, str]:
        """The compile-time properties passed to ``compile_model`` (``PERF_COUNT`` only with ``profiling``)."""
        cfg = {"PERF_COUNT": "YES"} if profiling else {}
        cfg["PERFORMANCE_HINT"] = "LATENCY"
        if self.device == "CPU":
            cfg["INFERENCE_NUM_THREADS"] = str(self.threads)
            if self.precision:
                cfg["INFERENCE_PRECISION_HINT"] = self.precision
        return cfg

    def toolchain(self) -> dict[str, Any]:
        ov = _ov()
        out: dict[str, Any] = {"toolchain": "openvino", "version": _ov_version(ov), "device": self.device,
                               "threads": self.threads if self.device == "CPU" else None,
                               "precision": self.precision if self.device == "CPU" else None,
                               "performance_hint": "LATENCY"}
        return out

    # ----------------------------------------------------------------------------------------------
    def inference(self, model_bytes: bytes) -> Callable[[], None]:
        """The model (serialized ONNX) compiled with this runner's properties but without performance
        counters, its inputs set as in `prepare`; returns a callable that runs one inference (for
        end-to-end timing). Errors of OpenVINO while compiling are raised as they are."""
        ov = _ov()
        compiled = _compile(ov.Core(), model_bytes, self.device, self.config(profiling=False))
        request = compiled.create_infer_request()
        _set_random_inputs(ov, compiled, request)

        def run() -> None:
            request.infer()
        return run

    def prepare(self, model: onnx.ModelProto) -> OvPrepared:
        ov = _ov()
        try:
            compiled = _compile(ov.Core(), model.SerializeToString(), self.device, self.config())
        except Exception as e:  # OpenVINO raises RuntimeError with multi-line messages
            raise AnnetteError(f"openvino ({self.device}): cannot compile the model: "
                               f"{str(e).strip().splitlines()[0] if str(e).strip() else e}") from None
        request = compiled.create_infer_request()
        shapes = _set_random_inputs(ov, compiled, request)
        runtime = {}
        try:
            for op in compiled.get_runtime_model().get_ordered_ops():
                rt = op.get_rt_info()
                info = {k: _rt_str(rt[k]) for k in ("layerType", "originalLayersNames", "execOrder",
                                                     "primitiveType", "runtimePrecision", "outputLayouts")
                        if k in rt}
                info["inputs"] = [v.get_node().get_friendly_name() for v in op.input_values()]
                info["outputs"] = [op.get_friendly_name()]
                runtime[op.get_friendly_name()] = info
        except Exception as e:  # pragma: no cover - some plugins have no runtime model
            log.warning("openvino: no runtime graph (%s); matching by node names only", e)
        return OvPrepared(compiled, request, runtime, meta={"inputs": shapes})

    def profile(self, prepared: OvPrepared, iterations: int = 20, warmup: int = 3,
                max_s: float | None = None) -> Profile:
        """Run ``warmup`` + ``iterations`` inferences (fewer iterations where they would take over ``max_s``);
        per iteration the performance counters of every node (``real_time``, ms) and the wall time of
        ``infer()`` as end-to-end time; ``raw`` keeps the last iteration's counters."""
        if iterations < 1 or warmup < 0:
            raise AnnetteError(f"openvino: need iterations >= 1 and warmup >= 0 (got {iterations}, {warmup})")
        req = prepared.request
        iterations = budgeted_iterations(iterations, warm_up(req.infer, warmup), max_s)
        e2e = np.zeros(iterations)
        nodes: dict[str, list] = {}
        for k in range(iterations):
            t0 = time.perf_counter()
            req.infer()
            e2e[k] = (time.perf_counter() - t0) * 1000.0
            seen: set[str] = set()
            for p in req.profiling_info:
                ms = p.real_time.total_seconds() * 1000.0
                ent = nodes.get(p.node_name)
                if ent is None:
                    ent = nodes[p.node_name] = [p.node_type, p.exec_type, _status(p.status), np.zeros(iterations)]
                if _status(p.status) == "executed":
                    ent[2] = "executed"
                # a name listed twice in one inference (rare) is one node's work: add the times
                ent[3][k] = ent[3][k] + ms if p.node_name in seen else ms
                seen.add(p.node_name)
        out = {n: (t, x, s, arr) for n, (t, x, s, arr) in nodes.items()}
        raw = [{"node_name": p.node_name, "node_type": p.node_type, "exec_type": p.exec_type,
                "real_time_ms": p.real_time.total_seconds() * 1000.0, "status": str(p.status)}
               for p in req.profiling_info]
        return Profile(nodes=out, e2e_ms=e2e, raw=raw,
                       meta={"runtime": prepared.runtime, "iterations": iterations, "warmup": warmup,
                             **prepared.meta, **self.toolchain()})

    def parse(self, profile: Profile) -> list[NodeRecord]:
        """Per-node statistics plus the original layers each executed node contains
        (``originalLayersNames`` of the runtime graph) in ``layers``."""
        recs = super().parse(profile)
        runtime = profile.meta.get("runtime", {})
        for r in recs:
            info = runtime.get(r.node)
            if info is None:
                r.layers = (r.node,)
                continue
            names = [s for s in info.get("originalLayersNames", "").split(",") if s]
            r.layers = tuple(dict.fromkeys([r.node] + names))
            r.extra = dict(info)
        return recs
