"""Graph matcher: map a toolchain's executed nodes back to the original layers of a `Network`.

``match(net, nodes, runner)`` returns one `LayerRecord` per IR layer (in IR order), then one ``inserted``
record per executed node the toolchain added (layout reorders, precision converts, nodes that map to no
layer), so no measured time is dropped: the layer and inserted times add up to the executed nodes' times.
`GraphMatcher` carries out one matching run, one method per rule below.

How a node finds its layers. Each `NodeRecord` names candidate layers: its own name and ``layers`` (the
runner fills these from what the toolchain reports: ONNX Runtime's optimised graph gives the original
tensors a node writes, OpenVINO's runtime graph the ``originalLayersNames`` of a node). A name is looked up
exactly, then with toolchain decorations stripped (``_kernel_time``, ``_nchwc``, ``_token_<n>``,
``/QuickGeluFusion/``, ``/WithoutBiases``, ``/sink_port_<n>``, ``_output_<n>``), then as the longest layer
name that prefixes it followed by a separator (``emul_mul_nchwc`` -> ``emul``).

Rules, in this order:

1. Inserted: node types ``ReorderInput``/``ReorderOutput``/``Reorder``/``Convert``/``Memcpy*`` become
   ``fused == "inserted"`` records (layer = node name) with their time. Sink nodes (``Result``) are skipped;
   NOT_RUN inserted nodes cost nothing and are skipped too.
2. Survivor: an executed node runs one *head* layer: the earliest of its layers whose type fits the
   node type (a ``Conv`` node heads a conv layer, a ``Subgraph`` its first element-wise layer or, for
   OpenVINO's attention subgraph, its first ``MatMul``). When none
   fits, e.g. ONNX Runtime's ``relu1_nchwc`` (named after the Relu it ends with) or OpenVINO's
   ``Multiply_<n>`` carrying ``bn1,relu1``, the matcher walks up through producers that have no node of
   their own to the nearest layer that fits (conv1) and takes the layers on the way as absorbed. The head
   is ``not-fused`` with the node's time (several nodes on one head add up: ``fc/flatten+fc``); the
   node's other layers are ``fused`` into the head.
3. Data flow, for executed nodes whose names map to no layer (ONNX Runtime's fused ``Gelu``; the unnamed
   ``HardSigmoid_<n>`` + ``Mul_<n>`` a HardSwish expands into) when the records carry their tensors
   (``extra["inputs"]`` / ``extra["outputs"]``): such a node runs the one still uncovered layer that
   consumes what it reads; else it continues a layer placed this way that it reads (the second half of
   an expanded op); else it joins the layer all its readers run, looking through inserted reorders
   (OpenVINO's ``ReduceMean`` / ``Subtract`` / ``RMS`` pieces of a LayerNorm it decomposed). A node still
   unplaced is recorded as ``inserted`` under its own name, so its time stays visible.
4. A layer no executed node covers (in topological order):
   - network inputs are ``not-fused`` with time 0;
   - the side branch of an element-wise diamond (``x -> sigmoid -> mul(x, .)``, SiLU / QuickGelu) goes
     where its consumer went (ONNX Runtime's QuickGelu runs the Sigmoid under the Mul's name);
   - a single-input layer is ``fused`` into its producer's survivor (BN folded into the preceding conv,
     an activation into the conv), or ``possibly-fused`` like its producer;
   - a multi-input layer (Add, Mul, Concat) is ``fused`` into the one survivor among its producers'
     survivors (network inputs are no candidates when a layer is); with several candidates, into the one
     whose node says it absorbed such an op (``extra["fused_ops"]``: ONNX Runtime's NCHWc Conv or
     FusedConv with a residual ``Add`` input). Each listed ``Add`` absorbs one layer, and among several
     such candidates only one whose output feeds nothing but this layer can have taken it. Else into the
     candidate whose node ran all its consumers (OpenVINO's attention subgraph, which lists the scale and
     softmax behind a hand-written scores product but not the product). Otherwise the layer is
     ``possibly-fused`` with ``fused_into`` = the candidate survivors joined with ``|``.
5. A survivor lists the layers fused into it in ``absorbed`` and keeps their parameters in ``params``
   (``{"pool": {"kind": "max", "kernel": [2, 2], "stride": [2, 2], "padding": [0, 0], "layer": ...}}``,
   ``{"bn": ...}``, ``{"activation": {"kind": "Relu", ...}}``, ``{"eltwise": {"kind": "Add", ...}}``;
   a second absorbed layer of the same role gets ``<role>_2``). Padding is the IR's total per axis.

Checked on ONNX Runtime 1.32 and OpenVINO 2026.4 with ResNet-18, MobileNetV2/V3, EfficientNet-B0,
DenseNet-121, SqueezeNet and GoogLeNet exported by `to_onnx`: every node placed, and ONNX Runtime's
residual-Add assignment agrees with OpenVINO's ``originalLayersNames``.
"""

