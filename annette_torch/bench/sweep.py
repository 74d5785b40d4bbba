"""Run a benchmark suite on a hardware module: build -> ONNX -> compile -> profile -> parse -> match -> store.

Measurements run in a separate worker process, so a configuration that crashes the toolchain, hangs past
its timeout or runs out of memory is recorded as failed with its error and the sweep goes on with a fresh
worker. Each finished configuration is committed atomically (see `store.Store`) while the worker process
builds and compiles the next one (before that one's timing starts), or at once when the sweep stops or
waits; an interrupted sweep keeps everything it measured, a killed one at most loses the result it had not
stored yet, and a re-run resumes where it stopped.

Any number of sweeps of the same suite may run on one store at once (processes, or machines each with its
own board): each configuration is claimed before it is measured (`claims`; a sweep claims `CLAIM_AHEAD`
at a time), with a lease the sweep renews while it measures, so none is measured twice and a killed sweep's
configurations return to the pool when their lease runs out. A sweep that has nothing left to claim waits
for the configurations other sweeps hold and takes over those whose lease expires. Measurements that time
this machine's CPU take its measuring lock (`hostlock`): sweeps on one machine measure one at a time, and
one that finishes while another waits stores its result before handing the lock over.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import time
import traceback
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ..errors import AnnetteError
from ..platform.machine import machine_fingerprint
from .claims import LEASE_S, add_plan, claim, default_worker, release, renew, this_machine
from .hostlock import MachineLock
from .records import LayerRecord
from .store import ConfigResult, Store

__all__ = ["measure", "measure_packed", "run_sweep", "SweepResult", "MeasuringProcess", "measuring_process",
           "parse_budget", "CLAIM_AHEAD"]

log = logging.getLogger(__name__)

#: configurations a sweep claims ahead of the one it measures (one claim transaction for several)
CLAIM_AHEAD = 4


def parse_budget(text: str | None, what: str = "budget") -> float | None:
    """'10m' / '90s' / '2h' / '1.5h' / '7d' / '600' -> seconds (None stays None); ``what`` names the option in
    the error."""
    if text is None:
        return None
    t = str(text).strip().lower()
    mult = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        if t and t[-1] in mult:
            v = float(t[:-1]) * mult[t[-1]]
        else:
            v = float(t)
    except ValueError:
        raise AnnetteError(f"{what} {text!r}: expected a duration such as 90s, 10m or 2h") from None
    if not v > 0 or v == float("inf"):
        raise AnnetteError(f"{what} {text!r}: must be a positive, finite duration")
    return v


def _get_suite(name: str):
    from .suites import SUITES
    try:
        return SUITES[name]
    except KeyError:
        raise AnnetteError(f"unknown suite {name!r} (known: {', '.join(sorted(SUITES))})") from None


def _profile_network(net, runner, iterations: int, warmup: int, max_s: float | None = None):
    from .export import to_onnx
    from .matcher import match
    prepared = runner.prepare(to_onnx(net))
    cut = {} if max_s is None else {"max_s": max_s}  # (a runner of an older interface takes no budget)
    prof = runner.profile(prepared, iterations=iterations, warmup=warmup, **cut)
    nodes = runner.parse(prof)
    return match(net, nodes, runner.name), np.asarray(prof.e2e_ms, dtype=np.float64)


def measure(suite: str, config: dict[str, Any], runner, iterations: int = 20, warmup: int = 3,
            max_s: float | None = None) -> ConfigResult:
    """Measure one configuration in this process (exceptions propagate); ``max_s``: see `run_sweep`."""
    t0 = time.perf_counter()
    net = _get_suite(suite).build(config)
    layers, e2e = _profile_network(net, runner, iterations, warmup, max_s)
    return ConfigResult(suite, config["config_id"], config, "ok", layers,
                        e2e_median_ms=float(np.median(e2e)) if e2e.size else None,
                        e2e_min_ms=float(e2e.min()) if e2e.size else None,
                        e2e_std_ms=float(e2e.std()) if e2e.size else None,
                        iterations=int(e2e.size) or iterations, seconds=time.perf_counter() - t0)


def measure_packed(suite: str, configs: Sequence[dict[str, Any]], runner, iterations: int = 20,
                   warmup: int = 3, max_s: float | None = None) -> list[ConfigResult]:
    """Measure several single-kernel configurations in one compiled model (independent kernels side by side).

    Cuts the per-model compile and dispatch overhead; each configuration gets its own layer records
    (layer names without the ``k{i}/`` prefix). End-to-end times are not per configuration here.
    """
    from .suites import multi_kernel
    t0 = time.perf_counter()
    s = _get_suite(suite)
    net = multi_kernel([s.build(c) for c in configs])
    layers, e2e = _profile_network(net, runner, iterations, warmup, max_s)
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
    return [ConfigResult(suite, c["config_id"], c, "ok", ls, iterations=int(e2e.size) or iterations, seconds=dt)
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
    conn.send(("ready", (runner.toolchain(), bool(getattr(runner, "uses_host_cpu", True)))))
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        suite, configs, iterations, warmup, max_s = msg
        try:
            if len(configs) == 1:
                res = [measure(suite, configs[0], runner, iterations, warmup, max_s)]
            else:
                res = measure_packed(suite, configs, runner, iterations, warmup, max_s)
            conn.send(("ok", res))
        except MemoryError:
            conn.send(("error", "out of memory"))
        except Exception as e:  # a failing configuration must not end the sweep
            log.debug("config failed: %s", traceback.format_exc())
            conn.send(("error", f"{type(e).__name__}: {e}"))


class MeasuringProcess:
    """A measuring subprocess that is restarted after a crash or a timeout. One may serve several `run_sweep`
    calls of the same runner (``process=``), sparing each suite the start of a fresh one (about a second and
    a half: the toolchain's import); its owner calls `stop`."""

    def __init__(self, runner_name: str, runner_kwargs: dict[str, Any], mem_limit_mb: int | None,
                 start_timeout: float = 120.0) -> None:
        self.args = (runner_name, runner_kwargs, mem_limit_mb)
        self.start_timeout = start_timeout
        self.proc: Any = None
        self.toolchain: dict[str, Any] = {}
        self.uses_host_cpu = True

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
        self.toolchain, self.uses_host_cpu = payload

    def running(self) -> bool:
        """Whether the worker process is alive."""
        return self.proc is not None and self.proc.is_alive()

    def kill(self) -> None:
        if self.running():
            self.proc.kill()
            self.proc.join(5)
        self.proc = None

    def stop(self) -> None:
        if self.running():
            try:
                self.conn.send(None)
                self.proc.join(5)
            except (BrokenPipeError, OSError):
                pass
        self.kill()

    def run(self, task: tuple, timeout: float, heartbeat: Callable[[], None] | None = None,
            every: float = 10.0, meanwhile: Callable[[], None] | None = None) -> tuple[str, Any]:
        """('ok', results) or ('error', message); restarts the worker after a timeout or a crash. Once the
        task is sent, ``meanwhile`` runs; while it waits, ``heartbeat`` is called every ``every`` seconds."""
        if not self.running():
            self.start()
        self.conn.send(task)
        deadline = time.monotonic() + timeout
        if meanwhile is not None:
            meanwhile()
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                return "error", f"timed out after {timeout:g} s"
            if self.conn.poll(min(left, every) if heartbeat is not None else left):
                break
            if heartbeat is not None:
                heartbeat()
        try:
            return self.conn.recv()
        except (EOFError, ConnectionResetError):
            code = self.proc.exitcode if self.proc is not None else None
            self.proc.join(5) if self.proc is not None else None
            code = self.proc.exitcode if self.proc is not None else code
            self.kill()
            why = "killed by the system, likely out of memory" if code in (-9, 137) else "crashed"
            return "error", f"worker {why} (exit code {code})"


@contextmanager
def measuring_process(runner: str, runner_kwargs: dict[str, Any] | None = None,
                      mem_limit_mb: int | None = 8192) -> Iterator[MeasuringProcess]:
    """One `MeasuringProcess` for the `run_sweep` calls of a block (``process=``), started by the first of
    them and stopped at its end."""
    proc = MeasuringProcess(runner, dict(runner_kwargs or {}), mem_limit_mb)
    try:
        yield proc
    finally:
        proc.stop()


@dataclass
class SweepResult:
    """What a sweep did: counts, time, and whether it was interrupted.

    ``measured`` / ``failed``: configurations this sweep stored; ``skipped``: stored before it started;
    ``by_others``: stored by other workers while it ran; ``taken_over``: claims of stopped workers it took.
    """

    measured: int = 0
    failed: int = 0
    skipped: int = 0
    by_others: int = 0
    taken_over: int = 0
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
              on_result: Callable[[ConfigResult], None] | None = None, worker: str | None = None,
              lease_s: float = LEASE_S, max_s: float | None = None,
              process: MeasuringProcess | None = None) -> SweepResult:
    """Measure ``configs`` of ``suite`` on ``runner`` into ``store`` (skipping those already stored), sharing
    the work with any other sweep of the same suite on the same store.

    ``worker`` names this sweep in ``annette bench status`` (default ``<host>-<pid>``); ``lease_s`` is how
    long a claim lasts without a heartbeat (renewed every quarter lease while measuring). ``max_s``: a
    configuration whose ``iterations`` would take longer gets fewer (at least `runners.base.MIN_ITERATIONS`),
    as its warm-up runs show. ``process``: a `MeasuringProcess` of this runner to measure in (kept running).
    """
    if iterations < 1 or warmup < 0:
        raise AnnetteError("iterations must be >= 1 and warmup >= 0")
    if not lease_s > 0:
        raise AnnetteError(f"lease must be a positive number of seconds, got {lease_s}")
    if max_s is not None and not max_s > 0:
        raise AnnetteError(f"the time per configuration must be a positive number of seconds, got {max_s}")
    runner_kwargs = dict(runner_kwargs or {})
    if process is not None and process.args[:2] != (runner, runner_kwargs):
        raise AnnetteError(f"the measuring process runs {process.args[0]!r} {process.args[1]}, not {runner!r} "
                           f"{runner_kwargs}")
    add_plan(store, platform, suite, [c["config_id"] for c in configs])
    done = store.done(platform, suite, include_failed=not retry_failed)
    todo = [c for c in configs if c["config_id"] not in done]
    res = SweepResult(skipped=len(configs) - len(todo))
    if not todo:
        return res
    proc = process or MeasuringProcess(runner, runner_kwargs, mem_limit_mb)
    stop = proc.stop if process is None else (lambda: None)
    if not proc.running():  # (a caller's process is started by its first sweep, or again after a crash)
        proc.start()
    name, machine = worker or default_worker(), this_machine()
    try:
        run_id = store.start_run(platform, runner, proc.toolchain,
                                 machine_fingerprint(runner_kwargs.get("threads")), worker=name, machine=machine)
    except BaseException:
        stop()
        raise
    try:
        sweep = _Sweep(store, platform, suite, todo, proc, res, run_id, name, machine, lease_s, retry_failed,
                       max(pack, 1), on_result, stop)
    except BaseException:  # e.g. this machine's measuring lock cannot be opened
        stop()
        raise
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(todo), unit="cfg", desc=f"{platform}/{suite}", dynamic_ncols=True)
    sweep.bar = bar
    t0 = time.perf_counter()

    def over() -> bool:
        return budget_s is not None and time.perf_counter() - t0 >= budget_s

    try:
        sweep.run(over, lambda batch, beat, every, meanwhile: _measure_batch(
            proc, suite, batch, iterations, warmup, max_s, timeout_s, beat, every, meanwhile))
    except KeyboardInterrupt:
        res.interrupted = True
    finally:
        try:
            sweep.flush_last()
            res.seconds = time.perf_counter() - t0
            sweep.close()
        finally:
            if bar is not None:
                bar.close()
    return res


