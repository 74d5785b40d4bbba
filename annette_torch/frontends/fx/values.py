"""The values flowing through the fx walk (`_TV`: a tensor's producing layer and shape), the errors a rule
raises to steer the walker, and the argument and shape helpers the rules share."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Iterator

import torch

from ...ir import LayerType

T = LayerType


class _TV:
    """A tensor: the layer producing it (-1 for a constant: parameter, buffer, folded value) and shape; with
    ``logits`` / ``probs`` the share of its values an additive mask put in `ir.SUBNORMAL_LOGITS` / the share
    of subnormal softmax outputs made from those (`ir.SLOW_UNITS`)."""

    __slots__ = ("layer", "shape", "dtype", "logits", "probs")

    def __init__(self, layer: int, shape: tuple[int, ...], dtype: torch.dtype | None = None,
                 logits: float = 0.0, probs: float = 0.0) -> None:
        self.layer = layer
        self.shape = shape
        self.dtype = dtype
        self.logits = logits
        self.probs = probs

    def __repr__(self) -> str:
        return f"Tensor{list(self.shape)}"


class _ShapeError(Exception):
    """The model cannot run on the given shapes (a user mistake): becomes a `ModelLoadError`."""


class _NoRule(Exception):
    """An analytic rule does not cover this call: evaluate the node on the meta device instead."""


class _NeedsOnnx(Exception):
    """A node cannot be evaluated on the meta device: convert the whole model through ONNX."""


def _arg(args: tuple, kwargs: dict, i: int, key: str, default: Any = None) -> Any:
    if len(args) > i:
        return args[i]
    return kwargs.get(key, default)


def _x(args: tuple, kwargs: dict) -> _TV:
    x = args[0] if args else kwargs.get("input")
    if type(x) is not _TV:
        raise _NoRule("first argument is not a tensor")
    return x


def _prod(xs) -> int:
    p = 1
    for v in xs:
        p *= v
    return p


def _tup(v: Any, n: int) -> tuple:
    if isinstance(v, (tuple, list)):
        v = tuple(v)
        return v * n if len(v) == 1 else v
    return (v,) * n


def _dim(d: int, rank: int) -> int:
    if not -rank <= d < max(rank, 1):
        raise _ShapeError(f"dimension {d} out of range for a {rank}-D tensor")
    return d + rank if d < 0 else d


def _fold2(v: tuple, fill: int) -> tuple[int, int]:
    """Per-spatial-dim values -> the IR's (h, w): 1-D (v, fill); 3-D (v0*v1, v2) for kernels."""
    if len(v) == 1:
        return (v[0], fill)
    return (v[-2], v[-1])


def _broadcast(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    if len(shapes) == 1:
        return shapes[0]
    rank = max(len(s) for s in shapes)
    out = [1] * rank
    for s in shapes:
        off = rank - len(s)
        for i, d in enumerate(s):
            o = out[off + i]
            if o == 1:
                out[off + i] = d
            elif d != 1 and d != o:
                raise _ShapeError(f"shapes {' and '.join(str(list(x)) for x in shapes)} do not broadcast")
    return tuple(out)


def _first_line(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    return s[0] if s else type(e).__name__


@contextlib.contextmanager
def _quiet_stdout() -> Iterator[None]:
    """Standard output silenced at the file descriptor while torch exports: on a failed export its C++ logger
    prints the whole TorchScript graph to stdout (its ONNX log is always on), where it would corrupt the
    user's output (``annette estimate --json``) with lines that say nothing the caller does not report."""
    if sys.stdout is not None:
        sys.stdout.flush()  # (what Python wrote so far goes out first)
    fd = 1  # (the C++ stream writes to the process's descriptor, whatever sys.stdout is)
    try:
        saved = os.dup(fd)
    except OSError:  # (no standard output: nothing to protect)
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), fd)
            try:
                yield
            finally:
                os.dup2(saved, fd)
    finally:
        os.close(saved)
