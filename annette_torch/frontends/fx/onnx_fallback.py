"""The fx front end's fallback for modules torch.fx cannot trace: an ONNX export (run on zeros, at small
probe sizes where the input is large) read by the ONNX front end."""

from __future__ import annotations

import io
import logging
import os
import warnings
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn as nn

from ...errors import ModelLoadError
from ...ir import Network
from .values import _first_line, _prod, _quiet_stdout

log = logging.getLogger(__package__)  # one logger for the whole fx front end


#: Input dimensions (after batch and channels) up to this size are exported as they are; larger ones are
#: exported at two small probe sizes and ONNX shape inference scales the graph back to the full size.
_PROBE_ABOVE = 256
#: A full-size forward pass is refused when its activations would take more than this share of free memory.
_MEMORY_SHARE = 0.5
#: Activation bytes of a forward pass per input byte, assumed where no probe export measured them (a CNN's
#: feature maps add up to several times its input: 9x for a conv-relu-conv network).
_ACTIVATIONS_PER_INPUT = 8.0
#: When ``forward`` branches on tensors, the probes' network is replaced by a full-size export (a branch may
#: test the input's shape) if that pass's activations stay below this many bytes (and fit in memory).
_FULL_FOR_BRANCHES_MAX_BYTES = 4 * 2**30


def _onnx_fallback(module: nn.Module, shapes: list[tuple[int, ...]], name: str, fx_error: str) -> Network:
    """The network of a module torch.fx cannot trace, from its ONNX export (run on zeros).

    Inputs no larger than `_PROBE_ABOVE` after batch and channels are exported as they are. Larger ones are
    exported at two small probe sizes (congruent to the real size modulo 64) with those dimensions dynamic,
    and ONNX shape inference fixes the real size; when the two probes give different networks (shapes baked
    into the trace) the full size is exported, unless its activations cannot fit in memory. When ``forward``
    branches on tensors at the probe sizes, the full size is exported too (a branch such as
    ``if x.shape[-1] > 300`` goes another way at the real size than at the probes), unless that pass needs
    more than `_FULL_FOR_BRANCHES_MAX_BYTES` or does not fit in memory; the warning then says so.
    """
    cls = type(module).__name__
    log.warning("trace(%s): torch.fx cannot trace forward() (%s); exporting to ONNX instead", cls, fx_error)
    branches: set[str] = set()
    probed_at: list[tuple[int, ...]] | None = None  # the probe shapes whose branches the network kept
    try:
        probes = _probe_shapes(shapes)
        net = None
        if probes is not None:
            net, need_bytes = _probed_network(module, shapes, probes, branches)
            if net is None:
                _check_memory(cls, shapes, need_bytes)
            elif branches:
                act = float(net.out_elems.sum()) * 4.0  # the probes' network is at the full size
                if act <= _FULL_FOR_BRANCHES_MAX_BYTES and _room_for(shapes, act):
                    log.debug("forward() branches on tensors at the probe sizes; exporting at the full size")
                    net = None
                    branches.clear()
                else:
                    probed_at = probes[0]
        if net is None:
            net = _exported_network(module, shapes, shapes, (), branches)
    except _NoRoom:
        raise
    except Exception as e:  # noqa: BLE001 - report both failures as one user-facing error
        raise ModelLoadError(
            f"cannot convert {cls}: torch.fx failed ({fx_error}) and the ONNX fallback failed too "
            f"({type(e).__name__}: {_first_line(e)}). Export the model yourself with torch.onnx.export and "
            f"load the file with annette_torch.from_onnx, or make forward() traceable by torch.fx "
            f"(no Python control flow on tensor values)") from e
    if branches:
        where = "; ".join(sorted(branches))
        real = " and ".join(_dims(s) for s in shapes)
        if probed_at is None:
            log.warning("trace(%s): forward() has Python control flow on tensors (%s); the ONNX export at the "
                        "real input shape %s fixed each branch to the path all-zero inputs of that shape take: "
                        "branches on the input's shape follow this shape, branches on tensor values may go "
                        "another way for other inputs", cls, where, real)
        else:
            log.warning("trace(%s): forward() has Python control flow on tensors (%s); the ONNX export ran on "
                        "all-zero inputs at the probe shape %s (a pass at the real shape %s is too large) and "
                        "fixed each branch to their path: a branch on the input's shape may go another way at "
                        "the real shape, one on tensor values for other inputs", cls, where,
                        " and ".join(_dims(s) for s in probed_at), real)
    net.name = name
    return net


def _probe_shapes(shapes: list[tuple[int, ...]]) -> list[list[tuple[int, ...]]] | None:
    """Two smaller stand-ins for ``shapes`` (dims after batch and channels above `_PROBE_ABOVE` shrunk to
    128..255, keeping their remainder modulo 64), or None when every input is small enough as it is."""
    if all(d <= _PROBE_ABOVE for s in shapes for d in s[2:]):
        return None
    return [[tuple(d if i < 2 or d <= _PROBE_ABOVE else base + d % 64 for i, d in enumerate(s)) for s in shapes]
            for base in (128, 192)]


