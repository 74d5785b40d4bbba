"""Speed of the ONNX front end on a deep network: `from_onnx` against reading the same file with ``onnx.load``.

Usage: python benchmarks/onnx_load_speed.py [--depth 150] [--channels 64] [--size 28]

Writes a chain of ``--depth`` 3x3 convolutions, each followed by a ReLU (``--channels`` channels on a
``--size`` x ``--size`` map; 150 x 64 channels: ~5.5 M weights, 22 MB), then prints the best time of each
over several rounds and their ratio: ``from_onnx`` parses the same file and converts it, so a ratio near 1
means the conversion costs little beside reading the file. Absolute times drift on shared machines; the
ratio much less.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from annette_torch.frontends.onnx import from_onnx

from timing import best_of  # noqa: E402  (benchmarks/timing.py)


def conv_chain(depth: int, channels: int, size: int) -> onnx.ModelProto:
    """``depth`` x (Conv 3x3 with padding 1, Relu) on a ``[1, channels, size, size]`` input, random weights."""
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal((channels, channels, 3, 3), dtype=np.float32), f"w{k}")
               for k in range(depth)]
    names = ["x"] + [f"relu{k}" for k in range(depth)]
    nodes = []
    for k in range(depth):
        nodes += [helper.make_node("Conv", [names[k], f"w{k}"], [f"conv{k}"], name=f"conv{k}", pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"conv{k}"], [names[k + 1]], name=names[k + 1])]
    graph = helper.make_graph(
        nodes, "conv_chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
        [helper.make_tensor_value_info(names[-1], TensorProto.FLOAT, None)], initializer=weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depth", type=int, default=150)
    ap.add_argument("--channels", type=int, default=64)
    ap.add_argument("--size", type=int, default=28)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "chain.onnx"
        onnx.save(conv_chain(args.depth, args.channels, args.size), str(path))
        net = from_onnx(path)  # warm-up: imports and caches
        t_read = best_of(lambda: onnx.load(str(path)), repeat=5, number=3)
        t_convert = best_of(lambda: from_onnx(path), repeat=5, number=3)
        mb = path.stat().st_size / 1e6
    print(f"{args.depth} Conv + ReLU pairs, {args.channels} channels, {args.size}x{args.size}: {len(net)} layers, "
          f"{mb:.1f} MB file")
    print(f"onnx.load (reading the file):  {t_read * 1e3:8.1f} ms")
    print(f"from_onnx (read + convert):    {t_convert * 1e3:8.1f} ms")
    print(f"ratio from_onnx / onnx.load:   {t_convert / t_read:8.2f}")


if __name__ == "__main__":
    main()
