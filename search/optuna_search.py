"""Latency-aware architecture search with Optuna: predicted latency (annette-torch) as a constraint or objective.

Two searches over a search space (`SPACES`: ``nb201``, ``nb101``, ``mbv2``, or any object with the `Space`
methods) on one platform:

* `latency_constrained_search`: single-objective TPE maximising a user objective (a training function, a
  zero-cost proxy, a lookup in NAS-Bench data, ...) subject to ``predicted latency <= latency_ms``;
* `pareto_search`: multi-objective NSGA-II over (objective, maximised) and (predicted latency, minimised).

Every trial stores ``arch`` (the space's string encoding) and ``latency_ms`` (predicted) in its
``user_attrs`` and, in the constrained search, the constraint ``latency_ms - budget`` (feasible when <= 0):
through ``Trial.set_constraint`` on Optuna >= 5 (where ``constraints_func`` is deprecated), through the
sampler's ``constraints_func`` (reading ``user_attrs["constraint"]``) on older Optuna. Predicted latencies
are cached per architecture (`LatencyOracle`), so a repeated architecture costs a dict lookup.

Storage: in memory by default; any Optuna storage URL (``sqlite:///study.db``, ``postgresql://...``) or
``journal:PATH`` (an append-only journal file, safe for several processes on one machine or a shared file
system). The study is opened with ``load_if_exists=True``, so several processes or machines running the same
call with the same ``study_name`` search one study (give each worker its own ``seed``). Watch it with
``optuna-dashboard sqlite:///study.db`` (or ``optuna-dashboard study.log`` for a journal file;
``pip install optuna-dashboard``).

The `synthetic_accuracy` objectives are deterministic stand-ins for demos and tests: they are NOT accuracy.
"""

from __future__ import annotations

import csv
import hashlib
import logging
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Protocol, Sequence, runtime_checkable

import numpy as np

from ..errors import AnnetteError
from ..ir import Network

__all__ = [
    "Space", "NB201Space", "NB101Space", "MBV2Space", "SPACES", "get_space", "LatencyOracle",
    "latency_constrained_search", "pareto_search", "open_storage", "synthetic_accuracy", "csv_objective",
    "load_objective", "read_accuracy_csv", "latency_constraints", "feasible_trials", "best_feasible",
    "trial_rows", "enqueue", "STUDY_ATTR",
]

log = logging.getLogger(__name__)

#: study user attribute holding what the study searches (space, platform, budget); checked on reuse
STUDY_ATTR = "annette"

Objective = Callable[[Any], float]


# ------------------------------------------------------------------------------------------------------
# search spaces


@runtime_checkable
class Space(Protocol):
    """What a search needs from a search space: sample an architecture, build its IR, name it."""

    name: str

    def suggest(self, trial: Any) -> Any:
        """Draw an architecture with ``trial.suggest_*``; raise ``optuna.TrialPruned`` for an invalid one."""

    def network(self, arch: Any) -> Network:
        """The architecture's IR (for the latency estimate)."""

    def encode(self, arch: Any) -> str:
        """A string that identifies the architecture (stored in the study, the key of caches and CSVs)."""

    def decode(self, text: str) -> Any:
        """Inverse of `encode`; raises ValueError for a malformed string."""


