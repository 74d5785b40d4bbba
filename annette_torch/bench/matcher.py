"""Graph matcher: map a toolchain's executed nodes back to the original layers of a `Network`.

``match(net, nodes, runner)`` returns one `LayerRecord` per IR layer (in IR order), then one ``inserted``
record per executed node the toolchain added (layout reorders, precision converts, nodes that map to no
layer), so no measured time is dropped: the layer and inserted times add up to the executed nodes' times.

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
   node type (a ``Conv`` node heads a conv layer, a ``Subgraph`` its first element-wise layer). When none
   fits, e.g. ONNX Runtime's ``relu1_nchwc`` (named after the Relu it ends with) or OpenVINO's
   ``Multiply_<n>`` carrying ``bn1,relu1``, the matcher walks up through producers that have no node of
   their own to the nearest layer that fits (conv1) and takes the layers on the way as absorbed. The head
   is ``not-fused`` with the node's time (several nodes on one head add up: ``fc/flatten+fc``); the
   node's other layers are ``fused`` into the head.
3. Data flow, for executed nodes whose names map to no layer (ONNX Runtime's fused ``Gelu``; the unnamed
   ``HardSigmoid_<n>`` + ``Mul_<n>`` a HardSwish expands into) when the records carry their tensors
   (``extra["inputs"]`` / ``extra["outputs"]``): such a node runs the one still uncovered layer that
   consumes what it reads; else it continues a layer placed this way that it reads (the second half of
   an expanded op); else it joins the layer all its readers run. A node still unplaced is recorded as
   ``inserted`` under its own name, so its time stays visible.
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
     such candidates only one whose output feeds nothing but this layer can have taken it. Otherwise the
     layer is ``possibly-fused`` with ``fused_into`` = the candidate survivors joined with ``|``.
5. A survivor lists the layers fused into it in ``absorbed`` and keeps their parameters in ``params``
   (``{"pool": {"kind": "max", "kernel": [2, 2], "stride": [2, 2], "padding": [0, 0], "layer": ...}}``,
   ``{"bn": ...}``, ``{"activation": {"kind": "Relu", ...}}``, ``{"eltwise": {"kind": "Add", ...}}``;
   a second absorbed layer of the same role gets ``<role>_2``). Padding is the IR's total per axis.

Checked on ONNX Runtime 1.32 and OpenVINO 2026.4 with ResNet-18, MobileNetV2/V3, EfficientNet-B0,
DenseNet-121, SqueezeNet and GoogLeNet exported by `to_onnx`: every node placed, and ONNX Runtime's
residual-Add assignment agrees with OpenVINO's ``originalLayersNames``.
"""

from __future__ import annotations

import logging
import re
from collections import Counter, deque
from typing import Iterable, Sequence

import numpy as np

from ..ir import CONV_TYPES, ELEMENTWISE_TYPES, MERGE_TYPES, POOL_TYPES, LayerType as T, Network, topological_order
from .records import FUSED, INSERTED, NOT_FUSED, POSSIBLY_FUSED, LayerRecord, NodeRecord

__all__ = ["match", "resolve_name", "INSERTED_TYPES"]

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
        "innerproduct")
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
_compat(_ELT + (T.BATCH_NORM,), "eltwise", "subgraph", "muladd", "powerstatic")
_compat((T.CONCAT,), "concat", "concatenation")
_compat((T.RESHAPE, T.FLATTEN, T.DROPOUT), "reshape", "flatten", "squeeze", "unsqueeze", "identity")
_compat((T.TRANSPOSE,), "transpose")
_compat((T.RESIZE,), "resize", "interpolate", "upsample")
_compat((T.PAD,), "pad")
_compat((T.SLICE,), "slice", "stridedslice", "split")
_compat((T.LRN,), "lrn")
_compat((T.LAYER_NORM,), "layernormalization", "mvn")
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


