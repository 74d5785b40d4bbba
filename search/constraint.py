"""A predicted-latency constraint for any Optuna objective: `LatencyConstraint`.

Called in the user's own objective with the trial and the model it built (an ``nn.Module``, a `Network`,
or an ``.onnx`` path), it predicts the model's latency on one platform (cached by architecture), stores it
in the trial's user attributes and sets the constraint ``latency - budget`` (feasible when <= 0) the way
the installed Optuna reads it: ``Trial.set_constraint`` where it exists (Optuna >= 5, every sampler reads
it), otherwise through the sampler's ``constraints_func``, which the same object offers
(`LatencyConstraint.sampler_kwargs`). Works with TPE, NSGA-II / NSGA-III and GP samplers::

    constraint = LatencyConstraint("zcu102", latency_ms=2.0, input_shape=(1, 3, 32, 32))

    def objective(trial):
        model = build(trial)                 # any nn.Module
        constraint(trial, model)             # predicted latency -> user_attrs, constraint
        return train_and_evaluate(model)

    optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(**constraint.sampler_kwargs()))
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
import time
from typing import Any, Sequence

import numpy as np

from ..errors import AnnetteError
from ..estimator import LATENCY_KINDS, estimate_many, latency_definition, to_network
from ..ir import INT_COLUMNS, Network
from ..platform import load_platform
from ..types import PlatformLike

__all__ = ["LatencyConstraint", "architecture_key", "has_set_constraint", "CONSTRAINT_ATTR"]

#: trial user attribute holding the constraint values (read by `LatencyConstraint.constraints_func`)
CONSTRAINT_ATTR = "constraint"
_SIMPLE = (bool, int, float, str, type(None))


def has_set_constraint() -> bool:
    """Whether the installed Optuna has ``Trial.set_constraint`` (Optuna >= 5)."""
    import optuna
    return hasattr(optuna.trial.Trial, "set_constraint")


def _module_key(model: Any) -> tuple:
    """Structure of an nn.Module: per submodule its name, class, plain attributes (hyperparameters such as
    ``kernel_size``, flags such as ``residual``) and parameter / buffer shapes; equal keys trace to the same
    network. A tuple (hashing it is cheaper than formatting ``repr(model)``)."""
    parts: list[tuple] = []
    simple = _SIMPLE + (tuple,)
    for name, m in model.named_modules():
        d = m.__dict__
        attrs = tuple((k, v) for k, v in d.items() if k[0] != "_" and k != "training" and isinstance(v, simple))
        params = tuple((k, p.shape) for k, p in d["_parameters"].items() if p is not None)
        bufs = tuple((k, b.shape) for k, b in d["_buffers"].items() if b is not None)
        parts.append((name, type(m), attrs, params, bufs))
    return tuple(parts)


def _network_key(net: Network) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(np.ascontiguousarray(net.types).tobytes())
    for c in INT_COLUMNS:
        h.update(np.ascontiguousarray(net.cols[c]).tobytes())
    h.update(np.ascontiguousarray(net.edges).tobytes())
    return "net:" + h.hexdigest()


def architecture_key(model: Any, input_shape: Sequence[int] | None = None) -> Any:
    """A key that is equal for models with the same architecture (the latency cache's key): an nn.Module's
    structure, a `Network`'s layer arrays, an ONNX file's path, size and modification time; plus the input
    shape."""
    shape = None if input_shape is None else tuple(np.asarray(input_shape).ravel().tolist())
    if isinstance(model, Network):
        return _network_key(model), shape
    if isinstance(model, (str, os.PathLike)):
        path = os.path.abspath(os.fspath(model))
        try:
            st = os.stat(path)
        except OSError:
            return path, shape  # estimating it raises the one-line error
        return f"file:{path}:{st.st_size}:{st.st_mtime_ns}", shape
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(model, torch.nn.Module):
        key = _module_key(model)
        try:
            hash(key)
        except TypeError:  # an attribute tuple holding a list: compare its text
            key = repr(key)
        return key, shape
    onnx = sys.modules.get("onnx")
    if onnx is not None and isinstance(model, onnx.ModelProto):
        return "onnx:" + hashlib.blake2b(model.SerializeToString(), digest_size=16).hexdigest(), shape
    return id(model), shape


class LatencyConstraint:
    """``predicted latency <= latency_ms * (1 - margin)`` on ``platform``, for any Optuna objective.

    ``constraint(trial, model)`` predicts ``model``'s latency (`Estimate.latency_ms`, or the layer sum with
    ``latency="device"``), caches it by architecture (`architecture_key`, or the ``key`` given), stores
    ``latency_ms`` and the constraint in ``trial.user_attrs``, calls ``trial.set_constraint`` where Optuna
    has it, and returns the latency in ms. ``margin`` (e.g. 0.05, the platform's error) keeps the
    architectures it accepts under ``latency_ms`` when measured. ``calls``, ``misses``, ``seconds`` and
    `mean_ms` account the time it adds to the trials.
    """

    def __init__(self, platform: PlatformLike = "zcu102", *, latency_ms: float,
                 input_shape: Sequence[int] | None = None, margin: float = 0.0, latency: str = "latency",
                 name: str = "latency") -> None:
        if isinstance(latency_ms, bool) or not isinstance(latency_ms, (int, float)) \
                or not (math.isfinite(latency_ms) and latency_ms > 0):
            raise AnnetteError(f"LatencyConstraint: latency_ms must be a positive number of ms, got {latency_ms!r}")
        if not (isinstance(margin, (int, float)) and 0 <= margin < 1):
            raise AnnetteError(f"LatencyConstraint: margin must be in [0, 1), got {margin!r}")
        if latency not in LATENCY_KINDS:
            raise AnnetteError(f"LatencyConstraint: latency must be one of {', '.join(LATENCY_KINDS)}, "
                               f"got {latency!r}")
        self.platform = load_platform(platform)
        self.platform.check_machine()
        self.latency_ms = float(latency_ms)
        self.margin = float(margin)
        self.budget_ms = self.latency_ms * (1.0 - self.margin)
        self.input_shape = None if input_shape is None else tuple(input_shape)
        self.latency = latency
        self.definition = latency_definition(self.platform, latency)
        self.name = name
        self._cache: dict[Any, float] = {}
        self._set_constraint = has_set_constraint()
        self.calls = 0
        self.misses = 0
        self.seconds = 0.0

    def predict(self, model: Any, key: Any = None) -> float:
        """Predicted latency of ``model`` in ms (cached by architecture, or by ``key`` when given)."""
        t0 = time.perf_counter()
        ms = self._predict(model, key)
        self.seconds += time.perf_counter() - t0
        return ms

    def _predict(self, model: Any, key: Any) -> float:
        self.calls += 1
        k = architecture_key(model, self.input_shape) if key is None else ("key", key)
        ms = self._cache.get(k)
        if ms is None:
            self.misses += 1
            net = to_network(model, self.input_shape)
            ms = float(estimate_many([net], self.platform, latency=self.latency)[0])
            self._cache[k] = ms
        return ms

    def __call__(self, trial: Any, model: Any, key: Any = None, prune: bool = False) -> float:
        """Predict ``model``'s latency, record it and the constraint in ``trial``; returns the latency (ms).

        ``prune=True`` raises ``optuna.TrialPruned`` for an over-budget model (before it is trained)."""
        t0 = time.perf_counter()
        ms = self._predict(model, key)
        c = ms - self.budget_ms
        trial.set_user_attr("latency_ms", ms)
        trial.set_user_attr(CONSTRAINT_ATTR, [c])
        if self._set_constraint:
            trial.set_constraint(self.name, c)
        self.seconds += time.perf_counter() - t0
        if prune and c > 0:
            import optuna
            raise optuna.TrialPruned(f"predicted {ms:.4f} ms > budget {self.budget_ms:.4f} ms")
        return ms

    def constraints_func(self, trial: Any) -> Sequence[float]:
        """A sampler's ``constraints_func`` (for Optuna < 5): the constraint stored in ``user_attrs``; a trial
        that ended before its latency was known counts as infeasible."""
        return trial.user_attrs.get(CONSTRAINT_ATTR, (1.0,))

    def sampler_kwargs(self) -> dict[str, Any]:
        """Keyword arguments that make a sampler see the constraint: none on Optuna >= 5 (``set_constraint``),
        ``constraints_func`` before."""
        return {} if self._set_constraint else {"constraints_func": self.constraints_func}

    def feasible(self, trial: Any) -> bool:
        """Whether a (finished) trial's recorded latency is within the enforced budget."""
        ms = trial.user_attrs.get("latency_ms")
        return ms is not None and ms <= self.budget_ms

    @property
    def mean_ms(self) -> float:
        """Mean time a call adds to a trial, in ms (cache hits included)."""
        return 1e3 * self.seconds / self.calls if self.calls else 0.0

    def __repr__(self) -> str:
        m = f" (margin {self.margin:g}: enforced {self.budget_ms:.4g} ms)" if self.margin else ""
        return (f"LatencyConstraint({self.platform.name}: {self.latency} <= {self.latency_ms:g} ms{m}; "
                f"{len(self._cache)} cached, {self.calls} calls, {self.mean_ms:.3f} ms/call)")