class _SpaceBase:
    name = "space"

    def latency_key(self, arch: Any) -> Any:
        """Key of the latency cache: architectures with equal keys have equal networks (default: encoding)."""
        return self.encode(arch)  # type: ignore[attr-defined]

    def key(self, arch: Any) -> str:
        """Key of an architecture in accuracy tables (default: its encoding)."""
        return self.encode(arch)  # type: ignore[attr-defined]

    def text_key(self, text: str) -> str:
        """Key of a table entry written as text (default: the normalised encoding); ValueError if malformed."""
        return self.encode(self.decode(text))  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class NB201Space(_SpaceBase):
    """NAS-Bench-201 cells: 6 categorical edges over ``none / skip / conv1x1 / conv3x3 / avgpool3x3``.

    An architecture is the benchmark's arch string (``|nor_conv_3x3~0|+|...|``); its network is the
    benchmark's CIFAR skeleton (C=16, N=5, input 1x3x32x32) built directly as IR.
    """

    name = "nb201"

    def __init__(self, C: int = 16, N: int = 5, num_classes: int = 10) -> None:
        from .spaces import nb201
        self._m = nb201
        self.C, self.N, self.num_classes = C, N, num_classes
        self._params = [(f"edge {d}<-{s}", e) for e, (s, d) in enumerate(nb201.EDGES)]

    def suggest(self, trial: Any) -> str:
        return self._m.arch_string([trial.suggest_categorical(p, self._m.OPS) for p, _ in self._params])

    def network(self, arch: str) -> Network:
        return self._m.build_network(arch, self.C, self.N, self.num_classes)

    def networks(self, archs: Sequence[str]) -> list[Network]:
        build = getattr(self._m, "build_networks", None)
        if build is not None:
            return build(list(archs), self.C, self.N, self.num_classes)
        return [self.network(a) for a in archs]

    def encode(self, arch: str) -> str:
        return arch

    def decode(self, text: str) -> str:
        text = text.strip()
        return self._m.arch_string([op for op, _, _ in self._m.parse(text)])

    def latency_key(self, arch: str) -> Any:
        return self._m.live_edges(arch)  # equal live edges -> identical networks

    def params_of(self, arch: str) -> dict[str, Any]:
        """Optuna parameters that select ``arch`` (for ``study.enqueue_trial``)."""
        ops = [op for op, _, _ in self._m.parse(arch)]
        return {p: ops[e] for p, e in self._params}


class NB101Space(_SpaceBase):
    """NAS-Bench-101 cells: the upper-triangular 7x7 adjacency (21 binary parameters) + 5 interior ops.

    A sampled cell is validated and pruned as the benchmark does (`annette_torch.search.spaces.nb101.validate`); an invalid
    one (output unreachable, > 9 edges after pruning) prunes its trial (``TrialPruned``, reason in
    ``user_attrs["invalid"]``), and the samplers steer away from such cells. An architecture is the pruned
    ``Spec``; its encoding is ``rows/of/the/matrix|op;op;...`` (e.g. ``011/001/000|input;conv3x3-bn-relu;
    output``; ``,`` is accepted too when decoding). Accuracy tables are matched by the benchmark's
    isomorphism-invariant hash (`key`), so a CSV may hold either the 32-hex ``spec_hash`` or the encoding.
    """

    name = "nb101"

    def __init__(self) -> None:
        from .spaces import nb101
        self._m = nb101
        n = nb101.MAX_VERTICES
        self._bits = [(i, j) for i in range(n) for j in range(i + 1, n)]

    def suggest(self, trial: Any) -> Any:
        import optuna
        m = self._m
        n = m.MAX_VERTICES
        matrix = np.zeros((n, n), dtype=np.int64)
        for i, j in self._bits:
            matrix[i, j] = trial.suggest_categorical(f"edge {i}->{j}", (0, 1))
        ops = (m.INPUT, *(trial.suggest_categorical(f"op {v}", m.OPS) for v in range(1, n - 1)), m.OUTPUT)
        try:
            return m.validate(matrix, ops)
        except ValueError as e:
            trial.set_user_attr("invalid", str(e))
            raise optuna.TrialPruned(f"invalid NB101 cell: {e}") from None

    def network(self, arch: Any) -> Network:
        return self._m.build_network(arch.matrix, arch.ops)

    def encode(self, arch: Any) -> str:
        rows = "/".join("".join(str(int(v)) for v in row) for row in np.asarray(arch.matrix))
        return f"{rows}|{';'.join(arch.ops)}"

    def decode(self, text: str) -> Any:
        rows, sep, ops = text.strip().partition("|")
        if not sep:
            raise ValueError(f"NB101 encoding {text!r}: expected 'matrix rows|ops', e.g. '01/00|input;output'")
        bits = rows.split("/")
        if any(len(r) != len(bits) or set(r) - {"0", "1"} for r in bits):
            raise ValueError(f"NB101 encoding {text!r}: matrix rows must be {len(bits)} binary digits each")
        matrix = np.array([[int(c) for c in r] for r in bits], dtype=np.int64)
        return self._m.validate(matrix, tuple(o.strip() for o in ops.replace(",", ";").split(";")))

    def latency_key(self, arch: Any) -> Any:
        return self.encode(arch)

    def key(self, arch: Any) -> str:
        return self._m.spec_hash(arch.matrix, arch.ops)

    def text_key(self, text: str) -> str:
        t = text.strip().lower()
        if len(t) == 32 and all(c in "0123456789abcdef" for c in t):
            return t
        return self.key(self.decode(text))