def _node_stats(recs: Sequence[NodeRecord]) -> tuple[float, float, float]:
    med = float(sum(r.median_ms for r in recs))
    mn = float(sum(r.min_ms for r in recs))
    std = float(np.sqrt(sum(r.std_ms ** 2 for r in recs)))
    return med, mn, std


def match(net: Network, nodes: Iterable[NodeRecord], runner: str = "") -> list[LayerRecord]:
    """Map executed nodes of a profile back to the layers of ``net`` (rules in the module docstring).

    ``runner`` names the hardware module the records come from (kept for toolchain-specific rules; the
    rules above cover ``ort-cpu`` and ``openvino``). Returns every IR layer exactly once, in IR order,
    followed by the inserted nodes in profile order.
    """
    n = len(net)
    names = net.names
    types = net.types
    index = {nm: i for i, nm in enumerate(names)}
    by_length = sorted(index, key=len, reverse=True)
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
    by_rank = rank.__getitem__

    # 1. classify the records, resolve their names to layers (kept in profile = execution order)
    order: list[list] = []   # [kind, record, layers]; kind "ins" (inserted type), "exe", "unk" (no layer)
    idle: dict[int, NodeRecord] = {}   # layer -> its own NOT_RUN node
    for rec in nodes:
        t = rec.node_type.lower()
        if t in SKIP_TYPES:
            continue
        if t in INSERTED_TYPES:
            if rec.status != "not-run":
                order.append(["ins", rec, set()])
            continue
        if rec.status == "not-run":  # absorbed by another node, or optimised out: the rules below place it
            if (i := resolve_name(rec.node, index, by_length)) is not None:
                idle.setdefault(i, rec)
            continue
        layers = {i for nm in (rec.node, *rec.layers) if (i := resolve_name(nm, index, by_length)) is not None}
        order.append(["exe" if layers else "unk", rec, layers])
    claimed: set[int] = set()
    for kind, _, layers in order:
        claimed |= layers

    # 2. survivors: the head layer of each executed node, its other layers absorbed
    head_nodes: dict[int, list[NodeRecord]] = {}
    members: list[tuple[int, set[int]]] = []
    covered: set[int] = set()

    def place(rec: NodeRecord, layers: set[int]) -> None:
        fits = _fits(rec.node_type)
        ok = sorted((i for i in layers if fits is None or T(int(types[i])) in fits), key=by_rank)
        if ok:
            head = ok[0]
        else:
            head, path = _walk_up(min(layers, key=by_rank), fits, parents, types, claimed, layers)
            layers = layers | path
        head_nodes.setdefault(head, []).append(rec)
        members.append((head, layers))
        covered.update(layers)

    for entry in order:
        if entry[0] == "exe":
            place(entry[1], entry[2])

    # 2b. data flow, for nodes whose name maps to no layer (ONNX Runtime's fused ``Gelu``, the
    # ``HardSigmoid_<n>`` + ``Mul_<n>`` a HardSwish expands to), when the records carry their tensors
    # (``extra["inputs"/"outputs"]``): such a node runs the one layer without a node that consumes what
    # it reads; else it continues a layer guessed before that it reads (second half of an expanded op);
    # else it belongs to the layer all its consumers run
    tensor_layer: dict[str, int] = {}
    for kind, rec, layers in order:
        if kind == "exe":
            for tname in rec.extra.get("outputs", ()):
                tensor_layer[tname] = max(layers, key=by_rank)
    guessed: dict[int, int] = {}   # position in order -> layer
    for k, (kind, rec, _) in enumerate(order):
        reads = []
        for tname in rec.extra.get("inputs", ()):
            if tname in tensor_layer:
                reads.append(tensor_layer[tname])
            elif (j := index.get(tname)) is not None and types[j] == T.INPUT:
                reads.append(j)
        outs = rec.extra.get("outputs", ())
        if kind == "ins":
            for tname in outs:
                if reads:
                    tensor_layer.setdefault(tname, reads[0])
            continue
        if kind != "unk" or not reads:
            continue
        rs = set(reads)
        cand = {c for r in rs for c in children[r] if c not in covered and c not in rs}
        done = rs & set(guessed.values())
        if len(cand) == 1:
            layer = cand.pop()
        elif not cand and done:
            layer = max(done, key=by_rank)
        else:
            continue
        guessed[k] = layer
        covered.add(layer)
        for tname in outs:
            tensor_layer[tname] = layer
    readers: dict[str, list[int]] = {}
    for k, (_, rec, _) in enumerate(order):
        for tname in rec.extra.get("inputs", ()):
            readers.setdefault(tname, []).append(k)
    for k in range(len(order) - 1, -1, -1):
        kind, rec, _ = order[k]
        if kind != "unk" or k in guessed:
            continue
        got = set()
        for tname in rec.extra.get("outputs", ()):
            for r in readers.get(tname, ()):
                got.add(guessed.get(r, max(order[r][2], key=by_rank) if order[r][0] == "exe" else None))
        if len(got) == 1 and None not in got:
            guessed[k] = got.pop()
    for k, layer in guessed.items():
        order[k][0], order[k][2] = "exe", {layer}
        claimed.add(layer)
        place(order[k][1], {layer})
    inserted: list[NodeRecord] = []
    for kind, rec, _ in order:
        if kind != "exe":
            if kind == "unk":
                log.debug("%s: node %r (%s) maps to no layer; recorded as inserted", runner, rec.node,
                          rec.node_type)
            inserted.append(rec)

    owner: dict[int, int] = {}          # layer -> survivor (head) layer
    for head, recs in head_nodes.items():
        owner[head] = head
        # the node that fits the layer's type (then the one named exactly after it) describes the layer
        t = T(int(types[head]))
        recs.sort(key=lambda r: (not (_fits(r.node_type) is None or t in _fits(r.node_type)),
                                 r.node != names[head]))
    for head, layers in members:
        for j in sorted(layers):
            owner.setdefault(j, head)

    # 3. layers without an executed node, in topological order
    cands: dict[int, tuple[int, ...]] = {}   # possibly-fused layer -> candidate survivors
    # what each survivor's node says it absorbed, as a budget: one residual Add per ``Add`` listed
    budget = {h: Counter(_op_key(op) for r in recs for op in r.extra.get("fused_ops", ()))
              for h, recs in head_nodes.items()}
    def decide(i: int) -> None:
        """Place layer ``i`` (no executed node) once its producers are placed."""
        if types[i] == T.INPUT:
            owner[i] = i
            return
        ps = parents[i]
        if len(ps) == 1 and len(children[i]) == 1:  # element-wise diamond: x -> f -> g(x, f)
            c = children[i][0]
            if ps[0] in parents[c] and c in owner and owner[c] in head_nodes:
                owner[i] = owner[c]
                return
        if len(ps) == 1:
            p = ps[0]
            if p in owner:
                owner[i] = owner[p]
            else:
                cands[i] = cands.get(p, ())
            return
        if not ps:
            cands[i] = ()
            return
        via: dict[int, list[int]] = {}   # candidate survivor -> the producers leading to it
        for p in ps:
            for c in ((owner[p],) if p in owner else cands.get(p, ())):
                via.setdefault(c, []).append(p)
        real = {c: v for c, v in via.items() if types[c] != T.INPUT}
        via = real or via
        opk = _op_key(T(int(types[i])).label)
        said = [c for c in via if budget.get(c, {}).get(opk, 0) > 0]
        if len(said) > 1:  # only a producer whose output feeds nothing else can take the op in
            said = [c for c in said if any(children[p] == [i] for p in via[c])]
        if len(via) == 1:
            owner[i] = next(iter(via))
        elif len(said) == 1:
            owner[i] = said[0]
        else:
            cands[i] = tuple(sorted(via, key=by_rank))
            return
        if budget.get(owner[i], {}).get(opk, 0) > 0:
            budget[owner[i]][opk] -= 1


    for i in topo:
        if i in owner:
            continue
        decide(i)
        # a layer listed NOT_RUN under its own name that no real layer can have absorbed (only network
        # inputs feed it: OpenVINO's in-place Concat of inputs, a Reshape of an input) was optimised out:
        # it is its own survivor, with time 0
        if i in idle and (i in owner and types[owner[i]] == T.INPUT
                          or i in cands and all(types[c] == T.INPUT for c in cands[i])):
            cands.pop(i, None)
            owner[i] = i

    # 4. records
    absorbed: dict[int, list[int]] = {}
    for j, h in owner.items():
        if j != h:
            absorbed.setdefault(h, []).append(j)
    labels = net.type_labels()
    out: list[LayerRecord] = []
    for i in range(n):
        if i in cands:
            out.append(LayerRecord(layer=names[i], layer_type=labels[i], fused=POSSIBLY_FUSED,
                                   fused_into="|".join(names[c] for c in cands[i])))
            continue
        h = owner[i]
        recs = head_nodes.get(h, [])
        shown = recs or ([idle[h]] if h in idle else [])
        node = "+".join(r.node for r in shown)
        ntype = shown[0].node_type if shown else ""
        kind = shown[0].exec_kind if shown else ""
        if h != i:
            out.append(LayerRecord(layer=names[i], layer_type=labels[i], fused=FUSED, fused_into=names[h],
                                   node=node, node_type=ntype, exec_kind=kind))
            continue
        med, mn, std = _node_stats(recs) if recs else (0.0, 0.0, 0.0)
        params: dict = {}
        taken = sorted(absorbed.get(i, ()), key=by_rank)
        for j in taken:
            role, p = _layer_params(net, j)
            key, k = role, 2
            while key in params:
                key, k = f"{role}_{k}", k + 1
            params[key] = p
        out.append(LayerRecord(layer=names[i], layer_type=labels[i], fused=NOT_FUSED, node=node,
                               node_type=ntype, exec_kind=kind, time_ms=med, min_ms=mn, std_ms=std,
                               absorbed=tuple(names[j] for j in taken), params=params))
    for r in inserted:
        out.append(LayerRecord(layer=r.node, layer_type=r.node_type, fused=INSERTED, node=r.node,
                               node_type=r.node_type, exec_kind=r.exec_kind, time_ms=r.median_ms,
                               min_ms=r.min_ms, std_ms=r.std_ms))
    return out


