"""Whole-network latency measurement through the benchmark runners (their session settings, without
per-node profiling), the key of the measuring machine and runtime, and the measurement of a whole set.

Time is in milliseconds everywhere.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import time
from typing import Any, Callable, Sequence

import numpy as np

from ..ir import Network
from .cache import MeasurementCache
from .errors import ValidationError
from .measurement import Measurement
from .networks import ValidationNet

__all__ = ["PLATFORMS", "runtime_info", "machine_key", "measure_latency", "measure_all"]

log = logging.getLogger(__name__)

#: Runtimes `measure_latency` can time.
PLATFORMS = ("ort-cpu", "openvino-cpu")


def _runner(platform: str, threads: int = 1) -> Any:
    """The benchmark runner whose session settings `measure_latency` times ``platform`` with: ONNX Runtime
    with all graph optimisations, OpenVINO on the CPU with the latency hint and float32 precision."""
    if platform == "ort-cpu":
        from ..bench.runners.ort import OrtRunner
        return OrtRunner(threads=threads, opt_level="all")
    if platform == "openvino-cpu":
        from ..bench.runners.openvino import OpenVinoRunner
        return OpenVinoRunner(device="CPU", threads=threads, precision="f32")
    raise ValidationError(f"unknown platform {platform!r} for measurement (known: {', '.join(PLATFORMS)})")


def runtime_info(platform: str) -> dict[str, Any]:
    """Runtime name, version and the session settings `measure_latency` uses on ``platform``."""
    runner = _runner(platform)
    if platform == "ort-cpu":
        from ..bench.runners.ort import _ort
        return {"runtime": "onnxruntime", "version": _ort().__version__, "provider": "CPUExecutionProvider",
                "threads": runner.threads, "opt_level": runner.opt_level}
    from ..bench.runners.openvino import _ov, _ov_version
    return {"runtime": "openvino", "version": _ov_version(_ov()), "device": runner.device, "threads": runner.threads,
            "performance_hint": runner.config(profiling=False)["PERFORMANCE_HINT"], "precision": runner.precision}


def machine_key(platform: str) -> str:
    """Hex key of the measuring machine and runtime: `machine_fingerprint` (1 thread) plus the runtime's
    name, version and settings. Measurements cached under another key are not reused."""
    from ..platform.machine import machine_fingerprint
    d = {"machine": machine_fingerprint(threads=1), "runtime": runtime_info(platform)}
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def measure_latency(net_or_onnx: Any, platform: str, runs: int = 30, repeats: int = 3, warmup: int = 5,
                    threads: int = 1, lock: bool = True) -> Measurement:
    """End-to-end latency (ms) of a `Network`, a `ValidationNet`, an ``onnx.ModelProto`` or ONNX bytes on
    ``platform`` (``"ort-cpu"`` or ``"openvino-cpu"``).

    ``warmup`` untimed inferences, then ``repeats`` rounds of ``runs`` timed ones in the same session (the
    benchmark runner's ``inference``, its settings without the profiler): the result is the minimum over
    rounds of the round's median, with the rounds' spread. With ``lock`` (the default) it holds this machine's
    measuring lock (`bench.hostlock`) while it compiles and times, as the benchmark sweeps do: two ``annette
    calibrate`` or ``adapt`` runs on one machine then take turns instead of timing each other's work. A caller
    that holds the lock already passes False (the lock is not re-entrant).
    """
    from ..bench.hostlock import MachineLock

    if platform not in PLATFORMS:
        raise ValidationError(f"unknown platform {platform!r} for measurement (known: {', '.join(PLATFORMS)})")
    if int(runs) < 1 or int(repeats) < 1 or int(warmup) < 0:
        raise ValidationError(f"need runs >= 1, repeats >= 1, warmup >= 0 (got {runs}, {repeats}, {warmup})")
    model = onnx_bytes(net_or_onnx)
    machine = MachineLock(exclusive=lock)
    try:
        with machine.hold():
            t0 = time.perf_counter()
            run = _runner(platform, int(threads)).inference(model)
            del model
            for _ in range(int(warmup)):
                run()
            times = np.empty((int(repeats), int(runs)))
            clock = time.perf_counter_ns
            for r in range(int(repeats)):
                for k in range(int(runs)):
                    a = clock()
                    run()
                    times[r, k] = (clock() - a) * 1e-6
            return Measurement.from_times(times, warmup, time.perf_counter() - t0, _busy())
    finally:
        machine.close()


def onnx_bytes(net_or_onnx: Any) -> bytes:
    """The serialized ONNX model that `measure_latency` measures for ``net_or_onnx`` (the same kinds of input)."""
    if isinstance(net_or_onnx, ValidationNet):
        return net_or_onnx.to_onnx().SerializeToString()
    if isinstance(net_or_onnx, Network):
        from ..bench.export import to_onnx
        return to_onnx(net_or_onnx).SerializeToString()
    if isinstance(net_or_onnx, (bytes, bytearray)):
        return bytes(net_or_onnx)
    if hasattr(net_or_onnx, "SerializeToString"):
        return net_or_onnx.SerializeToString()
    raise ValidationError(f"cannot measure a {type(net_or_onnx).__name__}: give a Network, a ValidationNet, "
                          "an onnx.ModelProto or serialized ONNX bytes")


def _busy() -> float:
    """Other runnable processes: 1-minute load average minus this measuring process (nan if unknown)."""
    try:
        return max(0.0, os.getloadavg()[0] - 1.0)
    except (OSError, AttributeError):  # no load average on this OS
        return math.nan


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
