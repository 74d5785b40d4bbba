"""Latency-aware architecture search with Optuna: predicted latency (annette-torch) as a constraint or objective.

Two searches over a search space (`SPACES`: ``nb201``, ``nb101``, ``mbv2``, or any object with the `Space`
methods) on one platform:

* `latency_constrained_search`: single-objective TPE maximising a user objective (a training function, a
  zero-cost proxy, a lookup in NAS-Bench data, ...) subject to ``predicted latency <= latency_ms``;
* `pareto_search`: multi-objective NSGA-II over (objective, maximised) and (predicted latency, minimised);

and queries of their studies (`feasible_trials`, `best_feasible`, `trial_rows`, `enqueue`).

Every trial stores ``arch`` (the space's string encoding) and ``latency_ms`` (predicted) in its
``user_attrs`` and, in the constrained search, the constraint ``latency_ms - budget`` (feasible when <= 0):
through ``Trial.set_constraint`` on Optuna >= 5 (where ``constraints_func`` is deprecated), through the
sampler's ``constraints_func`` (reading ``user_attrs["constraint"]``) on older Optuna. Predicted latencies
are cached per architecture (`LatencyOracle`), so a repeated architecture costs a dict lookup.

Studies live in memory or in a shared storage (`open_storage`: an Optuna URL or ``journal:PATH``); several
processes or machines running the same call with the same ``study_name`` search one study (give each worker
its own ``seed``). Watch it with ``optuna-dashboard sqlite:///study.db`` (or ``optuna-dashboard study.log``
for a journal file; ``pip install optuna-dashboard``).

The spaces, the oracle, the objectives and the storage helpers are defined in `spaces.registry`, `oracle`,
`objectives` and `storage`; their public names are importable from here too, so one import gives the whole
search API.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ..errors import AnnetteError
from ..types import PlatformLike
from .constraint import CONSTRAINT_ATTR, LatencyConstraint, has_set_constraint
from .objectives import Objective, csv_objective, load_objective, read_accuracy_csv, synthetic_accuracy
from .oracle import LatencyOracle
from .pareto import pareto_front
from .spaces.registry import (SPACES, ChoiceSpace, FunctionSpace, MBV2Space, NB101Space, NB201Space, Sample, Space,
                              SpaceLike, get_space)
from .storage import STUDY_ATTR, open_storage, open_study

__all__ = [
    "latency_constrained_search", "pareto_search", "latency_constraints", "feasible_trials", "best_feasible",
    "trial_rows", "enqueue",
    # defined in spaces.registry, oracle, objectives, storage
    "Space", "SpaceLike", "NB201Space", "NB101Space", "MBV2Space", "FunctionSpace", "ChoiceSpace", "Sample", "SPACES",
    "get_space",
    "LatencyOracle", "LatencyConstraint",
    "synthetic_accuracy", "csv_objective", "load_objective", "read_accuracy_csv", "open_storage", "STUDY_ATTR",
]


_has_set_constraint = has_set_constraint


def latency_constraints(trial: Any) -> Sequence[float]:
    """``constraints_func`` for a sampler on Optuna < 5 (the constraint stored in ``user_attrs``). On Optuna >= 5
    the searches call ``trial.set_constraint``, which every sampler reads; no ``constraints_func`` needed."""
    return trial.user_attrs.get(CONSTRAINT_ATTR, (1.0,))  # pruned before the latency was known: infeasible


@dataclass
class _Evaluator:
    """The study's objective: suggest -> predicted latency (cached) -> user objective (cached)."""

    space: Space
    oracle: LatencyOracle
    objective: Objective
    budget: float | None
    multi: bool
    skip_infeasible: bool = False
    cache_objective: bool = True
    values: dict[str, float] = field(default_factory=dict)
    overhead_s: float = 0.0   # predicted latency + storing it in the trial
    latency_s: float = 0.0    # predicted latency alone (IR build + estimate, or the cache)
    trials: int = 0

    def __call__(self, trial: Any) -> Any:
        import optuna
        arch = self.space.suggest(trial)
        t0 = time.perf_counter()
        key = self.space.encode(arch)
        ms = self.oracle(arch)
        self.latency_s += time.perf_counter() - t0
        trial.set_user_attr("arch", key)
        trial.set_user_attr("latency_ms", ms)
        if self.budget is not None:
            c = ms - self.budget
            if _has_set_constraint():
                trial.set_constraint("latency", c)
            else:
                trial.set_user_attr(CONSTRAINT_ATTR, [c])
        self.overhead_s += time.perf_counter() - t0
        self.trials += 1
        if self.skip_infeasible and self.budget is not None and ms > self.budget:
            raise optuna.TrialPruned(f"predicted {ms:.4f} ms > budget {self.budget} ms")
        value = self.values.get(key) if self.cache_objective else None
        if value is None:
            value = float(self.objective(arch))
            if self.cache_objective:
                self.values[key] = value
        return (value, ms) if self.multi else value