from __future__ import annotations

import enum
import logging
import re
from collections import Counter, deque
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from ..ir import CONV_TYPES, ELEMENTWISE_TYPES, MERGE_TYPES, POOL_TYPES, LayerType as T, Network, topological_order
from .records import FUSED, INSERTED, NOT_FUSED, POSSIBLY_FUSED, LayerRecord, NodeRecord

__all__ = ["match", "GraphMatcher", "resolve_name", "INSERTED_TYPES"]

log = logging.getLogger(__name__)

#: Node types a toolchain inserts (no original layer): layout reorders, precision converts, copies.
INSERTED_TYPES = frozenset({"reorderinput", "reorderoutput", "reorder", "convert", "memcpytohost",
                            "memcpyfromhost", "memcpy", "copy"})
#: Node types that are the graph's sinks (OpenVINO ``Result``): not work, skipped.
SKIP_TYPES = frozenset({"result", "output"})

_SUFFIXES = tuple(re.compile(p) for p in (
    r"_kernel_time$", r"_fence_(?:before|after)$", r"_token_\d+$", r"_nchwc$",
    r"/[^/]*Fusion[^/]*/?$", r"/WithoutBiases$", r"/sink_port_\d+$", r"_output_\d+$",
    r"[/_]fused$", r":\d+$",
))
_SEPARATORS = ("_", "/", ".", ":")

_ELT = tuple(ELEMENTWISE_TYPES) + tuple(MERGE_TYPES)
_COMPAT: dict[str, tuple[T, ...]] = {}


def _compat(types: Sequence[T], *names: str) -> None:
    for n in names:
        _COMPAT[n] = tuple(types)


_compat(CONV_TYPES, "conv", "fusedconv", "nchwcconv", "convolution", "groupconvolution", "qlinearconv",
        "convinteger", "binaryconvolution")
_compat((T.CONV_TRANSPOSE,), "convtranspose", "deconvolution", "convolutionbackpropdata",
        "groupconvolutionbackpropdata")
_compat((T.MAX_POOL, T.GLOBAL_POOL), "maxpool", "globalmaxpool")
_compat((T.AVG_POOL, T.GLOBAL_POOL), "averagepool", "avgpool")
_compat((T.GLOBAL_POOL, T.AVG_POOL, T.REDUCE_MEAN), "globalaveragepool")
_compat((T.GLOBAL_POOL, T.REDUCE_MEAN), "reducemean", "reduce")
_compat(POOL_TYPES, "pooling")
_compat((T.FULLY_CONNECTED, T.MATMUL), "gemm", "fusedgemm", "matmul", "fusedmatmul", "fullyconnected",
        "innerproduct", "matmulnbits")
# fused attention: ONNX Runtime's contrib ops, OpenVINO's ScaledDotProductAttention (head: the scores product)
_compat((T.MATMUL, T.FULLY_CONNECTED), "attention", "multiheadattention", "scaleddotproductattention", "sdpa",
        "mha")
