"""Pattern folds: groups of layers a toolchain executes as one layer of another type (`FOLDS`).

Pairwise fusion rules cannot express these patterns: their input has two consumers inside the group.

- ``swish``: ``x * sigmoid(x)`` (how exporters write ``nn.SiLU``) becomes one SiLU layer reading ``x``; the
  rules may then fuse it into its producer (OpenVINO runs it inside the conv).
- ``hardswish``: hard-swish written out, ``x * relu6(x + 3) / 6`` (the Add and the Div/Mul with a constant
  operand, the Div/Mul before or after the product), becomes one HardSwish layer reading ``x`` that stays a
  node of its own (*pinned*: no rule fuses it into its producer). OpenVINO runs the four layers as one
  element-wise ``Subgraph`` node next to the conv, while it fuses a real HardSwish into the conv.
- ``pad``: an explicit spatial Pad read by one convolution alone (how TensorFlow and Keras graphs write
  asymmetric "same" padding) becomes part of that convolution, which reads the Pad's input: ONNX Runtime's
  ``PadFusion`` moves the padding into the Conv's ``pads``, and OpenVINO runs no node for it either.
- ``shuffle``: a channel shuffle, a view, a transpose and a view back to the input's shape (ShuffleNet's), becomes
  one pinned ChannelShuffle layer: OpenVINO runs the three as one ``ShuffleChannels`` node after the Concat
  (~1 ns per element), which its rules would otherwise fuse into the Concat, at no cost.

Which folds a platform applies is learned from measured records (`annette_torch.fit.data.learned_folds`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..ir import LayerType, Network

__all__ = ["FOLDS", "Folded", "apply_folds", "may_fold", "swish_diamonds", "hardswish_groups", "shuffle_groups",
           "pad_consumers"]

#: Pattern folds a mapping model may apply before its rules, in the order they apply.
FOLDS = ("swish", "hardswish", "shuffle", "pad")

T = LayerType
# (comparing with a plain int is faster than with the enum member)
_SIGMOID, _MUL, _RELU6, _TRANSPOSE = int(T.SIGMOID), int(T.MUL), int(T.RELU6), int(T.TRANSPOSE)
_RESHAPE, _FLATTEN, _PAD = int(T.RESHAPE), int(T.FLATTEN), int(T.PAD)
#: the layers a Pad folds into
_PADDED = np.array([int(T.CONV), int(T.DEPTHWISE_CONV), int(T.GROUP_CONV)])
#: the one-input (constant operand) layers that scale a written-out hard-swish
_SCALE = (T.DIV, T.MUL)


def swish_diamonds(net: Network) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the Sigmoid and the Mul of every ``x * sigmoid(x)`` in ``net``: a Sigmoid read only by a Mul
    whose two inputs are the Sigmoid and the Sigmoid's own input."""
    none = np.zeros(0, np.int64)
    types = net.types
    if not net.edges.size or not (types == _SIGMOID).any():
        return none, none
    src, dst = net.edges[:, 0], net.edges[:, 1]
    n_in, n_out = net.n_inputs, net.n_outputs
    cand = (types[src] == _SIGMOID) & (types[dst] == _MUL) & (n_out[src] == 1) & (n_in[src] == 1) \
        & (n_in[dst] == 2)
    if not cand.any():
        return none, none
    sig, mul = src[cand], dst[cand]
    producer = np.full(len(net), -1, dtype=np.int64)
    producer[dst] = src  # exact for the single-input Sigmoids asked about below
    n = len(net)
    ok = np.isin(producer[sig] * n + mul, src.astype(np.int64) * n + dst)
    return sig[ok], mul[ok]


@dataclass(frozen=True)
class HardSwishGroups:
    """Written-out hard-swishes of a network: per group its input ``x`` and surviving (last) layer, and the
    group's other layers (``members``) with the group each belongs to (``member_group``)."""

    x: np.ndarray
    survivor: np.ndarray
    members: np.ndarray
    member_group: np.ndarray

    def __len__(self) -> int:
        return int(self.x.size)