class MBV2Space(_SpaceBase):
    """MobileNetV2 / ProxylessNAS block space: per searchable block a categorical over its candidates
    (``mb{3,5,7}_e{3,6}``, plus ``zero`` = skip where the block is residual). An architecture is the tuple
    of ops; its encoding joins them with ``-``. Input 1x3x224x224 (``resolution`` to change it).

    `network` stitches cached per-block pieces (``mbv2.stem_network`` / ``block_network`` / ``head_network``,
    built once per candidate) instead of building every layer again: the same IR as ``mbv2.build_network``
    (names, types, shapes, edges; checked against it on first use, falling back to it on any difference)
    in a fraction of the time.
    """

    name = "mbv2"

    def __init__(self, num_classes: int = 1000, resolution: int = 224) -> None:
        from .spaces import mbv2
        self._m = mbv2
        self.num_classes, self.resolution = num_classes, resolution
        self._pieces: dict[Any, tuple[np.ndarray, np.ndarray, np.ndarray, list[str], int, int]] = {}
        self._fast: bool | None = None  # None: not checked yet

    def suggest(self, trial: Any) -> tuple[str, ...]:
        return tuple(trial.suggest_categorical(f"block {i:02d}", blk.ops) for i, blk in enumerate(self._m.BLOCKS))

    def network(self, arch: Sequence[str]) -> Network:
        if self._fast is False:
            return self._m.build_network(arch, self.num_classes, self.resolution)
        arch = tuple(arch)
        if self._fast is None:
            ref = self._m.build_network(arch, self.num_classes, self.resolution)
            try:
                net = self._stitch(arch)
                self._fast = _same_network(net, ref)
            except Exception:  # noqa: BLE001 - the space module changed shape: use its builder
                self._fast = False
            if not self._fast:
                log.info("mbv2: stitched IR differs from mbv2.build_network; using the builder")
            return ref
        return self._stitch(arch)

    def _piece(self, key: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str], int, int]:
        """(types, int-column matrix, local edges (-1 = the piece's input), names, output, adds) of a part,
        its own Input layer dropped (kept for the stem: the network's input)."""
        p = self._pieces.get(key)
        if p is None:
            from ..ir import INT_COLUMNS
            m = self._m
            if key == "stem":
                net, first = m.stem_network(self.resolution), 0
            elif key == "head":
                net, first = m.head_network(self.num_classes, self.resolution), 1
            else:
                net, first = m.block_network(key[0], key[1], self.resolution), 1
            types = net.types[first:]
            mat = np.vstack([net.cols[c][first:] for c in INT_COLUMNS]) if len(types) else \
                np.zeros((len(INT_COLUMNS), 0), np.int64)
            edges = net.edges - first
            names = list(net.names[first:])
            adds = sum(1 for n in names if n == "add" or n.startswith("add_"))
            p = (types, mat, edges, names, len(types) - 1, adds)
            self._pieces[key] = p
        return p

    def _stitch(self, arch: tuple[str, ...]) -> Network:
        from ..ir import INT_COLUMNS
        self._m.validate(arch)
        parts = [self._piece("stem")] + [self._piece((i, op)) for i, op in enumerate(arch)] + [self._piece("head")]
        types, mats, edges, names = [], [], [], []
        at, out, n_add = 0, -1, 0
        for t, mat, e, nm, o, adds in parts:
            if len(e):
                edges.append(np.where(e < 0, out, e + at))
            if adds:
                nm = [(f"add_{n_add}" if n_add else "add") if (n == "add" or n.startswith("add_")) else n for n in nm]
                n_add += adds
            if len(t):
                types.append(t)
                mats.append(mat)
                names.extend(nm)
                out = at + o
                at += len(t)
        mat = np.hstack(mats)
        e = np.concatenate(edges) if edges else np.zeros((0, 2), np.int64)
        name = "mbv2"
        if hasattr(Network, "from_matrix"):
            return Network.from_matrix(name, names, np.concatenate(types), mat, e)
        return Network(name, names, np.concatenate(types), dict(zip(INT_COLUMNS, mat)), e)

    def encode(self, arch: Sequence[str]) -> str:
        return "-".join(arch)

    def decode(self, text: str) -> tuple[str, ...]:
        return tuple(self._m.validate([op.strip() for op in text.strip().split("-")]))