_compat((T.BATCH_NORM,), "batchnormalization", "batchnorm", "batchnorminference")
_compat((T.RELU,), "relu")
_compat((T.RELU6, T.CLIP), "clip", "clamp", "relu6")
_compat((T.LEAKY_RELU,), "leakyrelu", "prelu")
_compat((T.SIGMOID,), "sigmoid")
_compat((T.TANH,), "tanh")
_compat((T.HARDSWISH,), "hardswish", "hswish")
_compat((T.HARDSIGMOID,), "hardsigmoid", "hsigmoid")
_compat((T.GELU,), "gelu", "fastgelu", "biasgelu")
_compat((T.SILU, T.MUL, T.SIGMOID), "swish", "swishcpu", "quickgelu", "silu")
_compat((T.SOFTMAX,), "softmax")
_compat((T.SOFTPLUS,), "softplus")
_compat((T.ADD,), "add", "sum")
_compat((T.MUL,), "mul", "multiply")
_compat((T.SUB,), "sub", "subtract")
_compat((T.DIV,), "div", "divide")
_compat(_ELT + (T.BATCH_NORM,), "eltwise", "muladd", "powerstatic")
# an OpenVINO snippets Subgraph runs element-wise chains, or a whole attention (scores, softmax, context)
_compat(_ELT + (T.BATCH_NORM, T.MATMUL), "subgraph")
_compat((T.CONCAT,), "concat", "concatenation")
_compat((T.RESHAPE, T.FLATTEN, T.DROPOUT, T.PICK), "reshape", "flatten", "squeeze", "unsqueeze", "identity")
_compat((T.TRANSPOSE,), "transpose")
_compat((T.RESIZE,), "resize", "interpolate", "upsample")
_compat((T.PAD,), "pad")
_compat((T.SLICE, T.PICK), "slice", "stridedslice", "split")
_compat((T.LRN,), "lrn")
_compat((T.LAYER_NORM,), "layernormalization", "simplifiedlayernormalization", "mvn", "rms")
_compat((T.LAYER_NORM, T.ADD), "skiplayernormalization", "skipsimplifiedlayernormalization")
_compat((T.INPUT,), "parameter", "input")


def _fits(node_type: str) -> tuple[T, ...] | None:
    """Layer types a node type can execute as its head layer; None: unknown type, anything fits."""
    t = node_type.lower()
    if t.startswith("nchwc"):
        t = t[5:]
    return _COMPAT.get(t)


def resolve_name(name: str, index: dict[str, int], by_length: Sequence[str] | None = None) -> int | None:
    """The layer index a node / tensor name refers to, or None (see the module docstring)."""
    if not name:
        return None
    i = index.get(name)
    if i is not None:
        return i
    cur = name
    changed = True
    while changed:
        changed = False
        for rx in _SUFFIXES:
            new = rx.sub("", cur)
            if new != cur and new:
                cur, changed = new, True
                i = index.get(cur)
                if i is not None:
                    return i
    names = by_length if by_length is not None else sorted(index, key=len, reverse=True)
    for n in names:
        if len(n) < len(cur) and cur.startswith(n) and cur[len(n)] in _SEPARATORS:
            return index[n]
    return None


def _layer_params(net: Network, j: int) -> tuple[str, dict]:
    """(role, parameters) of an absorbed layer, for the survivor's ``params``."""
    t = T(int(net.types[j]))
    name = net.names[j]
    pair = lambda a, b: [int(net.cols[a][j]), int(net.cols[b][j])]  # noqa: E731
    if t in (T.MAX_POOL, T.AVG_POOL):
        return "pool", {"kind": "max" if t == T.MAX_POOL else "avg", "kernel": pair("kh", "kw"),
                        "stride": pair("sh", "sw"), "padding": pair("ph", "pw"), "layer": name}
    if t == T.GLOBAL_POOL:
        return "pool", {"kind": net.attr("pool", j, "avg") or "avg", "global": True,
                        "kernel": pair("kh", "kw"), "layer": name}
    if t == T.BATCH_NORM:
        return "bn", {"layer": name}
    if t in ELEMENTWISE_TYPES:
        return "activation", {"kind": t.label, "layer": name}
    if t in MERGE_TYPES or t == T.CONCAT:
        return "eltwise", {"kind": t.label, "inputs": int(net.n_inputs[j]), "layer": name}
    return t.label.lower(), {"layer": name}


