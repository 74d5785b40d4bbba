"""Tensors print with their real rank: a token tensor (1, 65, 64) reads 1x65x64 in the layer table (not the
folded NCHW columns 1x65x64x1), through both front ends; 4-D tensors print as before."""

from __future__ import annotations

import io

import onnx
import pytest
import torch
import torch.nn as nn

import annette_torch as at


class Tokens(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(64)
        self.fc = nn.Linear(64, 128)
        self.head = nn.Linear(128, 10)

    def forward(self, x):
        return self.head(self.fc(self.ln(x)).mean(1))


class Image(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x)).flatten(1)


def _onnx(model: nn.Module, shape: tuple[int, ...]) -> onnx.ModelProto:
    buf = io.BytesIO()
    torch.onnx.export(model.eval(), (torch.zeros(shape),), buf, dynamo=False, opset_version=17)
    return onnx.load_from_string(buf.getvalue())


def _shapes(model, shape=None) -> list[tuple[str, str, str]]:
    return [(r["type"], r["input_shape"], r["output_shape"]) for r in at.estimate(model, "ncs2", shape).table()]


@pytest.mark.parametrize("front", ["fx", "onnx"])
def test_rank_3_tensors_print_with_three_dims(front):
    m = Tokens().eval()
    rows = _shapes(m, (1, 65, 64)) if front == "fx" else _shapes(_onnx(m, (1, 65, 64)))
    by_type = {}
    for t, i, o in rows:
        by_type.setdefault(t, (i, o))
    assert by_type["Input"] == ("1x65x64", "1x65x64")
    assert by_type["LayerNorm"] == ("1x65x64", "1x65x64")
    assert by_type["FullyConnected"] == ("1x65x64", "1x65x128")
    assert by_type["ReduceMean"] == ("1x65x128", "1x128")
    assert rows[-1][2] == "1x10"
    assert not any(o.endswith("x1") and o.count("x") == 3 for _, _, o in rows)


@pytest.mark.parametrize("front", ["fx", "onnx"])
def test_image_tensors_keep_their_four_dims(front):
    m = Image().eval()
    rows = _shapes(m, (1, 3, 16, 16)) if front == "fx" else _shapes(_onnx(m, (1, 3, 16, 16)))
    assert rows[0] == ("Input", "1x3x16x16", "1x3x16x16")
    assert ("1x3x16x16", "1x8x16x16") in [(i, o) for _, i, o in rows]
    assert rows[-1][2] == "1x2048"