def _same_network(a: Network, b: Network) -> bool:
    """Same layers (names, types, integer columns) and edges."""
    from ..ir import INT_COLUMNS
    return (a.names == b.names and np.array_equal(a.types, b.types) and np.array_equal(a.edges, b.edges)
            and all(np.array_equal(a.cols[c], b.cols[c]) for c in INT_COLUMNS))


#: search-space name -> adapter class
SPACES: dict[str, type] = {"nb201": NB201Space, "nb101": NB101Space, "mbv2": MBV2Space}


def get_space(space: str | Space) -> Space:
    """An adapter by name (``nb201``, ``nb101``, ``mbv2``), or ``space`` itself when it is one."""
    if not isinstance(space, str):
        missing = [m for m in ("suggest", "network", "encode") if not callable(getattr(space, m, None))]
        if missing:
            raise AnnetteError(f"{type(space).__name__} is not a search space: it lacks {', '.join(missing)}()")
        return space
    cls = SPACES.get(space.lower())
    if cls is None:
        raise AnnetteError(f"unknown search space {space!r} (known: {', '.join(SPACES)})")
    try:
        return cls()
    except ImportError as e:  # a space module that is not there (yet)
        raise AnnetteError(f"search space {space!r} is not available: {e}") from None


# ------------------------------------------------------------------------------------------------------
# predicted latency, cached