def _op_key(op: str) -> str:
    op = op.lower()
    return "add" if op == "sum" else op


def _can_head(node_type: str, layer_type: T) -> bool:
    """Whether a node of ``node_type`` can run a layer of ``layer_type`` as its head layer."""
    fits = _fits(node_type)
    return fits is None or layer_type in fits


class _EntryKind(enum.Enum):
    """What a kept profile record is to the matcher."""

    INSERTED = "inserted"    # a node type the toolchain adds (reorder, convert, copy)
    EXECUTED = "executed"    # runs known layers (from its names, or placed by the data flow)
    NAMELESS = "nameless"    # its names map to no layer (yet)


@dataclass
class _Entry:
    """One executed profile record, in profile (= execution) order, with the layers its names resolve to."""

    kind: _EntryKind
    record: NodeRecord
    layers: set[int]


@dataclass(frozen=True)
class _Placement:
    """A head layer and the layers one node runs with it (the head included)."""

    head: int
    layers: set[int]


@dataclass(frozen=True)
class _Timing:
    """Summed per-iteration times of the nodes that run one survivor, in ms (std added in quadrature)."""

    median_ms: float = 0.0
    min_ms: float = 0.0
    std_ms: float = 0.0

    @classmethod
    def of(cls, recs: Sequence[NodeRecord]) -> "_Timing":
        if not recs:
            return cls()
        return cls(median_ms=float(sum(r.median_ms for r in recs)), min_ms=float(sum(r.min_ms for r in recs)),
                    std_ms=float(np.sqrt(sum(r.std_ms ** 2 for r in recs))))


@dataclass(frozen=True)
class _LayerGraph:
    """Producers and consumers of each layer (duplicates dropped) and a topological rank for ordering."""

    parents: list[list[int]]
    children: list[list[int]]
    topo: list[int]
    rank: np.ndarray

    @classmethod
    def of(cls, net: Network) -> "_LayerGraph":
        n = len(net)
        parents: list[list[int]] = [[] for _ in range(n)]
        children: list[list[int]] = [[] for _ in range(n)]
        for s, d in net.edges:
            s, d = int(s), int(d)
            if s not in parents[d]:
                parents[d].append(s)
            if d not in children[s]:
                children[s].append(d)
        topo = _topological(parents)
        rank = np.empty(n, np.int64)
        rank[topo] = np.arange(n)
        return cls(parents, children, topo, rank)

    def rank_of(self, i: int) -> np.int64:
        """Sort key: the layer's position in the topological order."""
        return self.rank[i]