class _Sweep:
    """One worker's share of a sweep: claims configurations (a few ahead), measures them under this machine's
    lock, stores each result while the next configuration compiles, waits for what other workers hold and
    takes over what they abandon; `close` stores what is measured and gives back what is claimed."""

    def __init__(self, store: Store, platform: str, suite: str, todo: Sequence[dict[str, Any]], proc: MeasuringProcess,
                 res: SweepResult, run_id: int, name: str, machine: str, lease_s: float, retry_failed: bool,
                 pack: int, on_result: Callable[[ConfigResult], None] | None, stop: Callable[[], None]) -> None:
        self.store, self.platform, self.suite, self.proc, self.res = store, platform, suite, proc, res
        self.stop = stop  # the worker process's, unless the caller keeps it for further sweeps
        self.run_id, self.name, self.machine, self.lease_s = run_id, name, machine, lease_s
        self.retry_failed, self.pack, self.on_result = retry_failed, pack, on_result
        self.bar: Any = None
        self.every = max(min(lease_s / 4, 10.0), 0.05)  # heartbeat interval
        self.last_beat = time.monotonic()
        self.lock = MachineLock(proc.uses_host_cpu, poll_s=min(1.0, self.every))
        self.pending: deque[dict[str, Any]] = deque(todo)  # not claimed yet
        self.queue: deque[dict[str, Any]] = deque()  # claimed by this worker, not measured yet
        self.held: dict[str, None] = {}  # claimed by this worker, not stored yet (renewed by the heartbeat)
        self.elsewhere: dict[str, dict[str, Any]] = {}  # held by other workers under a live lease
        self.retried: set[str] = set()  # were held by others: claimed now, they are taken over
        self.unstored: list[ConfigResult] = []  # measured, stored while the next configuration compiles

    def run(self, over: Callable[[], bool], measure: Callable[..., list[ConfigResult]]) -> None:
        res = self.res
        while self.queue or self.pending or self.elsewhere:
            if over():
                res.stopped_by_budget = True
                return
            if not self.queue and not self.pending:  # the rest is measured elsewhere: wait, try again
                self.flush()
                if self.bar is not None:
                    self.bar.set_postfix(ok=res.measured, failed=res.failed, elsewhere=len(self.elsewhere))
                time.sleep(min(self.every, 1.0))
                self.retried.update(self.elsewhere)
                self.pending.extend(self.elsewhere.values())
                self.elsewhere.clear()
            # while it waits for this machine's turn, the claims queued ahead keep their leases
            with self.lock.hold(stop=lambda: self.beat_if_due() or over()) as may:
                if not may:
                    res.stopped_by_budget = True
                    return
                self.claim_more()
                if not self.queue:
                    self.flush()
                    continue
                batch = [self.queue.popleft() for _ in range(min(self.pack, len(self.queue)))]
                self.unstored = measure(batch, self.beat, self.every, self.flush)
                if self.lock.contended():  # another worker waits for this machine: store now, not in its turn
                    self.flush()

    def claim_more(self) -> None:
        """When fewer than a batch are queued, claim up to `CLAIM_AHEAD` (or a batch); note those others hold."""
        if len(self.queue) >= self.pack:
            return
        ahead = max(self.pack, CLAIM_AHEAD)
        while self.pending and len(self.queue) < ahead:
            take = [self.pending.popleft() for _ in range(min(ahead - len(self.queue), len(self.pending)))]
            by_id = {c["config_id"]: c for c in take}
            got = claim(self.store, self.platform, self.suite, list(by_id), self.name, self.machine, self.run_id,
                        self.lease_s, self.retry_failed)
            taken = set(got.taken_over) | self.retried  # (an expired claim found at once, or one seen held)
            for cid in got.claimed:
                self.queue.append(by_id[cid])
                self.held[cid] = None
                self.res.taken_over += cid in taken
            self.elsewhere.update((cid, by_id[cid]) for cid in got.busy)
            self.res.by_others += len(got.stored)
            if self.bar is not None and got.stored:
                self.bar.update(len(got.stored))

    def beat_if_due(self) -> None:
        """`beat` when the last one is a heartbeat interval old (for waits outside a measurement)."""
        if self.held and time.monotonic() - self.last_beat >= self.every:
            self.beat()

    def beat(self) -> None:
        """Heartbeat: renew the leases of every configuration this worker holds."""
        self.last_beat = time.monotonic()
        try:
            kept = renew(self.store, self.platform, self.suite, list(self.held), self.name, self.lease_s)
        except AnnetteError as e:  # the store is unreachable for a moment: the lease may still hold
            log.warning("%s/%s: lease not renewed: %s", self.platform, self.suite, e)
            return
        if kept < len(self.held):
            log.warning("%s/%s: another worker took over a configuration this one holds (its lease ran out); "
                        "the first result stored counts", self.platform, self.suite)

    def flush(self) -> None:
        """Store the measured results not stored yet."""
        results, self.unstored = self.unstored, []
        res = self.res
        for r in results:
            if not self.store.add(self.run_id, self.platform, r):
                res.by_others += 1  # another worker stored it first (this one's lease had run out)
            elif r.status == "ok":
                res.measured += 1
            else:
                res.failed += 1
                res.errors.append(f"{r.config_id}: {r.error}")
                log.warning("%s/%s config %s failed: %s", self.platform, self.suite, r.config_id, r.error)
            self.held.pop(r.config_id, None)
            if self.on_result:
                self.on_result(r)
        if self.bar is not None and results:
            self.bar.update(len(results))
            self.bar.set_postfix(ok=res.measured, failed=res.failed)

    def flush_last(self) -> None:
        """Store what is measured and not stored yet, when the sweep ends (a failure is a warning)."""
        try:
            self.flush()
        except AnnetteError as e:
            log.warning("%s/%s: the last results could not be stored (they are measured again): %s",
                        self.platform, self.suite, e)

    def close(self) -> None:
        """Stop the worker process (unless the caller keeps it), give back what is claimed but not stored."""
        self.stop()
        self.lock.close()
        if self.held:
            try:
                release(self.store, self.platform, self.suite, list(self.held), self.name)
            except AnnetteError as e:
                log.warning("%s/%s: claims not released (they return when their lease runs out): %s",
                            self.platform, self.suite, e)


def _measure_batch(proc: MeasuringProcess, suite: str, batch: list[dict[str, Any]], iterations: int, warmup: int,
                   max_s: float | None, timeout_s: float, beat: Callable[[], None], every: float,
                   meanwhile: Callable[[], None] | None = None) -> list[ConfigResult]:
    """Measure one claimed batch in the worker process (``meanwhile`` runs once it has started); a failing
    batch of several is measured one by one to find the configuration that fails."""
    task = (suite, batch, iterations, warmup, max_s)
    kind, payload = proc.run(task, timeout_s * len(batch), beat, every, meanwhile)
    if kind == "ok":
        return payload
    if len(batch) == 1:
        return [ConfigResult(suite, batch[0]["config_id"], batch[0], "failed", error=payload)]
    results = []
    for c in batch:
        k1, p1 = proc.run((suite, [c], *task[2:]), timeout_s, beat, every)
        results.append(p1[0] if k1 == "ok" else ConfigResult(suite, c["config_id"], c, "failed", error=p1))
    return results