class LatencyOracle:
    """Predicted latency (ms) of architectures of one space on one platform, cached per architecture.

    ``oracle(arch)`` builds the IR and estimates it the first time, later calls are a dict lookup.
    ``many(archs)`` estimates all uncached ones in one `estimate_many` pass. ``seconds`` / ``calls`` /
    ``misses`` account the time spent (the per-trial overhead of the latency constraint).
    """

    def __init__(self, space: str | Space, platform: Any) -> None:
        from ..platform import load_platform
        self.space = get_space(space)
        self.platform = load_platform(platform)
        self._cache: dict[Any, float] = {}
        self.calls = 0
        self.misses = 0
        self.seconds = 0.0

    def _key(self, arch: Any) -> Any:
        f = getattr(self.space, "latency_key", None)
        return f(arch) if f is not None else self.space.encode(arch)

    def __call__(self, arch: Any) -> float:
        from ..estimator import estimate
        t0 = time.perf_counter()
        self.calls += 1
        key = self._key(arch)
        ms = self._cache.get(key)
        if ms is None:
            self.misses += 1
            ms = estimate(self.space.network(arch), self.platform).total_ms
            self._cache[key] = ms
        self.seconds += time.perf_counter() - t0
        return ms

    def many(self, archs: Sequence[Any], chunk: int = 1024) -> np.ndarray:
        """Predicted latency of each architecture; the uncached ones are estimated in batches."""
        from ..estimator import estimate_many
        t0 = time.perf_counter()
        keys = [self._key(a) for a in archs]
        todo: dict[Any, Any] = {}
        for k, a in zip(keys, archs):
            if k not in self._cache and k not in todo:
                todo[k] = a
        build = getattr(self.space, "networks", None)
        items = list(todo.items())
        for s in range(0, len(items), chunk):
            part = items[s:s + chunk]
            nets = build([a for _, a in part]) if build else [self.space.network(a) for _, a in part]
            for (k, _), ms in zip(part, estimate_many(nets, self.platform)):
                self._cache[k] = float(ms)
        self.calls += len(archs)
        self.misses += len(todo)
        self.seconds += time.perf_counter() - t0
        return np.array([self._cache[k] for k in keys], dtype=float)

    @property
    def mean_ms(self) -> float:
        """Mean time per call (ms), cache hits included."""
        return 1e3 * self.seconds / self.calls if self.calls else 0.0

    def __repr__(self) -> str:
        return (f"LatencyOracle({self.space.name} on {self.platform.name}: {len(self._cache)} cached, "
                f"{self.calls} calls, {self.mean_ms:.3f} ms/call)")


# ------------------------------------------------------------------------------------------------------
# objectives


