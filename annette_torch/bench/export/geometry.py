"""Operator attributes both back ends derive from the IR columns: windows (kernel, stride, dilation,
padding, ceil mode), transposed-convolution padding and transpose permutations.

Total padding per axis is split into ``begin = total // 2`` and ``end = total - begin``. Where the IR's
padding does not reproduce its output size (a ceil-mode pool, an ANNETTE graph with SAME padding stored as
0), ``ceil_mode`` or the padding that produces the IR's output size is used (SAME_UPPER style), so the
exported op always gives the IR's shapes.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any, Sequence

import numpy as np

from ...ir import Network, to_nchw
from .plan import ExportError, where

__all__ = ["split", "window_attrs", "conv_transpose_attrs", "permutation", "matmul_trans_b"]

log = logging.getLogger(__name__)


def _window(where_: str, size_in: int, size_out: int, k: int, s: int, d: int, total: int, ceil: bool,
            refit: bool) -> int:
    """Total padding making a sliding window (floor or ``ceil`` mode) produce ``size_out`` from ``size_in``.

    The IR's padding ``total`` when it fits; with ``refit`` the smallest padding that fits (SAME-like), up to
    ``2 * (effective kernel - 1)`` (more would only add windows of zeros). Raises `ExportError` otherwise.
    """
    eff = d * (k - 1) + 1
    s = max(s, 1)

    def out(t: int) -> int:
        num = size_in + t - eff
        return (-(-num // s) if ceil else num // s) + 1

    if out(total) == size_out:
        return total
    if refit:
        for t in range(0, 2 * (eff - 1) + 1):
            if out(t) == size_out:
                log.debug("%s: padding %d does not give output size %d from %d; using %d", where_, total,
                          size_out, size_in, t)
                return t
    raise ExportError(f"{where_}: kernel {k}, stride {s}, dilation {d} cannot turn size {size_in} into "
                      f"{size_out} (padding {total} gives {out(total)})")


def split(total: int) -> tuple[int, int]:
    """A total padding as (begin, end), the odd pixel at the end."""
    return total // 2, total - total // 2


def window_attrs(net: Network, i: int, allow_ceil: bool = False) -> dict[str, Any]:
    """kernel / strides / pads (ONNX order: begins then ends) / dilations / ceil of a window layer."""
    at = where(net, i)
    k = (int(net.kh[i]), int(net.kw[i]))
    s = (max(int(net.sh[i]), 1), max(int(net.sw[i]), 1))
    d = (max(int(net.dh[i]), 1), max(int(net.dw[i]), 1))
    if min(k) < 1:
        raise ExportError(f"{at}: kernel {list(k)} is not positive")
    axes = ((int(net.h_in[i]), int(net.h_out[i]), k[0], s[0], d[0], int(net.ph[i])),
            (int(net.w_in[i]), int(net.w_out[i]), k[1], s[1], d[1], int(net.pw[i])))
    # one ceil flag serves both axes; preference: the IR's padding (floor, then ceil mode), then refitted
    attempts = [(False, False), (True, False), (False, True), (True, True)]
    last: ExportError | None = None
    for ceil, refit in attempts:
        if ceil and not allow_ceil:
            continue
        try:
            th, tw = (_window(at, *ax, ceil=ceil, refit=refit) for ax in axes)
            break
        except ExportError as e:
            last = e
    else:
        assert last is not None
        raise last
    (hb, he), (wb, we) = split(th), split(tw)
    return dict(kernel=k, strides=s, dilations=d, pads=(hb, wb, he, we), ceil=bool(ceil))


def conv_transpose_attrs(net: Network, i: int) -> dict[str, Any]:
    """ONNX ``ConvTranspose`` attributes (kernel_shape, strides, dilations, pads, group, output_padding when
    needed) giving the IR's output size; the padding is refitted when the IR's does not."""
    at = where(net, i)
    k = (int(net.kh[i]), int(net.kw[i]))
    s = (max(int(net.sh[i]), 1), max(int(net.sw[i]), 1))
    d = (max(int(net.dh[i]), 1), max(int(net.dw[i]), 1))
    pads, out_pad = [], []
    for ax, (size_in, size_out, total) in enumerate(((int(net.h_in[i]), int(net.h_out[i]), int(net.ph[i])),
                                                      (int(net.w_in[i]), int(net.w_out[i]), int(net.pw[i])))):
        full = s[ax] * (size_in - 1) + d[ax] * (k[ax] - 1) + 1
        extra = size_out - (full - total)  # output_padding needed with this padding
        if extra < 0 or extra >= max(s[ax], d[ax]):
            total = max(full - size_out, 0)
            extra = size_out - (full - total)
        if extra < 0 or extra >= max(s[ax], d[ax]):
            raise ExportError(f"{at}: kernel {k[ax]}, stride {s[ax]} cannot turn size {size_in} into {size_out}")
        pads.append(split(total))
        out_pad.append(extra)
    kw: dict[str, Any] = dict(kernel_shape=list(k), strides=list(s), dilations=list(d),
                              pads=[pads[0][0], pads[1][0], pads[0][1], pads[1][1]],
                              group=max(int(net.groups[i]), 1))
    if any(out_pad):
        kw["output_padding"] = out_pad
    return kw


def permutation(net: Network, i: int, src: Sequence[int], dst: Sequence[int]) -> list[int]:
    """A permutation of ``src``'s axes giving the exported shape ``dst`` (or, when that is the folded IR shape,
    a tensor folding to it; a non-trivial permutation first); the layer's ``perm`` attribute when it has one."""
    r = len(src)
    want = tuple(dst) if len(dst) == r else net.out_shape(i)
    given = net.attr("perm", i)
    if given is not None:
        perm = [int(a) for a in given]
        got = tuple(src[a] for a in perm) if sorted(perm) == list(range(r)) else None
        if got is None or (got if len(want) == r else to_nchw(got)) != want:
            raise ExportError(f"{where(net, i)}: permutation {perm} of {list(src)} does not give {list(dst)}")
        return perm
    best = None
    for perm in itertools.permutations(range(r)):
        got = tuple(src[a] for a in perm)
        if (got if len(want) == r else to_nchw(got)) == want:
            if list(perm) != list(range(r)):
                return list(perm)
            best = list(perm)
    if best is None:
        raise ExportError(f"{where(net, i)}: no transpose of {list(src)} has the shape {list(want)}")
    return best


def matmul_trans_b(net: Network, i: int, dst: Sequence[int], a: Sequence[int], b: Sequence[int]) -> bool:
    """Whether the second operand ``b`` of MatMul layer ``i`` (first operand ``a``, exported output ``dst``) is
    stored transposed: its ``trans_b`` attribute, else the first reading that multiplies (`ExportError` if none)."""
    attr = net.attr("trans_b", i)
    choices = [bool(attr)] if attr is not None else [False, True]
    for trans in choices:
        bb = (tuple(b[:-2]) + (b[-1], b[-2])) if trans and len(b) >= 2 else tuple(b)
        if len(a) >= 2 and len(bb) >= 2 and a[-1] == bb[-2]:
            try:
                batch = np.broadcast_shapes(tuple(a[:-2]), tuple(bb[:-2]))
            except ValueError:
                continue
            if tuple(batch) + (a[-2], bb[-1]) == tuple(dst):
                return trans
    raise ExportError(f"{where(net, i)}: operands {list(a)} and {list(b)} do not multiply to the output "
                      f"{list(dst)} (give the operands' full shapes)")