def _attach(study: Any, ev: _Evaluator) -> Any:
    # this process's statistics, for reports (not stored: other workers have their own): the oracle, and per
    # trial the constraint's overhead (latency + storing it) and the latency evaluation alone, in ms
    study.annette_oracle = ev.oracle  # type: ignore[attr-defined]
    study.annette_overhead_ms = 1e3 * ev.overhead_s / ev.trials if ev.trials else 0.0  # type: ignore[attr-defined]
    study.annette_latency_ms = 1e3 * ev.latency_s / ev.trials if ev.trials else 0.0  # type: ignore[attr-defined]
    return study


def latency_constrained_search(space: SpaceLike, platform: PlatformLike, objective: Objective | str,
                               n_trials: int, *, latency_ms: float, storage: Any = None, study_name: str | None = None,
                               seed: int | None = 0, sampler: Any = None, timeout: float | None = None,
                               skip_infeasible: bool = False, cache_objective: bool = True, n_startup_trials: int = 10,
                               callbacks: Sequence[Callable] | None = None, margin: float = 0.0,
                               input_shape: Sequence[int] | None = None, build: Callable[..., Any] | None = None,
                               latency: str = "latency") -> Any:
    """Maximise ``objective(arch)`` subject to ``predicted latency(arch) <= latency_ms`` on ``platform``.

    The arguments are those of `pareto_search`, in its order; here the budget ``latency_ms`` is required.

    Single-objective TPE with the latency constraint (``latency - budget <= 0`` is feasible). ``space``: a
    shipped space's name (``nb201``: architectures are arch strings; ``nb101``: ``Spec`` cells; ``mbv2``:
    tuples of block ops), a `Space` object, a function ``trial -> nn.Module`` (with ``input_shape``) or a
    dict of choices with ``build(**params) -> nn.Module`` (their architectures are `Sample` objects:
    ``sample.params``, ``sample.model``). ``objective`` is a callable on architectures (or ``'synthetic'`` /
    an ``arch,accuracy`` CSV path). The latency is `Estimate.latency_ms` (``latency="device"``: the layer
    sum). ``storage``: None (in
    memory), an Optuna storage URL or object, or ``journal:PATH``; the study is created or joined
    (``load_if_exists``) — run the same call in several processes to search one study. ``skip_infeasible``
    prunes over-budget architectures without evaluating the objective (worth it when it trains a network).
    A custom ``sampler`` on Optuna < 5 needs ``constraints_func=latency_constraints``. ``margin`` (e.g. 0.05,
    the platform's measured error) tightens the budget the search enforces to ``latency_ms * (1 - margin)``,
    so that the architectures it reports stay under ``latency_ms`` when measured.
    Returns the ``optuna.Study``; `best_feasible` lists its best architectures.
    """
    import optuna
    if isinstance(latency_ms, bool) or not (isinstance(latency_ms, (int, float)) and math.isfinite(latency_ms)
                                            and latency_ms > 0):
        raise AnnetteError(f"latency budget must be a positive number of ms, got {latency_ms!r}")
    if not 0 <= margin < 1:
        raise AnnetteError(f"margin must be in [0, 1), got {margin!r}")
    latency_ms = float(latency_ms) * (1.0 - margin)
    if int(n_trials) < 1:
        raise AnnetteError(f"n_trials must be >= 1, got {n_trials}")
    oracle = LatencyOracle(get_space(space, input_shape, build), platform, latency)
    sp = oracle.space
    obj = load_objective(objective, sp)
    if sampler is None:
        kw: dict[str, Any] = {} if _has_set_constraint() else {"constraints_func": latency_constraints}
        sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=n_startup_trials, **kw)
    meta = {"space": sp.name, "platform": oracle.platform.name, "mode": "constrained",
            "latency_budget_ms": float(latency_ms), "latency": latency}
    study = open_study(storage, study_name, sampler, meta, direction="maximize")
    ev = _Evaluator(sp, oracle, obj, float(latency_ms), multi=False, skip_infeasible=skip_infeasible,
                    cache_objective=cache_objective)
    study.optimize(ev, n_trials=int(n_trials), timeout=timeout, callbacks=callbacks)
    return _attach(study, ev)