def _unit_noise(text: str, salt: str = "") -> float:
    """Deterministic pseudo-random number in [0, 1) from a string (stable across processes and runs)."""
    h = hashlib.blake2b((salt + text).encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") / 2.0 ** 64


def synthetic_accuracy(space: str | Space, noise: float = 0.5) -> Objective:
    """A deterministic *synthetic* accuracy proxy (percent) for demos and tests. It is NOT real accuracy.

    NB201: rewards live conv3x3 / conv1x1 edges and the longest conv path of the cell, a little for skips and
    pools (score -> ``94 - 30 exp(-score / 3)``); a cell whose output is zero scores 10 (chance). Other spaces:
    a saturating function of the network's ops (``log10``), centred on the space's typical size. Plus
    ``+-noise`` points of hash noise of the encoding, so ties are broken the same way everywhere.
    """
    sp = get_space(space)
    if sp.name == "nb201":
        weight = {"nor_conv_3x3": 3.0, "nor_conv_1x1": 1.5, "skip_connect": 0.8, "avg_pool_3x3": 0.3}
        m = sp._m  # type: ignore[attr-defined]

        def nb201_proxy(arch: str) -> float:
            live = m.live_edges(arch)
            if not live:
                return 10.0
            depth = [0, 0, 0, 0]
            for op, s, d in live:  # edges in topological (string) order
                depth[d] = max(depth[d], depth[s] + (1 if op.startswith("nor_conv") else 0))
            score = sum(weight[op] for op, _, _ in live) + 1.0 * depth[3]
            return 94.0 - 30.0 * math.exp(-score / 3.0) + noise * (2 * _unit_noise(arch, "nb201") - 1)

        nb201_proxy.__doc__ = "synthetic NB201 accuracy proxy (NOT real accuracy)"
        return nb201_proxy

    centre, slope = {"nb101": (9.0, 2.5), "mbv2": (8.9, 12.0)}.get(sp.name, (9.0, 2.5))  # log10(ops): typical, spread

    def ops_proxy(arch: Any) -> float:
        ops = max(float(sp.network(arch).total_ops), 1.0)
        x = math.log10(ops) - centre
        return 60.0 + 35.0 / (1.0 + math.exp(-slope * x)) + noise * (2 * _unit_noise(sp.encode(arch), sp.name) - 1)

    ops_proxy.__doc__ = f"synthetic {sp.name} accuracy proxy from the network's ops (NOT real accuracy)"
    return ops_proxy


def _key(sp: Any, arch: Any) -> str:
    f = getattr(sp, "key", None)
    return f(arch) if f is not None else sp.encode(arch)


def _text_key(sp: Any, text: str) -> str:
    f = getattr(sp, "text_key", None)
    return f(text) if f is not None else sp.encode(sp.decode(text))


def read_accuracy_csv(path: str | os.PathLike, space: str | Space | None = None) -> dict[str, float]:
    """``arch,accuracy`` CSV (header optional) -> {key: accuracy}; with ``space``, keys are normalised to the
    space's table keys (``text_key``: NB201 the canonical arch string, NB101 the spec hash). Raises
    `AnnetteError` naming the file and line on bad input."""
    sp = get_space(space) if space is not None else None
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise AnnetteError(f"{path}: no such accuracy file")
    table: dict[str, float] = {}
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    if not rows:
        raise AnnetteError(f"{path}: empty accuracy file (expected 'arch,accuracy' rows)")
    a_col, v_col, start = 0, 1, 0
    head = [c.strip().lower() for c in rows[0]]
    try:
        float(rows[0][1]) if len(rows[0]) > 1 else None
    except ValueError:  # a header
        start = 1
        if "arch" in head:
            a_col = head.index("arch")
        for name in ("accuracy", "acc", "test_accuracy", "valid_accuracy", "objective"):
            if name in head:
                v_col = head.index(name)
                break
    for n, row in enumerate(rows[start:], start=start + 1):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) <= max(a_col, v_col):
            raise AnnetteError(f"{path}:{n}: expected 'arch,accuracy', got {','.join(row)!r}")
        key = row[a_col].strip()
        try:
            value = float(row[v_col])
        except ValueError:
            raise AnnetteError(f"{path}:{n}: accuracy {row[v_col]!r} is not a number") from None
        if sp is not None:
            try:
                key = _text_key(sp, key)
            except (ValueError, KeyError, TypeError) as e:
                raise AnnetteError(f"{path}:{n}: not a {sp.name} architecture: {e}") from None
        table[key] = value
    if not table:
        raise AnnetteError(f"{path}: no 'arch,accuracy' rows")
    return table


def csv_objective(path: str | os.PathLike, space: str | Space) -> Objective:
    """Objective = lookup of the architecture in an ``arch,accuracy`` CSV (e.g. exported NAS-Bench results).

    An architecture missing from the table prunes its trial (``optuna.TrialPruned``)."""
    sp = get_space(space)
    table = read_accuracy_csv(path, sp)

    def lookup(arch: Any) -> float:
        key = _key(sp, arch)
        value = table.get(key)
        if value is None:
            import optuna
            raise optuna.TrialPruned(f"{key} is not in {os.fspath(path)}")
        return value

    lookup.__doc__ = f"accuracy lookup in {os.fspath(path)} ({len(table)} architectures)"
    return lookup


def load_objective(spec: str | Objective, space: str | Space) -> Objective:
    """``'synthetic'`` -> `synthetic_accuracy`; a ``.csv`` path -> `csv_objective`; a callable -> itself."""
    if callable(spec):
        return spec
    if spec == "synthetic":
        return synthetic_accuracy(space)
    if str(spec).lower().endswith(".csv") or os.path.isfile(spec):
        return csv_objective(spec, space)
    raise AnnetteError(f"unknown objective {spec!r}: give 'synthetic' or an 'arch,accuracy' .csv file")


# ------------------------------------------------------------------------------------------------------
# storage and study