def hardswish_groups(net: Network) -> HardSwishGroups:
    """Every ``x * relu6(x + c) [/ d]`` of ``net`` (`HardSwishGroups`): a two-input Mul reading ``x`` and a chain
    Add(c) -> Relu6 [-> Div/Mul(d)] that starts at ``x``, each chain layer read by the next alone; the scale may
    instead follow the Mul (then it survives, else the Mul does). Constants are not checked: the runtime's
    cost does not depend on their values."""
    none = np.zeros(0, np.int64)
    types = net.types
    if not net.edges.size or not (types == _RELU6).any():
        return HardSwishGroups(none, none, none, none)
    n_in, n_out = net.n_inputs, net.n_outputs
    src, dst = net.edges[:, 0], net.edges[:, 1]
    producer = np.full(len(net), -1, dtype=np.int64)
    one_in = n_in == 1
    producer[dst[one_in[dst]]] = src[one_in[dst]]
    consumer = np.full(len(net), -1, dtype=np.int64)
    one_out = n_out == 1
    consumer[src[one_out[src]]] = dst[one_out[src]]
    xs, survs, members, groups = [], [], [], []
    for m in np.flatnonzero((types == T.MUL) & (n_in == 2)):
        a, b = src[dst == m]
        for x, r in ((a, b), (b, a)):
            chain = []
            cur = r
            while len(chain) < 3 and cur >= 0 and n_in[cur] == 1 and n_out[cur] == 1 and cur != x:
                chain.append(int(cur))
                if producer[cur] == x:
                    break
                cur = producer[cur]
            if not chain or producer[chain[-1]] != x:
                continue
            chain.reverse()  # from x's side: Add, Relu6 [, scale]
            kinds = [int(types[i]) for i in chain]
            if kinds[:2] != [T.ADD, T.RELU6] or (len(chain) == 3 and kinds[2] not in _SCALE):
                continue
            tail = consumer[m] if n_out[m] == 1 else -1
            if len(chain) == 2 and tail >= 0 and n_in[tail] == 1 and int(types[tail]) in _SCALE:
                xs.append(int(x)), survs.append(int(tail))
                members += chain + [int(m)]
            else:
                xs.append(int(x)), survs.append(int(m))
                members += chain
            groups += [len(xs) - 1] * (len(members) - len(groups))
            break
    as_arr = lambda v: np.array(v, dtype=np.int64)  # noqa: E731
    return HardSwishGroups(as_arr(xs), as_arr(survs), as_arr(members), as_arr(groups))


def shuffle_groups(net: Network) -> np.ndarray:
    """Rows ``(view, transpose, view_back)`` of every channel shuffle in ``net``, shape ``(k, 3)``: a Reshape read
    only by a one-input Transpose read only by a Reshape / Flatten whose output has the view's input shape
    (channels and a spatial map); what the transpose permutes is not checked (a view back to the same shape)."""
    types = net.types
    none = np.zeros((0, 3), np.int64)
    if not net.edges.size or not (types == _TRANSPOSE).any():
        return none
    src, dst = net.edges[:, 0], net.edges[:, 1]
    # Reshape -> Transpose edges, each layer read by the next alone, then the one layer reading the Transpose
    e = ((types[dst] == _TRANSPOSE) & (types[src] == _RESHAPE)).nonzero()[0]
    n_in, n_out = net.n_inputs, net.n_outputs
    e = e[(n_out[src[e]] == 1) & (n_in[dst[e]] == 1) & (n_out[dst[e]] == 1)]
    if not e.size:
        return none
    after = np.full(len(net), -1, dtype=np.int64)
    after[src] = dst  # (exact for the one-output Transposes asked about)
    v, t = src[e], dst[e]
    b = after[t]
    tb = types[b]
    keep = ((tb == _RESHAPE) | (tb == _FLATTEN)) & (n_in[b] == 1)
    if not keep.any():
        return none
    v, t, b = v[keep], t[keep], b[keep]
    c = net.cols
    same = (c["c_in"][v] == c["c_out"][b]) & (c["h_in"][v] == c["h_out"][b]) & (c["w_in"][v] == c["w_out"][b]) \
        & (c["n"][v] == c["n"][b]) & (c["c_out"][b] > 1) & (c["h_out"][b] * c["w_out"][b] > 1)
    return np.column_stack([v[same], t[same], b[same]]).astype(np.int64)


def pad_consumers(net: Network) -> np.ndarray:
    """Rows ``(pad, conv)`` of every one-input Pad in ``net`` read by one convolution (`_PADDED`) alone, that
    convolution reading nothing else, padding the spatial axes only, shape ``(k, 2)``."""
    types = net.types
    none = np.zeros((0, 2), np.int64)
    if not net.edges.size or not (types == _PAD).any():
        return none
    src, dst = net.edges[:, 0], net.edges[:, 1]
    n_in, n_out, c = net.n_inputs, net.n_outputs, net.cols
    e = ((types[src] == _PAD) & np.isin(types[dst], _PADDED)).nonzero()[0]
    p, q = src[e], dst[e]
    ok = (n_in[p] == 1) & (n_out[p] == 1) & (n_in[q] == 1) & (c["c_in"][p] == c["c_out"][p]) \
        & (c["n"][p] == c["n"][q])
    return np.column_stack([p[ok], q[ok]]).astype(np.int64)