class GraphMatcher:
    """One matching run of a profile's node records against ``net`` (rules in the module docstring).

    The phases run in `run` in rule order, each in its own method; the state they hand on lives on the
    instance: the kept records (`_Entry`), each node's `_Placement`, and the survivor or candidates of
    every layer.
    """

    def __init__(self, net: Network, nodes: Iterable[NodeRecord], runner: str = "") -> None:
        self.net = net
        self.nodes = nodes
        self.runner = runner
        self.names = net.names
        self.types = net.types
        self.index = {nm: i for i, nm in enumerate(self.names)}
        self.by_length = sorted(self.index, key=len, reverse=True)
        self.graph = _LayerGraph.of(net)
        self.entries: list[_Entry] = []
        self.idle: dict[int, NodeRecord] = {}              # layer -> its own NOT_RUN record
        self.claimed: set[int] = set()                     # layers some executed record names
        self.head_records: dict[int, list[NodeRecord]] = {}  # survivor -> the records that run it
        self.placements: list[_Placement] = []             # one per placed record, in placing order
        self.covered: set[int] = set()                     # layers some placed record runs
        self.survivor_of: dict[int, int] = {}              # layer -> the survivor that runs it
        self.candidates: dict[int, tuple[int, ...]] = {}   # possibly-fused layer -> candidate survivors
        self.budget: dict[int, Counter[str]] = {}          # survivor -> ops its records say it absorbed
        self._result: list[LayerRecord] | None = None

    def run(self) -> list[LayerRecord]:
        """Every IR layer's record in IR order, then the inserted records in profile order (computed once)."""
        if self._result is None:
            self.classify()
            self.place_named()
            self.place_by_data_flow()
            self.assign_survivors()
            self.place_uncovered()
            self._result = self.layer_records() + self.inserted_records()
        return self._result

    # ------------------------------------------------------------------ rule 1: classify the records

    def classify(self) -> None:
        """Keep the records that are work, resolve their names to layers; note each layer's NOT_RUN record."""
        for rec in self.nodes:
            t = rec.node_type.lower()
            if t in SKIP_TYPES:
                continue
            if t in INSERTED_TYPES:
                if rec.status != "not-run":
                    self.entries.append(_Entry(_EntryKind.INSERTED, rec, set()))
                continue
            if rec.status == "not-run":  # absorbed by another node, or optimised out: later rules place it
                if (i := self._resolve(rec.node)) is not None:
                    self.idle.setdefault(i, rec)
                continue
            layers = {i for nm in (rec.node, *rec.layers) if (i := self._resolve(nm)) is not None}
            self.entries.append(_Entry(_EntryKind.EXECUTED if layers else _EntryKind.NAMELESS, rec, layers))
        for entry in self.entries:
            self.claimed |= entry.layers

    def _resolve(self, name: str) -> int | None:
        return resolve_name(name, self.index, self.by_length)

    # ------------------------------------------------------------------ rule 2: survivors of named nodes

    def place_named(self) -> None:
        """Place every record whose names resolve to layers."""
        for entry in self.entries:
            if entry.kind is _EntryKind.EXECUTED:
                self._place(entry.record, entry.layers)

    def _place(self, rec: NodeRecord, layers: set[int]) -> None:
        """Make the earliest layer the node can run its head (else walk up to one); the rest ride along."""
        fits = _fits(rec.node_type)
        heads = sorted((i for i in layers if fits is None or T(int(self.types[i])) in fits),
                       key=self.graph.rank_of)
        if rec.node_type.lower() == "subgraph":  # an attention subgraph: its (first) product is the head
            heads = [i for i in heads if self.types[i] == T.MATMUL] or heads
        if heads:
            head = heads[0]
        else:
            head = min(layers, key=self.graph.rank_of)
            if (climb := self._walk_up(head, fits, layers)) is not None:
                head, layers = climb.head, layers | climb.layers
        self.head_records.setdefault(head, []).append(rec)
        self.placements.append(_Placement(head, layers))
        self.covered.update(layers)

    def _walk_up(self, start: int, fits: tuple[T, ...] | None, own: set[int]) -> _Placement | None:
        """The one nearest ancestor of ``start`` whose type fits, reached through layers with no node of their
        own (or of this node), and the layers on the way (head included); None if none or several."""
        if fits is None:
            return None
        parents, types = self.graph.parents, self.types
        seen = {start: -1}   # layer -> the layer it was reached from
        frontier = deque([start])
        found: list[int] = []
        while frontier and not found:
            nxt: deque[int] = deque()
            for u in frontier:
                for p in parents[u]:
                    if p in seen or types[p] == T.INPUT or (p in self.claimed and p not in own):
                        continue
                    seen[p] = u
                    if T(int(types[p])) in fits:
                        found.append(p)
                    nxt.append(p)
            frontier = nxt
        if len(found) != 1:
            return None
        head = u = found[0]
        path = {head}
        while u != start:
            u = seen[u]
            path.add(u)
        return _Placement(head, path)

    # ------------------------------------------------------------------ rule 3: data flow

    def place_by_data_flow(self) -> None:
        """Place nameless records through the tensors they read and write, then as executed records."""
        guessed = self._guess_from_inputs()
        self._guess_from_readers(guessed)
        for k, layer in guessed.items():
            entry = self.entries[k]
            entry.kind, entry.layers = _EntryKind.EXECUTED, {layer}
            self.claimed.add(layer)
            self._place(entry.record, {layer})

    def _guess_from_inputs(self) -> dict[int, int]:
        """Entry position -> layer, for nameless records that read what exactly one uncovered layer consumes
        (or, reading no such layer, continue a layer guessed before); in profile order."""
        tensor_layer: dict[str, int] = {}   # tensor -> the layer that writes it
        for entry in self.entries:
            if entry.kind is _EntryKind.EXECUTED:
                for tname in entry.record.extra.get("outputs", ()):
                    tensor_layer[tname] = max(entry.layers, key=self.graph.rank_of)
        guessed: dict[int, int] = {}
        for k, entry in enumerate(self.entries):
            if entry.kind is _EntryKind.EXECUTED:
                continue
            reads = self._layers_read(entry.record, tensor_layer)
            outs = entry.record.extra.get("outputs", ())
            if entry.kind is _EntryKind.INSERTED:   # a reorder passes its input's layer on
                for tname in outs:
                    if reads:
                        tensor_layer.setdefault(tname, reads[0])
                continue
            if not reads:
                continue
            read = set(reads)
            cand = {c for r in read for c in self.graph.children[r] if c not in self.covered and c not in read}
            done = read & set(guessed.values())
            if len(cand) == 1:
                layer = cand.pop()
            elif not cand and done:
                layer = max(done, key=self.graph.rank_of)
            else:
                continue
            guessed[k] = layer
            self.covered.add(layer)
            for tname in outs:
                tensor_layer[tname] = layer
        return guessed

    def _layers_read(self, rec: NodeRecord, tensor_layer: dict[str, int]) -> list[int]:
        """The layers whose tensors ``rec`` reads (written by a placed record, or a network input)."""
        reads = []
        for tname in rec.extra.get("inputs", ()):
            if tname in tensor_layer:
                reads.append(tensor_layer[tname])
            elif (j := self.index.get(tname)) is not None and self.types[j] == T.INPUT:
                reads.append(j)
        return reads

    def _guess_from_readers(self, guessed: dict[int, int]) -> None:
        """Add to ``guessed`` the nameless records all of whose readers run one layer (last record first)."""
        readers: dict[str, list[int]] = {}   # tensor -> positions of the entries that read it
        for k, entry in enumerate(self.entries):
            for tname in entry.record.extra.get("inputs", ()):
                readers.setdefault(tname, []).append(k)
        for k in range(len(self.entries) - 1, -1, -1):
            entry = self.entries[k]
            if entry.kind is not _EntryKind.NAMELESS or k in guessed:
                continue
            got: set[int | None] = set()
            for tname in entry.record.extra.get("outputs", ()):
                got |= self._reader_layers(tname, readers, guessed)
            if len(got) == 1 and None not in got:
                guessed[k] = got.pop()

    def _reader_layers(self, tname: str, readers: dict[str, list[int]], guessed: dict[int, int],
                       depth: int = 0) -> set[int | None]:
        """The layers the readers of tensor ``tname`` run, looking through inserted reorders (OpenVINO's
        layout change between the pieces of a LayerNorm it decomposed); None for a reader that runs none."""
        got: set[int | None] = set()
        for r in readers.get(tname, ()):
            e = self.entries[r]
            if r in guessed:
                got.add(guessed[r])
            elif e.kind is _EntryKind.INSERTED and depth < 4 and e.record.extra.get("outputs"):
                for t2 in e.record.extra["outputs"]:
                    got |= self._reader_layers(t2, readers, guessed, depth + 1)
            else:
                got.add(self._last_layer(e))
        return got

    def _last_layer(self, entry: _Entry) -> int | None:
        """The latest layer an executed record runs; None for other records."""
        return max(entry.layers, key=self.graph.rank_of) if entry.kind is _EntryKind.EXECUTED else None

    # ------------------------------------------------------------------ survivors

    def assign_survivors(self) -> None:
        """Each head is its own survivor, a placed record's other layers go to its head (first placed wins);
        a head's records are ordered so the one that describes the layer comes first."""
        for head, recs in self.head_records.items():
            self.survivor_of[head] = head
            t = T(int(self.types[head]))
            recs.sort(key=lambda r: (not _can_head(r.node_type, t), r.node != self.names[head]))
        for placement in self.placements:
            for j in sorted(placement.layers):
                self.survivor_of.setdefault(j, placement.head)
        # what each survivor's records say they absorbed, as a budget: one residual Add per ``Add`` listed
        self.budget = {h: Counter(_op_key(op) for r in recs for op in r.extra.get("fused_ops", ()))
                       for h, recs in self.head_records.items()}

    # ------------------------------------------------------------------ rule 4: layers no node covers

    def place_uncovered(self) -> None:
        """Place the layers without a survivor in topological order, once their producers are placed."""
        for i in self.graph.topo:
            if i in self.survivor_of:
                continue
            self._place_layer(i)
            # a layer listed NOT_RUN under its own name that no real layer can have absorbed (only network
            # inputs feed it: OpenVINO's in-place Concat of inputs, a Reshape of an input) was optimised
            # out: it is its own survivor, with time 0
            if i in self.idle and self._only_inputs_hold(i):
                self.candidates.pop(i, None)
                self.survivor_of[i] = i

    def _only_inputs_hold(self, i: int) -> bool:
        """Whether layer ``i`` went to a network input, or is possibly fused into network inputs only."""
        if i in self.survivor_of and self.types[self.survivor_of[i]] == T.INPUT:
            return True
        return i in self.candidates and all(self.types[c] == T.INPUT for c in self.candidates[i])

    def _place_layer(self, i: int) -> None:
        """Give layer ``i`` (no executed node) a survivor or its candidate survivors."""
        if self.types[i] == T.INPUT:
            self.survivor_of[i] = i
            return
        ps = self.graph.parents[i]
        if (survivor := self._diamond_survivor(i)) is not None:
            self.survivor_of[i] = survivor
        elif len(ps) == 1:
            p = ps[0]
            if p in self.survivor_of:
                self.survivor_of[i] = self.survivor_of[p]
            else:
                self.candidates[i] = self.candidates.get(p, ())
        elif not ps:
            self.candidates[i] = ()
        else:
            self._place_merge(i)

    def _diamond_survivor(self, i: int) -> int | None:
        """The survivor of ``g`` when ``i`` is the side branch ``f`` of ``x -> f -> g(x, f)`` and ``g`` ran."""
        ps, cs = self.graph.parents[i], self.graph.children[i]
        if len(ps) != 1 or len(cs) != 1:
            return None
        c = cs[0]
        if ps[0] in self.graph.parents[c] and c in self.survivor_of and self.survivor_of[c] in self.head_records:
            return self.survivor_of[c]
        return None

    def _place_merge(self, i: int) -> None:
        """A multi-input layer: the one candidate survivor of its producers, else the one that says it took
        such an op (and, among several, has an output that feeds only this layer), else possibly-fused."""
        via: dict[int, list[int]] = {}   # candidate survivor -> the producers leading to it
        for p in self.graph.parents[i]:
            for c in ((self.survivor_of[p],) if p in self.survivor_of else self.candidates.get(p, ())):
                via.setdefault(c, []).append(p)
        real = {c: v for c, v in via.items() if self.types[c] != T.INPUT}
        via = real or via
        opk = _op_key(T(int(self.types[i])).label)
        said = [c for c in via if self._budget_left(c, opk)]
        if len(said) > 1:  # only a producer whose output feeds nothing else can take the op in
            said = [c for c in said if any(self.graph.children[p] == [i] for p in via[c])]
        if len(via) == 1:
            survivor = next(iter(via))
        elif len(said) == 1:
            survivor = said[0]
        elif len(down := {self.survivor_of.get(c) for c in self.graph.children[i]}) == 1 and \
                (c := next(iter(down))) in via:
            # every consumer ran in one candidate's node: the layer did too (OpenVINO's attention subgraph lists
            # the scale and softmax behind a hand-written ``q @ k.transpose(-2, -1)`` but not that product)
            survivor = c
        else:
            self.candidates[i] = tuple(sorted(via, key=self.graph.rank_of))
            return
        self.survivor_of[i] = survivor
        if self._budget_left(survivor, opk):
            self.budget[survivor][opk] -= 1

    def _budget_left(self, survivor: int, op: str) -> bool:
        return self.budget.get(survivor, {}).get(op, 0) > 0

    # ------------------------------------------------------------------ rule 5: records

    def layer_records(self) -> list[LayerRecord]:
        """One record per IR layer, in IR order."""
        absorbed: dict[int, list[int]] = {}   # survivor -> the layers fused into it
        for j, h in self.survivor_of.items():
            if j != h:
                absorbed.setdefault(h, []).append(j)
        labels = self.net.type_labels()
        return [self._layer_record(i, labels[i], absorbed.get(i, ())) for i in range(len(self.net))]

    def _layer_record(self, i: int, label: str, absorbed: Sequence[int]) -> LayerRecord:
        names = self.names
        if i in self.candidates:
            return LayerRecord(layer=names[i], layer_type=label, fused=POSSIBLY_FUSED,
                               fused_into="|".join(names[c] for c in self.candidates[i]))
        h = self.survivor_of[i]
        recs = self.head_records.get(h, [])
        shown = recs or ([self.idle[h]] if h in self.idle else [])
        node = "+".join(r.node for r in shown)
        ntype = shown[0].node_type if shown else ""
        kind = shown[0].exec_kind if shown else ""
        if h != i:
            return LayerRecord(layer=names[i], layer_type=label, fused=FUSED, fused_into=names[h], node=node,
                               node_type=ntype, exec_kind=kind)
        timing = _Timing.of(recs)
        taken = sorted(absorbed, key=self.graph.rank_of)
        return LayerRecord(layer=names[i], layer_type=label, fused=NOT_FUSED, node=node, node_type=ntype,
                           exec_kind=kind, time_ms=timing.median_ms, min_ms=timing.min_ms, std_ms=timing.std_ms,
                           absorbed=tuple(names[j] for j in taken), params=self._absorbed_params(taken))

    def _absorbed_params(self, taken: Sequence[int]) -> dict:
        """Parameters of the absorbed layers by role; a repeated role gets ``<role>_2``, ``<role>_3``..."""
        params: dict = {}
        for j in taken:
            role, p = _layer_params(self.net, j)
            key, k = role, 2
            while key in params:
                key, k = f"{role}_{k}", k + 1
            params[key] = p
        return params

    def inserted_records(self) -> list[LayerRecord]:
        """The records placed on no layer, as ``inserted`` rows in profile order."""
        out = []
        for entry in self.entries:
            if entry.kind is _EntryKind.EXECUTED:
                continue
            r = entry.record
            if entry.kind is _EntryKind.NAMELESS:
                log.debug("%s: node %r (%s) maps to no layer; recorded as inserted", self.runner, r.node,
                          r.node_type)
            out.append(LayerRecord(layer=r.node, layer_type=r.node_type, fused=INSERTED, node=r.node,
                                   node_type=r.node_type, exec_kind=r.exec_kind, time_ms=r.median_ms,
                                   min_ms=r.min_ms, std_ms=r.std_ms))
        return out


def match(net: Network, nodes: Iterable[NodeRecord], runner: str = "") -> list[LayerRecord]:
    """Map executed nodes of a profile back to the layers of ``net`` (rules in the module docstring).

    ``runner`` names the hardware module the records come from (kept for toolchain-specific rules; the
    rules above cover ``ort-cpu`` and ``openvino``). Returns every IR layer exactly once, in IR order,
    followed by the inserted nodes in profile order.
    """
    return GraphMatcher(net, nodes, runner).run()


def _topological(parents: list[list[int]]) -> list[int]:
    """Layer indices in a topological order (the IR order when it is one already, as builders make it)."""
    n = len(parents)
    if all(p < i for i in range(n) for p in parents[i]):
        return list(range(n))
    out = topological_order(parents)
    seen = set(out)
    return out + [i for i in range(n) if i not in seen]  # a cycle (not a valid network): keep every layer