def pareto_search(space: SpaceLike, platform: PlatformLike, objective: Objective | str, n_trials: int, *,
                  latency_ms: float | None = None, storage: Any = None, study_name: str | None = None,
                  seed: int | None = 0, sampler: Any = None, population_size: int = 20, timeout: float | None = None,
                  cache_objective: bool = True, callbacks: Sequence[Callable] | None = None,
                  input_shape: Sequence[int] | None = None, build: Callable[..., Any] | None = None,
                  latency: str = "latency") -> Any:
    """Multi-objective NSGA-II over (``objective`` maximised, predicted latency minimised).

    ``study.best_trials`` is the Pareto front found (values ``(objective, latency_ms)``); an optional
    ``latency_ms`` budget adds the constraint. Spaces (also functions and dicts of choices), ``latency``,
    storage and workers as in `latency_constrained_search`.
    """
    import optuna
    if int(n_trials) < 1:
        raise AnnetteError(f"n_trials must be >= 1, got {n_trials}")
    if latency_ms is not None and (isinstance(latency_ms, bool) or not isinstance(latency_ms, (int, float))
                                   or not (math.isfinite(latency_ms) and latency_ms > 0)):
        raise AnnetteError(f"latency budget must be a positive number of ms, got {latency_ms!r}")
    oracle = LatencyOracle(get_space(space, input_shape, build), platform, latency)
    sp = oracle.space
    obj = load_objective(objective, sp)
    if sampler is None:
        kw: dict[str, Any] = {}
        if latency_ms is not None and not _has_set_constraint():
            kw["constraints_func"] = latency_constraints
        sampler = optuna.samplers.NSGAIISampler(seed=seed, population_size=population_size, **kw)
    meta = {"space": sp.name, "platform": oracle.platform.name, "mode": "pareto",
            "latency_budget_ms": None if latency_ms is None else float(latency_ms), "latency": latency}
    study = open_study(storage, study_name, sampler, meta, directions=["maximize", "minimize"])
    ev = _Evaluator(sp, oracle, obj, None if latency_ms is None else float(latency_ms), multi=True,
                    cache_objective=cache_objective)
    study.optimize(ev, n_trials=int(n_trials), timeout=timeout, callbacks=callbacks)
    return _attach(study, ev)


# ------------------------------------------------------------------------------------------------------
# results


def _budget(study: Any, latency_ms: float | None) -> float | None:
    if latency_ms is not None:
        return float(latency_ms)
    return (study.user_attrs.get(STUDY_ATTR) or {}).get("latency_budget_ms")


def feasible_trials(study: Any, latency_ms: float | None = None) -> list[Any]:
    """Completed trials whose predicted latency is within the budget (the study's, or ``latency_ms``)."""
    from optuna.trial import TrialState
    budget = _budget(study, latency_ms)
    out = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        ms = t.user_attrs.get("latency_ms")
        if ms is not None and (budget is None or ms <= budget):
            out.append(t)
    return out


def best_feasible(study: Any, k: int = 1, latency_ms: float | None = None) -> list[dict[str, Any]]:
    """The ``k`` best distinct feasible architectures: ``{arch, objective, latency_ms, trial}``, best first
    (ties: faster first). For a multi-objective study, the feasible Pareto front, fastest first."""
    rows: dict[str, dict[str, Any]] = {}
    trials = feasible_trials(study, latency_ms)
    multi = len(study.directions) > 1
    for t in trials:
        value = t.values[0] if multi else t.value
        arch = t.user_attrs["arch"]
        if arch not in rows or value > rows[arch]["objective"]:
            rows[arch] = {"arch": arch, "objective": float(value), "latency_ms": float(t.user_attrs["latency_ms"]),
                          "trial": t.number}
    items = list(rows.values())
    if multi:
        if not items:
            return []
        idx = pareto_front(np.array([r["latency_ms"] for r in items]), np.array([r["objective"] for r in items]))
        return [items[i] for i in idx][:k] if k else [items[i] for i in idx]
    items.sort(key=lambda r: (-r["objective"], r["latency_ms"]))
    return items[:k]


def trial_rows(study: Any) -> list[dict[str, Any]]:
    """One dict per trial: number, state, arch, latency_ms, objective, feasible (for CSV export)."""
    budget = _budget(study, None)
    out = []
    for t in study.get_trials(deepcopy=False):
        ms = t.user_attrs.get("latency_ms")
        value = None if t.values is None else t.values[0]
        out.append({"trial": t.number, "state": t.state.name, "arch": t.user_attrs.get("arch", ""),
                    "latency_ms": "" if ms is None else ms, "objective": "" if value is None else value,
                    "feasible": "" if ms is None else int(budget is None or ms <= budget)})
    return out


def enqueue(study: Any, space: str | Space, archs: Iterable[Any]) -> None:
    """Queue known architectures (e.g. a baseline) as the next trials of ``study`` (NB201 only for now)."""
    sp = get_space(space)
    params_of = getattr(sp, "params_of", None)
    if params_of is None:
        raise AnnetteError(f"enqueueing architectures is not supported for {sp.name}")
    for a in archs:
        study.enqueue_trial(params_of(a))