@dataclass(frozen=True)
class Folded:
    """A network as the pattern folds see it (rows stay the original layers).

    ``types``: per layer after the folds (a folded group's survivor gets the group's type); ``edges``: the
    edges left (none touches a merged layer; a survivor reads the group's input); ``absorber``: per layer, the
    survivor it was merged into (itself if none); ``folded``: the merged layers; ``pinned``: survivors no rule
    may fuse into their producer; ``extra_in``: per layer, the change of its input elements (a folded Mul no
    longer reads the merged layer's output).
    """

    types: np.ndarray
    edges: np.ndarray
    absorber: np.ndarray
    folded: np.ndarray
    pinned: np.ndarray
    extra_in: np.ndarray

    @property
    def any(self) -> bool:
        return bool(self.folded.any())


#: per fold, the layer type every one of its patterns contains (no such layer: nothing to fold)
_KEY_TYPE = {"swish": _SIGMOID, "hardswish": _RELU6, "shuffle": _TRANSPOSE, "pad": _PAD}


def may_fold(net: Network, folds: Sequence[str]) -> bool:
    """Whether ``net`` has a layer of a type some pattern of ``folds`` needs (else `apply_folds` folds
    nothing); one comparison per fold."""
    types = net.types
    return bool(net.edges.size) and any((types == _KEY_TYPE[f]).any() for f in folds)


def apply_folds(net: Network, folds: Sequence[str]) -> Folded:
    """Apply the pattern folds ``folds`` (names from `FOLDS`) to ``net`` (not modified)."""
    n = len(net)
    types, edges = net.types, net.edges
    absorber = np.arange(n)
    folded, pinned = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    extra_in = np.zeros(n)
    added: list[np.ndarray] = []  # (edges the folds add, (k, 2) arrays)
    if "swish" in folds:
        sig, mul = swish_diamonds(net)
        if sig.size:
            types = types.copy()
            types[mul] = T.SILU
            absorber[sig] = mul
            folded[sig] = True
            extra_in[mul] -= net.out_elems[sig]
    if "hardswish" in folds:
        g = hardswish_groups(net)
        if len(g):
            types = types.copy() if types is net.types else types
            types[g.survivor] = T.HARDSWISH
            absorber[g.members] = g.survivor[g.member_group]
            folded[g.members] = True
            pinned[g.survivor] = True
            is_mul = net.types[g.survivor] == T.MUL
            # a surviving Mul reads x and the chain's end; a surviving scale reads the Mul: x instead
            chain_end = np.array([g.members[(g.member_group == k)][-1] for k in np.flatnonzero(is_mul)],
                                 dtype=np.int64)
            extra_in[g.survivor[is_mul]] -= net.out_elems[chain_end]
            added.append(np.column_stack([g.x[~is_mul], g.survivor[~is_mul]]))
    if "shuffle" in folds:
        sg = shuffle_groups(net)
        if sg.size:
            types = types.copy() if types is net.types else types
            view, back = sg[:, 0], sg[:, 2]
            types[back] = T.CHANNEL_SHUFFLE
            absorber[sg[:, :2]] = back[:, None]
            folded[sg[:, :2]] = True
            pinned[back] = True
            added.append(_rerouted(edges, n, view, back))  # the view's producer now feeds the shuffle
    if "pad" in folds:
        pc = pad_consumers(net)
        if pc.size:
            pad, conv = pc[:, 0], pc[:, 1]
            absorber[pad] = conv
            folded[pad] = True
            extra_in[conv] -= net.out_elems[pad] - net.in_elems[pad]  # (it reads the unpadded input)
            added.append(_rerouted(edges, n, pad, conv))  # the Pad's producer now feeds the convolution
    if folded.any():
        live = ~(folded[edges[:, 0]] | folded[edges[:, 1]])
        edges = edges[live]
        if added:
            edges = np.concatenate([edges, *(a.astype(np.int64).reshape(-1, 2) for a in added)])
    return Folded(types, edges, absorber, folded, pinned, extra_in)


def _rerouted(edges: np.ndarray, n: int, gone: np.ndarray, to: np.ndarray) -> np.ndarray:
    """The edges into each layer of ``gone`` (folded away), each leading into its layer of ``to`` instead."""
    into = edges[np.isin(edges[:, 1], gone)]
    lut = np.zeros(n, dtype=np.int64)
    lut[gone] = to
    return np.column_stack([into[:, 0], lut[into[:, 1]]])
