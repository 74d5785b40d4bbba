"""The ONNX front end reads what the pinned torch's own exporter writes by default (``torch.onnx.export(...,
dynamo=True)``: torch.export, other op patterns than the TorchScript exporter, opset 18) for architectures of the
2020s: no ``Unknown`` layer, and the same latency as the torch.fx trace of the module within 3%."""

from __future__ import annotations

import logging
import warnings

import pytest
import torch

import annette_torch as at
from annette_torch import zoo_modern

pytestmark = pytest.mark.slow  # (an export takes 2-10 s)

#: modern zoo networks at a small input
#: (shifted-window attention: two stages of two blocks; depthwise convolutions, LayerNorm, GELU)
CASES = {"swin": lambda: zoo_modern.SwinTransformer(dim=48, depths=(2, 2), heads=(2, 4), window=4),
         "convnext_t": zoo_modern.MODERN["convnext_t"]}


@pytest.mark.parametrize("name", list(CASES))
def test_the_default_exporter_reads_without_unknown_layers_and_as_traced(name):
    model = CASES[name]().eval()
    shape = (1, 3, 64, 64)
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)  # (its notes on torchvision ops it cannot find)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proto = torch.onnx.export(model, (torch.randn(*shape),), dynamo=True, opset_version=18).model_proto
    exported, traced = at.from_onnx(proto), at.trace(model, shape)
    assert exported.unknown_ops() == []
    assert at.estimate(exported, "ort-cpu").latency_ms == pytest.approx(at.estimate(traced, "ort-cpu").latency_ms,
                                                                          rel=0.03)
