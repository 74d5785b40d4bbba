"""Run a benchmark suite on a hardware module: build -> ONNX -> compile -> profile -> parse -> match -> store.

Measurements run in a separate worker process, so a configuration that crashes the toolchain, hangs past
its timeout or runs out of memory is recorded as failed with its error and the sweep goes on with a fresh
worker. Every finished configuration is committed at once (see `store.Store`), so an interrupted sweep
loses nothing and a re-run resumes where it stopped.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import AnnetteError
from .records import LayerRecord
from .store import ConfigResult, Store
from ..platform.machine import machine_fingerprint

__all__ = ["measure", "measure_packed", "run_sweep", "SweepResult", "parse_budget"]

log = logging.getLogger(__name__)


def parse_budget(text: str | None) -> float | None:
    """'10m' / '90s' / '2h' / '1.5h' / '600' -> seconds (None stays None)."""
    if text is None:
        return None
    t = str(text).strip().lower()
    mult = {"s": 1, "m": 60, "h": 3600}
    try:
        if t and t[-1] in mult:
            v = float(t[:-1]) * mult[t[-1]]
        else:
            v = float(t)
    except ValueError:
        raise AnnetteError(f"budget {text!r}: expected a duration such as 90s, 10m or 2h") from None
    if v <= 0:
        raise AnnetteError(f"budget {text!r}: must be positive")
    return v


def _get_suite(name: str):
    from .suites import SUITES
    try:
        return SUITES[name]
    except KeyError:
        raise AnnetteError(f"unknown suite {name!r} (known: {', '.join(sorted(SUITES))})") from None


def _profile_network(net, runner, iterations: int, warmup: int):
    from .export import to_onnx
    from .matcher import match
    prepared = runner.prepare(to_onnx(net))
    prof = runner.profile(prepared, iterations=iterations, warmup=warmup)
    nodes = runner.parse(prof)
    return match(net, nodes, runner.name), np.asarray(prof.e2e_ms, dtype=np.float64)


def measure(suite: str, config: dict[str, Any], runner, iterations: int = 20, warmup: int = 3) -> ConfigResult:
    """Measure one configuration in this process (exceptions propagate)."""
    t0 = time.perf_counter()
    net = _get_suite(suite).build(config)
    layers, e2e = _profile_network(net, runner, iterations, warmup)
    return ConfigResult(suite, config["config_id"], config, "ok", layers,
                        e2e_median_ms=float(np.median(e2e)) if e2e.size else None,
                        e2e_min_ms=float(e2e.min()) if e2e.size else None,
                        e2e_std_ms=float(e2e.std()) if e2e.size else None, iterations=iterations,
                        seconds=time.perf_counter() - t0)


def measure_packed(suite: str, configs: Sequence[dict[str, Any]], runner, iterations: int = 20,
                   warmup: int = 3) -> list[ConfigResult]:
    """Measure several single-kernel configurations in one compiled model (independent kernels side by side).

    Cuts the per-model compile and dispatch overhead; each configuration gets its own layer records
    (layer names without the ``k{i}/`` prefix). End-to-end times are not per configuration here.
    """
    from .suites import multi_kernel
    t0 = time.perf_counter()
    s = _get_suite(suite)
    net = multi_kernel([s.build(c) for c in configs])
    layers, _ = _profile_network(net, runner, iterations, warmup)
    per: list[list[LayerRecord]] = [[] for _ in configs]
    for L in layers:
        head, _, rest = L.layer.partition("/")
        if head.startswith("k") and head[1:].isdigit() and int(head[1:]) < len(configs):
            L.layer = rest
            L.fused_into = L.fused_into.split("/", 1)[1] if L.fused_into.startswith(head + "/") else L.fused_into
            per[int(head[1:])].append(L)
        else:  # an inserted node not attributable to one kernel: keep with the first
            per[0].append(L)
    dt = (time.perf_counter() - t0) / len(configs)
    return [ConfigResult(suite, c["config_id"], c, "ok", ls, iterations=iterations, seconds=dt)
            for c, ls in zip(configs, per)]


# --------------------------------------------------------------------------------------------------------
# worker process
def _worker_main(conn, runner_name: str, runner_kwargs: dict[str, Any], mem_limit_mb: int | None) -> None:
    if mem_limit_mb:
        try:
            import resource
            lim = mem_limit_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
        except (ImportError, ValueError, OSError):
            pass
    from .runners import get_runner
    runner = get_runner(runner_name, **runner_kwargs)
    conn.send(("ready", runner.toolchain()))
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        suite, configs, iterations, warmup = msg
        try:
            if len(configs) == 1:
                res = [measure(suite, configs[0], runner, iterations, warmup)]
            else:
                res = measure_packed(suite, configs, runner, iterations, warmup)
            conn.send(("ok", res))
        except MemoryError:
            conn.send(("error", "out of memory"))
        except Exception as e:  # a failing configuration must not end the sweep
            log.debug("config failed: %s", traceback.format_exc())
            conn.send(("error", f"{type(e).__name__}: {e}"))


class _Worker:
    """A measuring subprocess that is restarted after a crash or a timeout."""

    def __init__(self, runner_name: str, runner_kwargs: dict[str, Any], mem_limit_mb: int | None,
                 start_timeout: float = 120.0) -> None:
        self.args = (runner_name, runner_kwargs, mem_limit_mb)
        self.start_timeout = start_timeout
        self.proc: Any = None
        self.toolchain: dict[str, Any] = {}

    def start(self) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, *self.args), daemon=True)
        self.proc.start()
        child.close()
        if not self.conn.poll(self.start_timeout):
            self.kill()
            raise AnnetteError(f"hardware module {self.args[0]!r} did not start within {self.start_timeout:.0f} s")
        try:
            kind, payload = self.conn.recv()
        except EOFError:
            code = self.proc.exitcode
            self.kill()
            raise AnnetteError(f"hardware module {self.args[0]!r} failed to start (exit code {code}); "
                               "is its toolchain installed?") from None
        self.toolchain = payload

    def kill(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            try:
                self.conn.send(None)
                self.proc.join(5)
            except (BrokenPipeError, OSError):
                pass
        self.kill()

    def run(self, task: tuple, timeout: float) -> tuple[str, Any]:
        """('ok', results) or ('error', message); restarts the worker after a timeout or a crash."""
        if self.proc is None or not self.proc.is_alive():
            self.start()
        self.conn.send(task)
        if not self.conn.poll(timeout):
            self.kill()
            return "error", f"timed out after {timeout:g} s"
        try:
            return self.conn.recv()
        except (EOFError, ConnectionResetError):
            code = self.proc.exitcode if self.proc is not None else None
            self.proc.join(5) if self.proc is not None else None
            code = self.proc.exitcode if self.proc is not None else code
            self.kill()
            why = "killed by the system, likely out of memory" if code in (-9, 137) else "crashed"
            return "error", f"worker {why} (exit code {code})"


@dataclass
class SweepResult:
    """What a sweep did: counts, time, and whether it was interrupted."""

    measured: int = 0
    failed: int = 0
    skipped: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    stopped_by_budget: bool = False
    errors: list[str] = field(default_factory=list)

    @property
    def per_second(self) -> float:
        return (self.measured + self.failed) / self.seconds if self.seconds > 0 else 0.0


def run_sweep(store: Store, platform: str, suite: str, configs: Sequence[dict[str, Any]], runner: str,
              runner_kwargs: dict[str, Any] | None = None, *, iterations: int = 20, warmup: int = 3,
              timeout_s: float = 120.0, budget_s: float | None = None, pack: int = 1, retry_failed: bool = False,
              mem_limit_mb: int | None = 8192, progress: bool = True,
              on_result: Callable[[ConfigResult], None] | None = None) -> SweepResult:
    """Measure ``configs`` of ``suite`` on ``runner`` into ``store`` (skipping those already stored)."""
    if iterations < 1 or warmup < 0:
        raise AnnetteError("iterations must be >= 1 and warmup >= 0")
    runner_kwargs = dict(runner_kwargs or {})
    done = store.done(platform, suite, include_failed=not retry_failed)
    todo = [c for c in configs if c["config_id"] not in done]
    res = SweepResult(skipped=len(configs) - len(todo))
    if not todo:
        return res
    worker = _Worker(runner, runner_kwargs, mem_limit_mb)
    worker.start()
    run_id = store.start_run(platform, runner, worker.toolchain, machine_fingerprint(runner_kwargs.get("threads")))
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(todo), unit="cfg", desc=f"{platform}/{suite}", dynamic_ncols=True)
    t0 = time.perf_counter()
    try:
        i = 0
        while i < len(todo):
            if budget_s is not None and time.perf_counter() - t0 >= budget_s:
                res.stopped_by_budget = True
                break
            batch = todo[i:i + max(pack, 1)]
            kind, payload = worker.run((suite, batch, iterations, warmup), timeout_s * len(batch))
            if kind == "error" and len(batch) > 1:
                # isolate the culprit: measure the batch's configurations one by one
                results = []
                for c in batch:
                    k1, p1 = worker.run((suite, [c], iterations, warmup), timeout_s)
                    results.append(p1[0] if k1 == "ok" else ConfigResult(suite, c["config_id"], c, "failed", error=p1))
            elif kind == "error":
                results = [ConfigResult(suite, batch[0]["config_id"], batch[0], "failed", error=payload)]
            else:
                results = payload
            for r in results:
                store.add(run_id, platform, r)
                if r.status == "ok":
                    res.measured += 1
                else:
                    res.failed += 1
                    res.errors.append(f"{r.config_id}: {r.error}")
                    log.warning("%s/%s config %s failed: %s", platform, suite, r.config_id, r.error)
                if on_result:
                    on_result(r)
            i += len(batch)
            if bar is not None:
                bar.update(len(batch))
                bar.set_postfix(ok=res.measured, failed=res.failed)
    except KeyboardInterrupt:
        res.interrupted = True
    finally:
        res.seconds = time.perf_counter() - t0
        if bar is not None:
            bar.close()
        worker.stop()
    return res