def _topological(parents: list[list[int]]) -> list[int]:
    """Layer indices in a topological order (the IR order when it is one already, as builders make it)."""
    n = len(parents)
    if all(p < i for i in range(n) for p in parents[i]):
        return list(range(n))
    out = topological_order(parents)
    seen = set(out)
    return out + [i for i in range(n) if i not in seen]  # a cycle (not a valid network): keep every layer


def _walk_up(start: int, fits: tuple[T, ...] | None, parents: list[list[int]], types: np.ndarray,
             claimed: set[int], own: set[int]) -> tuple[int, set[int]]:
    """Nearest ancestor of ``start`` whose type fits, reached through layers without a node of their own
    (or of this node); returns (head, layers on the way incl. the head), or (start, {}) if none / ambiguous."""
    if fits is None:
        return start, set()
    seen = {start: -1}
    frontier = deque([start])
    found: list[int] = []
    while frontier and not found:
        nxt: deque[int] = deque()
        for u in frontier:
            for p in parents[u]:
                if p in seen or types[p] == T.INPUT or (p in claimed and p not in own):
                    continue
                seen[p] = u
                if T(int(types[p])) in fits:
                    found.append(p)
                nxt.append(p)
        frontier = nxt
    if len(found) != 1:
        return start, set()
    head = found[0]
    path = {head}
    u = head
    # walk back down the recorded links to start
    while u != start:
        u = seen[u]
        path.add(u)
    return head, path
