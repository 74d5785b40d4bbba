"""The model zoo: parameter counts match the published figures, every model runs, traces and names errors.

Models are built on the meta device for the cheap checks (parameter counts, fx tracing, output shapes):
no memory is allocated and no arithmetic is done. A few small models also run for real on the CPU.
"""

from __future__ import annotations

import io

import pytest
import torch
import torch.fx

from annette_torch import zoo
from annette_torch.errors import ModelLoadError

# published parameter counts (ImageNet, 1000 classes; googlenet without the auxiliary heads)
PARAMS = {
    "resnet18": 11.69e6,
    "resnet34": 21.80e6,
    "resnet50": 25.56e6,
    "mobilenet_v2": 3.50e6,
    "mobilenet_v3_small": 2.54e6,
    "vgg11": 132.86e6,
    "vgg16": 138.36e6,
    "vgg19": 143.67e6,
    "squeezenet1_1": 1.24e6,
    "densenet121": 7.98e6,
    "efficientnet_b0": 5.29e6,
    "mnasnet0_5": 2.22e6,
    "shufflenet_v2_x0_5": 1.37e6,
    "googlenet": 6.62e6,
    "alexnet": 61.10e6,
    "regnetx_400mf": 5.50e6,
    # the Vitis AI model zoo's TF-slim / TPU networks (TF-slim and TPU READMEs, papers)
    "resnet_v1_50": 25.56e6,
    "resnet_v1_101": 44.55e6,
    "resnet_v2_50": 25.6e6,
    "inception_v1": 6.6e6,
    "inception_v3": 23.85e6,
    "mobilenet_v1_1.0": 4.2e6,
    "mobilenet_v1_0.5": 1.32e6,
    "mobilenet_v2_1.4": 6.06e6,
    "efficientnet_lite0": 4.7e6,
    "efficientnet_edgetpu_s": 5.4e6,
    "mobilenet_edgetpu_1.0": 4.0e6,
}
#: published figures rounded to one decimal place (4.0M) allow more than the default 2 %
TOLERANCE = {"mobilenet_edgetpu_1.0": 0.03}
REAL_FORWARD = ["tiny_cnn", "tiny_resnet", "resnet18", "mobilenet_v2", "shufflenet_v2_x0_5", "efficientnet_b0"]


def _meta(name: str) -> torch.nn.Module:
    with torch.device("meta"):
        return zoo.get(name)


def _n_params(m: torch.nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


def test_registry_is_consistent():
    assert set(zoo.ZOO) == set(zoo.INPUT_SHAPES)
    from annette_torch.zoo_modern import MODERN
    assert set(PARAMS) | {"tiny_cnn", "tiny_resnet"} | set(MODERN) == set(zoo.ZOO)  # (modern: test_zoo_modern)
    assert zoo.INPUT_SHAPES["resnet18"] == (1, 3, 224, 224)
    assert zoo.INPUT_SHAPES["tiny_cnn"] == zoo.INPUT_SHAPES["tiny_resnet"] == (1, 3, 32, 32)
    assert zoo.names() == sorted(zoo.ZOO)


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_parameter_count_matches_published(name):
    n = _n_params(_meta(name))
    assert n == pytest.approx(PARAMS[name], rel=TOLERANCE.get(name, 0.02)), f"{name}: {n:,} parameters"


@pytest.mark.parametrize("name", sorted(set(zoo.ZOO) - set(__import__("annette_torch.zoo_modern").zoo_modern.MODERN)))
def test_traces_and_gives_logits(name):
    m = _meta(name)
    assert not m.training
    gm = torch.fx.symbolic_trace(m)
    assert any(node.op == "call_module" for node in gm.graph.nodes)
    x = torch.empty(zoo.INPUT_SHAPES[name], device="meta")
    with torch.no_grad():
        assert m(x).shape == (1, 1000)
        assert gm(x).shape == (1, 1000)


@pytest.mark.slow
@pytest.mark.parametrize("name", REAL_FORWARD)
def test_real_forward_agrees_with_the_traced_network(name):
    """A real forward pass gives finite logits of the shape the traced IR ends in, and the IR holds one
    convolution per nn.Conv2d and one fully connected layer per nn.Linear of the model."""
    import numpy as np

    from annette_torch import trace
    from annette_torch.ir import CONV_TYPES, LayerType

    torch.manual_seed(0)
    m = zoo.get(name)
    x = torch.randn(zoo.INPUT_SHAPES[name])
    with torch.no_grad():
        y = m(x)
    assert y.shape == (1, 1000) and torch.isfinite(y).all()
    net = trace(m, tuple(x.shape))
    sinks = sorted(set(range(len(net))) - set(net.edges[:, 0].tolist()))
    assert len(sinks) == 1 and net.out_elems[sinks[0]] == y.numel()
    modules = list(m.modules())
    assert np.isin(net.types, list(CONV_TYPES)).sum() == sum(isinstance(mod, torch.nn.Conv2d) for mod in modules)
    assert (net.types == LayerType.FULLY_CONNECTED).sum() == sum(isinstance(mod, torch.nn.Linear) for mod in modules)


def test_num_classes_is_a_parameter():
    m = zoo.get("tiny_resnet", num_classes=10)
    with torch.no_grad():
        assert m(torch.randn(2, 3, 32, 32)).shape == (2, 10)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("name", ["tiny_cnn", "tiny_resnet", "shufflenet_v2_x0_5"])
def test_onnx_export(name):
    onnx = pytest.importorskip("onnx")
    m = zoo.get(name)
    f = io.BytesIO()
    torch.onnx.export(m, torch.randn(zoo.INPUT_SHAPES[name]), f, dynamo=False, opset_version=17)
    model = onnx.load_from_string(f.getvalue())
    onnx.checker.check_model(model)
    assert any(n.op_type == "Conv" for n in model.graph.node)


def test_unknown_name_raises_model_load_error_listing_names():
    with pytest.raises(ModelLoadError) as exc:
        zoo.get("nope")
    assert "nope" in str(exc.value)
    assert "resnet18" in str(exc.value) and "tiny_cnn" in str(exc.value)
    with pytest.raises(ModelLoadError):
        zoo.get(None)  # type: ignore[arg-type]