def open_storage(storage: Any) -> Any:
    """None -> None (in memory); ``journal:PATH`` -> a journal-file storage; ``sqlite:///F`` -> an RDB storage
    with a generous lock timeout (several writer processes); other URLs and storage objects pass through."""
    if storage is None or not isinstance(storage, (str, os.PathLike)):
        return storage
    import optuna
    s = os.fspath(storage)
    if s.startswith("journal:"):
        path = s[len("journal:"):]
        if not path:
            raise AnnetteError("journal storage needs a file: journal:PATH")
        from optuna.storages import JournalStorage
        try:
            from optuna.storages.journal import JournalFileBackend
        except ImportError:  # optuna < 4
            from optuna.storages import JournalFileStorage as JournalFileBackend  # type: ignore[no-redef]
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise AnnetteError(f"journal storage {path!r}: folder {parent} does not exist")
        return JournalStorage(JournalFileBackend(path))
    if "://" not in s:
        raise AnnetteError(f"storage {s!r}: give an Optuna storage URL (e.g. sqlite:///study.db) or journal:PATH")
    kw = {"engine_kwargs": {"connect_args": {"timeout": 60}}} if s.startswith("sqlite:") else {}
    for attempt in range(6):
        try:
            return optuna.storages.RDBStorage(s, **kw)
        except ImportError as e:
            raise AnnetteError(f"storage {s!r}: {e}") from None
        except Exception as e:  # noqa: BLE001 - sqlalchemy errors: a bad URL, an unreachable database...
            text = str(e)
            # ...or several workers creating the schema of a new database at once: the others wait, retry
            racing = any(m in text for m in ("already exists", "UNIQUE constraint", "database is locked",
                                              "duplicate key"))
            if racing and attempt < 5:
                log.debug("storage %s: schema being created by another worker (%s); retrying", s, text[:80])
                time.sleep(0.2 * (attempt + 1))
                continue
            raise AnnetteError(f"cannot open storage {s!r}: {type(e).__name__}: {text.splitlines()[0]}") from None
    raise AssertionError("unreachable")


def _open_study(storage: Any, study_name: str | None, sampler: Any, meta: dict[str, Any],
                **direction: Any) -> Any:
    import optuna
    if study_name is None:
        study_name = f"annette-{meta['space']}-{meta['platform']}-{meta['mode']}"
    study = optuna.create_study(storage=open_storage(storage), study_name=study_name, sampler=sampler,
                                load_if_exists=True, **direction)
    old = study.user_attrs.get(STUDY_ATTR)
    if old is None:
        study.set_user_attr(STUDY_ATTR, meta)
    elif any(old.get(k) != v for k, v in meta.items()):
        diff = ", ".join(f"{k} {old.get(k)!r} (now {v!r})" for k, v in meta.items() if old.get(k) != v)
        raise AnnetteError(f"study {study.study_name!r} already exists with {diff}; use another --study name")
    return study


def _has_set_constraint() -> bool:
    import optuna
    return hasattr(optuna.trial.Trial, "set_constraint")


def latency_constraints(trial: Any) -> Sequence[float]:
    """``constraints_func`` for a sampler on Optuna < 5 (the constraint stored in ``user_attrs``). On Optuna >= 5
    the searches call ``trial.set_constraint``, which every sampler reads; no ``constraints_func`` needed."""
    return trial.user_attrs.get("constraint", (1.0,))  # pruned before the latency was known: infeasible


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
                trial.set_user_attr("constraint", [c])
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


