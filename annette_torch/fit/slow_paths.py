"""A runtime's price of slow-path work (a platform's ``slow_ns``), measured as micro-kernel pairs.

Each pair runs two graphs of equal shapes, one taking the runtime's slow path and one not:
* masked attention (logits plus a mask, softmax, times V): a mask of -100 makes the masked probabilities
  subnormal (x86 CPUs take a microcode assist per operation on them unless the runtime flushes them), a mask
  of 0 does not;
* a transpose that moves several axes including the innermost (a block partition's) against one that moves
  a single axis (a generic element-by-element copy against a runtime's strided row copies).
The ONNX front end counts the slow units of the slow graph (`ir.SLOW_UNITS`), so the price per unit is the
time difference over the units, per type.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..ir import LayerType

__all__ = ["masked_attention", "transpose", "measure_slow_ns", "SHAPES", "TRANSPOSES"]

#: (windows x heads, tokens, head dim) of the measured pairs: shifted windows of 7 x 7 tokens (Swin's), head dims
#: 32 and 64. The price per multiply-add holds across head dims (x86 assists once per broadcast FMA, 16 lanes)
#: but not across token counts (196 tokens: a quarter of it), so the pairs use the windows masks come with.
SHAPES = ((64 * 3, 49, 32), (32 * 3, 49, 64))
#: share of the logits the mask offsets (a border window of a shifted-window attention is about this)
MASKED = 0.5
#: which layer type a profiled node's time counts for (node types of ONNX Runtime and OpenVINO, lower case)
_KIND = {"softmax": LayerType.SOFTMAX, "matmul": LayerType.MATMUL, "fusedmatmul": LayerType.MATMUL,
         "transpose": LayerType.TRANSPOSE}
#: (input shape, slow permutation, fast permutation) of the transpose pairs: MaxViT-style grid / block partitions
TRANSPOSES = (((64, 7, 8, 7, 8), (2, 4, 1, 3, 0), (1, 2, 3, 4, 0)),
              ((8, 8, 7, 7, 64), (4, 0, 2, 1, 3), (4, 0, 1, 2, 3)))


def masked_attention(batch: int, tokens: int, dim: int, mask_value: float, seed: int = 0) -> onnx.ModelProto:
    """``Softmax(logits + mask) @ V`` with ``MASKED`` of the mask set to ``mask_value`` (0: the fast twin)."""
    rng = np.random.default_rng(seed)
    mask = np.where(rng.random((batch, tokens, tokens)) < MASKED, mask_value, 0.0).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Add", ["logits", "mask"], ["masked"], name="mask_add"),
         helper.make_node("Softmax", ["masked"], ["probs"], axis=-1, name="softmax"),
         helper.make_node("MatMul", ["probs", "v"], ["y"], name="context")],
        "masked_attention",
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, tokens, tokens]),
         helper.make_tensor_value_info("v", TensorProto.FLOAT, [batch, tokens, dim])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, tokens, dim])],
        [numpy_helper.from_array(mask, "mask")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def transpose(shape: tuple[int, ...], perm: tuple[int, ...]) -> onnx.ModelProto:
    """One Transpose of a ``shape`` input by ``perm``."""
    out = [shape[p] for p in perm]
    g = helper.make_graph([helper.make_node("Transpose", ["x"], ["y"], perm=list(perm), name="transpose")],
                          "transpose", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _times(runner: Any, model: onnx.ModelProto, iterations: int) -> dict[LayerType, float]:
    """Median ms per layer type (Softmax, MatMul, Transpose) of one profiled run of ``model``."""
    recs = runner.parse(runner.profile(runner.prepare(model), iterations=iterations, warmup=3))
    out = {t: 0.0 for t in set(_KIND.values())}
    for r in recs:
        t = _KIND.get(r.node_type.lower())
        if t is not None and r.status == "executed":
            out[t] += r.median_ms
    return out


def measure_slow_ns(runner: Any, iterations: int = 20, rounds: int = 3,
                    progress: Callable[[str], None] | None = None) -> dict[str, float]:
    """``{"MatMul": ns, "Softmax": ns, "Transpose": ns}``: the runtime's extra time per slow unit, from the pairs
    of `SHAPES` and `TRANSPOSES` (each graph's fastest of ``rounds`` alternating runs; the price is the pairs'
    total extra time over their total units, never below 0)."""
    from ..frontends.onnx import from_onnx

    pairs = [(masked_attention(*s, mask_value=-100.0), masked_attention(*s, mask_value=0.0), f"attention {s}")
             for s in SHAPES]
    pairs += [(transpose(s, slow), transpose(s, fast), f"transpose {s}") for s, slow, fast in TRANSPOSES]
    extra = {t: 0.0 for t in (LayerType.SOFTMAX, LayerType.MATMUL, LayerType.TRANSPOSE)}
    units = {t: 0 for t in extra}
    for slow, fast, what in pairs:
        net = from_onnx(slow, name="slow_path")
        for t in extra:
            units[t] += int(net.cols["slow"][net.types == t].sum())
        best: dict[str, dict[LayerType, float]] = {"slow": {}, "fast": {}}
        for _ in range(rounds):
            for key, model in (("slow", slow), ("fast", fast)):
                for t, ms in _times(runner, model, iterations).items():
                    best[key][t] = min(best[key].get(t, np.inf), ms)
        for t in extra:
            extra[t] += best["slow"][t] - best["fast"][t]
        if progress:
            progress(f"slow paths, {what}: " + ", ".join(f"{t.label} {best['slow'][t] - best['fast'][t]:+.3f} ms"
                                                          for t in extra if best["slow"][t] or best["fast"][t]))
    return {t.label: round(max(extra[t], 0.0) / units[t] * 1e6, 4) if units[t] else 0.0 for t in extra}