def _probed_network(module: nn.Module, shapes: list[tuple[int, ...]], probes: list[list[tuple[int, ...]]],
                    branches: set[str]) -> tuple[Network | None, float | None]:
    """The network at ``shapes`` from exports at the probe shapes, or (None, activation bytes at full size as
    far as the probes tell) when the probes fail or disagree."""
    try:  # the exporter's own input names (a static export at the first probe), so that layers keep them
        names = _export(module, probes[0], None, None, branches)[1]
    except Exception as e:
        log.debug("ONNX export at probe shapes %s failed: %s: %s", probes[0], type(e).__name__, _first_line(e))
        return None, None
    if len(names) != len(shapes):  # an unused forward argument: names and shapes would not pair up
        return None, None
    nets: list[Network] = []
    for probe in probes:
        dynamic = [tuple(i for i, (d, p) in enumerate(zip(s, ps)) if d != p) for s, ps in zip(shapes, probe)]
        try:
            nets.append(_exported_network(module, probe, shapes, dynamic, branches, names))
        except Exception as e:
            log.debug("ONNX export at probe shapes %s failed: %s: %s", probe, type(e).__name__, _first_line(e))
            return None, None
    if _same_network(nets[0], nets[1]):
        return nets[0], None
    log.debug("the probe exports differ (sizes baked into the trace); exporting at the full size")
    return None, max(float(n.out_elems.sum()) for n in nets) * 4.0


def _exported_network(module: nn.Module, export_shapes: list[tuple[int, ...]], shapes: list[tuple[int, ...]],
                      dynamic: Sequence[tuple[int, ...]], branches: set[str],
                      names: list[str] | None = None) -> Network:
    """Export on zeros of ``export_shapes`` (``dynamic`` dims per input, named ``names``, left symbolic) and
    convert at ``shapes``."""
    from ..onnx import from_onnx

    axes = {n: {i: f"{n}_d{i}" for i in dims} for n, dims in zip(names or [], dynamic) if dims}
    proto, inputs = _export(module, export_shapes, names if axes else None, axes or None, branches)
    if axes:
        _set_input_shapes(proto, inputs, shapes)
    return from_onnx(proto)


def _export(module: nn.Module, export_shapes: list[tuple[int, ...]], names: list[str] | None,
            axes: dict | None, branches: set[str]) -> tuple[Any, list[str]]:
    """The ONNX export on zeros of ``export_shapes`` and its graph input names; where ``forward`` branched on
    a tensor value is added to ``branches``."""
    import onnx

    buf = io.BytesIO()
    args = tuple(torch.zeros(s) for s in export_shapes)
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught, _quiet_stdout():
        warnings.simplefilter("always")
        torch.onnx.export(module, args, buf, dynamo=False, opset_version=17, input_names=names,
                          dynamic_axes=axes)
    for w in caught:
        if issubclass(w.category, torch.jit.TracerWarning) and "Python boolean" in str(w.message):
            branches.add(f"{os.path.basename(w.filename)}:{w.lineno}")
    proto = onnx.load_from_string(buf.getvalue())
    inits = {t.name for t in proto.graph.initializer}
    return proto, [vi.name for vi in proto.graph.input if vi.name not in inits]


def _set_input_shapes(proto: Any, names: list[str], shapes: list[tuple[int, ...]]) -> None:
    """Give the graph inputs their full shapes and drop shapes recorded for the probe sizes."""
    g = proto.graph
    by_name = dict(zip(names, shapes))  # graph inputs in forward's order
    for vi in g.input:
        if vi.name in by_name:
            tt = vi.type.tensor_type
            tt.ClearField("shape")
            for d in by_name[vi.name]:
                tt.shape.dim.add().dim_value = int(d)
    del g.value_info[:]
    for out in g.output:
        if out.type.HasField("tensor_type"):
            out.type.tensor_type.ClearField("shape")


def _same_network(a: Network, b: Network) -> bool:
    return (a.names == b.names and np.array_equal(a.types, b.types) and np.array_equal(a.edges, b.edges)
            and all(np.array_equal(a.cols[c], b.cols[c]) for c in a.cols) and a.attrs == b.attrs)


class _NoRoom(ModelLoadError):
    """A full-size forward pass whose activations cannot fit in memory (reported as it is)."""


def _free_memory_bytes() -> float | None:
    """Memory available to this process (Linux ``MemAvailable``), or None where it cannot be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024.0
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _dims(shape: Sequence[int]) -> str:
    """``(1, 3, 512, 512)`` -> ``1x3x512x512``."""
    return "x".join(str(int(d)) for d in shape)


def _need_bytes(shapes: list[tuple[int, ...]], need_bytes: float | None) -> float:
    """Bytes a full-size forward pass needs: its inputs plus the activations (estimated where unknown)."""
    input_bytes = 4.0 * sum(_prod(s) for s in shapes)
    return input_bytes + need_bytes if need_bytes else _ACTIVATIONS_PER_INPUT * input_bytes


def _room_for(shapes: list[tuple[int, ...]], need_bytes: float | None) -> bool:
    """Whether a full-size forward pass fits in `_MEMORY_SHARE` of the free memory (True where unknown)."""
    free = _free_memory_bytes()
    return free is None or _need_bytes(shapes, need_bytes) <= _MEMORY_SHARE * free


def _check_memory(cls: str, shapes: list[tuple[int, ...]], need_bytes: float | None) -> None:
    """Refuse a full-size forward pass whose activations cannot fit in memory (one error line)."""
    need = _need_bytes(shapes, need_bytes)
    free = _free_memory_bytes()
    if free is not None and need > _MEMORY_SHARE * free:
        shown = " and ".join(str(tuple(s)) for s in shapes)
        raise _NoRoom(
            f"cannot convert {cls} at input shape {shown}: torch.fx cannot trace it, the ONNX export at small "
            f"probe sizes did not carry over to this size, and a forward pass at this size needs at least "
            f"{need / 2**30:.1f} GiB of activations ({free / 2**30:.1f} GiB free). Use a smaller input shape, "
            "or export the model to ONNX yourself (torch.onnx.export with dynamic_axes) and load the file")