def latency_constrained_search(space: str | Space, platform: Any, latency_ms: float, objective: Objective | str,
                               n_trials: int, storage: Any = None, study_name: str | None = None, seed: int | None = 0,
                               sampler: Any = None, *, timeout: float | None = None, skip_infeasible: bool = False,
                               cache_objective: bool = True, n_startup_trials: int = 10,
                               callbacks: Sequence[Callable] | None = None, margin: float = 0.0) -> Any:
    """Maximise ``objective(arch)`` subject to ``predicted latency(arch) <= latency_ms`` on ``platform``.

    Single-objective TPE with the latency constraint (``latency - budget <= 0`` is feasible). ``objective`` is
    a callable on architectures (or ``'synthetic'`` / an ``arch,accuracy`` CSV path). ``storage``: None (in
    memory), an Optuna storage URL or object, or ``journal:PATH``; the study is created or joined
    (``load_if_exists``) — run the same call in several processes to search one study. ``skip_infeasible``
    prunes over-budget architectures without evaluating the objective (worth it when it trains a network).
    A custom ``sampler`` on Optuna < 5 needs ``constraints_func=latency_constraints``. ``margin`` (e.g. 0.05,
    the platform's measured error) tightens the budget the search enforces to ``latency_ms * (1 - margin)``,
    so that the architectures it reports stay under ``latency_ms`` when measured.
    Returns the ``optuna.Study``; `best_feasible` lists its best architectures.
    """
    import optuna
    if not (isinstance(latency_ms, (int, float)) and math.isfinite(latency_ms) and latency_ms > 0):
        raise AnnetteError(f"latency budget must be a positive number of ms, got {latency_ms!r}")
    if not 0 <= margin < 1:
        raise AnnetteError(f"margin must be in [0, 1), got {margin!r}")
    latency_ms = float(latency_ms) * (1.0 - margin)
    if int(n_trials) < 1:
        raise AnnetteError(f"n_trials must be >= 1, got {n_trials}")
    oracle = LatencyOracle(space, platform)
    sp = oracle.space
    obj = load_objective(objective, sp)
    if sampler is None:
        kw: dict[str, Any] = {} if _has_set_constraint() else {"constraints_func": latency_constraints}
        sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=n_startup_trials, **kw)
    meta = {"space": sp.name, "platform": oracle.platform.name, "mode": "constrained",
            "latency_budget_ms": float(latency_ms)}
    study = _open_study(storage, study_name, sampler, meta, direction="maximize")
    ev = _Evaluator(sp, oracle, obj, float(latency_ms), multi=False, skip_infeasible=skip_infeasible,
                    cache_objective=cache_objective)
    study.optimize(ev, n_trials=int(n_trials), timeout=timeout, callbacks=callbacks)
    return _attach(study, ev)


def pareto_search(space: str | Space, platform: Any, objective: Objective | str, n_trials: int, storage: Any = None,
                  study_name: str | None = None, seed: int | None = 0, sampler: Any = None, *,
                  latency_ms: float | None = None, population_size: int = 20, timeout: float | None = None,
                  cache_objective: bool = True, callbacks: Sequence[Callable] | None = None) -> Any:
    """Multi-objective NSGA-II over (``objective`` maximised, predicted latency minimised).

    ``study.best_trials`` is the Pareto front found (values ``(objective, latency_ms)``); an optional
    ``latency_ms`` budget adds the constraint. Storage and workers as in `latency_constrained_search`.
    """
    import optuna
    if int(n_trials) < 1:
        raise AnnetteError(f"n_trials must be >= 1, got {n_trials}")
    if latency_ms is not None and not (math.isfinite(latency_ms) and latency_ms > 0):
        raise AnnetteError(f"latency budget must be a positive number of ms, got {latency_ms!r}")
    oracle = LatencyOracle(space, platform)
    sp = oracle.space
    obj = load_objective(objective, sp)
    if sampler is None:
        kw: dict[str, Any] = {}
        if latency_ms is not None and not _has_set_constraint():
            kw["constraints_func"] = latency_constraints
        sampler = optuna.samplers.NSGAIISampler(seed=seed, population_size=population_size, **kw)
    meta = {"space": sp.name, "platform": oracle.platform.name, "mode": "pareto",
            "latency_budget_ms": None if latency_ms is None else float(latency_ms)}
    study = _open_study(storage, study_name, sampler, meta, directions=["maximize", "minimize"])
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
        from .pareto import pareto_front
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
