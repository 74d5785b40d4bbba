"""ONNX front end: torch-exported and hand-built ONNX models -> Network (types, shapes, ops, errors)."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import onnx
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

from annette_torch.errors import ModelLoadError
from annette_torch.frontends.onnx import from_onnx
from annette_torch.ir import LayerType as T

try:
    from layer_helpers import only, types_of
except ImportError:  # tests/ imported as a package
    from tests.layer_helpers import only, types_of

LOGGER = "annette_torch.frontends.onnx"


def export(model: nn.Module, x: torch.Tensor, path, **kw) -> str:
    """Export an eval-mode module with the TorchScript exporter (opset 17) and return the file path."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model.eval(), x, str(path), dynamo=False, opset_version=17, **kw)
    return str(path)


def make_model(nodes, inputs, outputs, initializers=(), opset=17, extra_opsets=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    opsets = [helper.make_opsetid("", opset), *(helper.make_opsetid(d, v) for d, v in extra_opsets)]
    return helper.make_model(graph, opset_imports=opsets)


def vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


# --------------------------------------------------------------------------------------------------
# torch-exported models


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.grp = nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=2, bias=False)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        x = F.relu(self.conv(x))
        x = F.relu(self.dw(x))
        x = self.pool(self.grp(x))          # 16x16 -> 8x8 -> 4x4
        return self.fc(torch.flatten(x, 1))


def test_small_cnn_types_shapes_ops(tmp_path):
    net = from_onnx(export(SmallCNN(), torch.randn(1, 3, 16, 16), tmp_path / "cnn.onnx"))
    assert net.name == "cnn"
    assert types_of(net) == [T.INPUT, T.CONV, T.RELU, T.DEPTHWISE_CONV, T.RELU, T.GROUP_CONV, T.MAX_POOL,
                             T.FLATTEN, T.FULLY_CONNECTED]
    # a chain: every layer feeds the next
    assert net.edges.tolist() == [[i, i + 1] for i in range(len(net) - 1)]

    conv = only(net, T.CONV)
    assert net.in_shape(conv) == (1, 3, 16, 16) and net.out_shape(conv) == (1, 8, 16, 16)
    assert (net.kh[conv], net.kw[conv], net.sh[conv], net.ph[conv], net.pw[conv]) == (3, 3, 1, 2, 2)
    assert net.ops[conv] == 2 * (8 * 16 * 16) * 3 * 3 * 3

    dw = only(net, T.DEPTHWISE_CONV)
    assert net.groups[dw] == 8
    assert net.ops[dw] == 2 * (8 * 16 * 16) * 1 * 3 * 3

    grp = only(net, T.GROUP_CONV)
    assert net.out_shape(grp) == (1, 16, 8, 8) and net.groups[grp] == 2 and net.sh[grp] == 2
    assert net.ops[grp] == 2 * (16 * 8 * 8) * (8 / 2) * 3 * 3

    pool = only(net, T.MAX_POOL)
    assert net.out_shape(pool) == (1, 16, 4, 4) and (net.kh[pool], net.sh[pool]) == (2, 2)
    assert net.ops[pool] == 2 * (16 * 4 * 4) * 2 * 2  # 2 ops per window element (ir.layer_ops)

    fc = only(net, T.FULLY_CONNECTED)
    assert net.in_shape(fc) == (1, 256, 1, 1) and net.out_shape(fc) == (1, 10, 1, 1)
    assert net.ops[fc] == 2 * 10 * 256
    assert net.weights[fc] == 256 * 10
    assert net.attr("op", fc) == "Gemm"


def test_conv_bn_eval_is_folded_but_standalone_bn_is_kept(tmp_path):
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, bias=False)
            self.bn = nn.BatchNorm2d(4)
            self.bn2 = nn.BatchNorm2d(4)

        def forward(self, x):
            y = self.bn(self.conv(x))       # folded into the Conv by the exporter in eval mode
            return self.bn2(torch.relu(y))  # nothing to fold into: stays a BatchNormalization

    net = from_onnx(export(M(), torch.randn(1, 3, 8, 8), tmp_path / "bn.onnx"))
    assert types_of(net) == [T.INPUT, T.CONV, T.RELU, T.BATCH_NORM]
    bn = only(net, T.BATCH_NORM)
    assert net.out_shape(bn) == (1, 4, 6, 6) and net.ops[bn] == 2 * 4 * 6 * 6


def test_pools_global_pool_and_reduce_mean(tmp_path):
    class M(nn.Module):
        def forward(self, x):
            a = F.avg_pool2d(x, 3, stride=2, padding=1)          # 4x4 output
            g = F.adaptive_avg_pool2d(a, 1)                       # GlobalAveragePool
            m = a.mean((2, 3), keepdim=True)                      # ReduceMean over H, W
            r = x.mean(1)                                         # ReduceMean over channels
            return g + m, r

    net = from_onnx(export(M(), torch.randn(1, 6, 8, 8), tmp_path / "pool.onnx"))
    avg = only(net, T.AVG_POOL)
    assert net.out_shape(avg) == (1, 6, 4, 4)
    assert (net.kh[avg], net.kw[avg], net.sh[avg], net.ph[avg]) == (3, 3, 2, 2)
    assert net.ops[avg] == 2 * (6 * 4 * 4) * 9
    gps = [i for i, t in enumerate(types_of(net)) if t == T.GLOBAL_POOL]
    assert sorted(net.attr("op", i) for i in gps) == ["GlobalAveragePool", "ReduceMean"]
    for i in gps:
        assert net.in_shape(i) == (1, 6, 4, 4) and net.out_shape(i) == (1, 6, 1, 1)
        assert net.ops[i] == 2 * 6 * 4 * 4
        assert net.attr("pool", i) == "avg"
    rm = only(net, T.REDUCE_MEAN)
    assert net.out_shape(rm) == (1, 8, 8, 1)
    add = only(net, T.ADD)
    assert sorted(net.parents(add)) == sorted(gps)


def test_matmul_shapes_keep_ops_exact(tmp_path):
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(16, 32)

        def forward(self, x):                          # x: [2, 5, 16]
            y = self.fc(x)                             # MatMul (constant weight) + Add (bias)
            return torch.matmul(y, y.transpose(1, 2))  # [2, 5, 32] x [2, 32, 5] -> [2, 5, 5]

    net = from_onnx(export(M(), torch.randn(2, 5, 16), tmp_path / "mm.onnx"))
    fc = only(net, T.FULLY_CONNECTED)
    assert net.attr("op", fc) == "MatMul"
    assert (net.c_in[fc], net.c_out[fc]) == (16, 32)
    assert net.in_shape(fc) == (2, 16, 5, 1) and net.out_shape(fc) == (2, 32, 5, 1)
    assert net.ops[fc] == 2 * (2 * 5 * 32) * 16
    assert net.weights[fc] == 16 * 32
    mm = only(net, T.MATMUL)
    assert net.c_in[mm] == 32 and net.out_elems[mm] == 2 * 5 * 5
    assert net.ops[mm] == 2 * (2 * 5 * 5) * 32
    assert len(net.parents(mm)) == 2


def test_conv1d_and_conv_transpose(tmp_path):
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1 = nn.Conv1d(4, 8, 3)
            self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)

        def forward(self, x, y):
            return self.c1(x), self.up(y)

    path = export(M(), (torch.randn(1, 4, 20), torch.randn(1, 8, 8, 8)), tmp_path / "ct.onnx")
    net = from_onnx(path)
    assert types_of(net).count(T.INPUT) == 2
    c1 = only(net, T.CONV)
    assert net.out_shape(c1) == (1, 8, 18, 1) and (net.kh[c1], net.kw[c1]) == (3, 1)
    assert net.ops[c1] == 2 * (8 * 18) * 4 * 3
    up = only(net, T.CONV_TRANSPOSE)
    assert net.out_shape(up) == (1, 4, 16, 16) and (net.kh[up], net.sh[up], net.ph[up]) == (2, 2, 0)
    assert net.ops[up] == 2 * (8 * 8) * 8 * 4 * 2 * 2


def test_clip_0_6_is_relu6_other_clip_is_clip(tmp_path):
    class M(nn.Module):
        def forward(self, x):
            return F.relu6(x), torch.clamp(x, 0, 4), F.hardtanh(x, 0.0, 6.0)

    net = from_onnx(export(M(), torch.randn(1, 3, 4, 4), tmp_path / "clip.onnx"))
    assert types_of(net).count(T.RELU6) == 2
    clip = only(net, T.CLIP)
    assert (net.attr("clip_min", clip), net.attr("clip_max", clip)) == (0.0, 4.0)


def test_clip_attributes_of_old_opsets():
    nodes = [helper.make_node("Clip", ["x"], ["a"], name="six", min=0.0, max=6.0),
             helper.make_node("Clip", ["a"], ["y"], name="one", min=-1.0, max=1.0)]
    model = make_model(nodes, [vi("x", [1, 3, 4, 4])], [vi("y", [1, 3, 4, 4])], opset=6)
    net = from_onnx(model, name="old")
    assert net.name == "old"
    assert types_of(net) == [T.INPUT, T.RELU6, T.CLIP]


def test_unsupported_op_is_one_unknown_layer_and_one_warning(caplog):
    nodes = [helper.make_node("Shrink", ["x"], ["a"], name="shrink", lambd=0.5),  # not in the front end's op table
             helper.make_node("Relu", ["a"], ["y"], name="relu")]
    model = make_model(nodes, [vi("x", [1, 3, 4, 4])], [vi("y", [1, 3, 4, 4])])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        net = from_onnx(model)
    assert types_of(net) == [T.INPUT, T.UNKNOWN, T.RELU]
    unk = only(net, T.UNKNOWN)
    assert net.attr("op", unk) == "Shrink" and net.unknown_ops() == ["Shrink"]
    assert net.in_shape(unk) == net.out_shape(unk) == (1, 3, 4, 4)
    records = [r for r in caplog.records if r.name == LOGGER]
    assert len(records) == 1 and records[0].levelno == logging.WARNING
    assert "Shrink" in records[0].getMessage()


def test_supported_model_logs_nothing(tmp_path, caplog):
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        from_onnx(export(SmallCNN(), torch.randn(1, 3, 16, 16), tmp_path / "cnn.onnx"))
    assert not [r for r in caplog.records if r.name == LOGGER and r.levelno >= logging.WARNING]


def test_custom_op_without_shape_inference_gets_input_shape(caplog):
    nodes = [helper.make_node("MyOp", ["x"], ["a"], name="mine", domain="my.domain"),
             helper.make_node("Relu", ["a"], ["y"], name="relu")]
    model = make_model(nodes, [vi("x", [1, 3, 4, 4])], [vi("y", None)], extra_opsets=[("my.domain", 1)])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        net = from_onnx(model)
    assert types_of(net) == [T.INPUT, T.UNKNOWN, T.RELU]
    assert net.attr("op", 1) == "my.domain.MyOp"
    assert net.out_shape(1) == net.out_shape(2) == (1, 3, 4, 4)  # inference rerun past the guess
    records = [r for r in caplog.records if r.name == LOGGER]
    assert len(records) == 1 and "'mine'" in records[0].getMessage()
    assert "input shape" in records[0].getMessage()


def test_identity_and_constants_are_not_layers():
    # x [3, 4] -> Identity -> MatMul with Transpose(w) (constant-folded, [4, 8]) -> Add of a Constant node
    w = numpy_helper.from_array(np.ones((8, 4), np.float32), "w")
    bias = numpy_helper.from_array(np.full((1, 8), 2, np.float32))
    nodes = [helper.make_node("Identity", ["x"], ["xi"], name="id"),
             helper.make_node("Constant", [], ["c"], name="const", value=bias),
             helper.make_node("Transpose", ["w"], ["wt"], name="wt", perm=[1, 0]),
             helper.make_node("MatMul", ["xi", "wt"], ["m"], name="fc"),
             helper.make_node("Add", ["m", "c"], ["y"], name="bias")]
    model = make_model(nodes, [vi("x", [3, 4])], [vi("y", [3, 8])], initializers=[w])
    net = from_onnx(model)
    # Identity connected through, constants are no edges, and the bias Add is the fully connected layer's
    assert net.names == ["x", "fc"]
    assert types_of(net) == [T.INPUT, T.FULLY_CONNECTED]
    assert net.edges.tolist() == [[0, 1]]
    assert (net.n[1], net.c_in[1], net.c_out[1]) == (3, 4, 8)
    assert net.ops[1] == 2 * 3 * 8 * 4


@pytest.mark.parametrize("const_shape, folded", [([8], True), ([1, 1, 8], True), ([5, 8], False), ([2, 5, 1], False)])
def test_an_add_folds_into_the_linear_layer_only_when_it_is_a_bias(const_shape, folded):
    """A constant varying along the features only is a bias (torch's nn.Linear on tokens exports MatMul + Add);
    a positional table or a per-token constant is an Add layer of its own, as is a bias whose MatMul output has
    another reader."""
    w = numpy_helper.from_array(np.ones((4, 8), np.float32), "w")
    c = numpy_helper.from_array(np.ones(const_shape, np.float32), "c")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="fc"),
             helper.make_node("Add", ["c", "m"], ["y"], name="add")]
    net = from_onnx(make_model(nodes, [vi("x", [2, 5, 4])], [vi("y", [2, 5, 8])], initializers=[w, c]))
    assert ("add" not in net.names) == folded
    nodes.append(helper.make_node("Relu", ["m"], ["r"], name="other_reader"))
    net = from_onnx(make_model(nodes, [vi("x", [2, 5, 4])], [vi("y", [2, 5, 8]), vi("r", [2, 5, 8])],
                               initializers=[w, c]))
    assert "add" in net.names


def test_big_constant_node_weight_is_a_weight():
    # weights stored as a (large) Constant node instead of an initializer
    wt = numpy_helper.from_array(np.zeros((128, 64), np.float32))
    nodes = [helper.make_node("Constant", [], ["w"], value=wt),
             helper.make_node("MatMul", ["x", "w"], ["y"], name="fc")]
    net = from_onnx(make_model(nodes, [vi("x", [2, 128])], [vi("y", [2, 64])]))
    assert types_of(net) == [T.INPUT, T.FULLY_CONNECTED]
    assert net.weights[1] == 128 * 64 and net.ops[1] == 2 * 2 * 64 * 128


def test_initializer_listed_as_graph_input_is_a_weight(tmp_path):
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1])]
    model = make_model(nodes, [vi("x", [1, 3, 5, 5]), vi("w", [4, 3, 3, 3])], [vi("y", None)], initializers=[w])
    model.ir_version = 3  # old models list initializers as inputs
    net = from_onnx(model)
    assert types_of(net) == [T.INPUT, T.CONV] and net.names[0] == "x"
    assert net.out_shape(1) == (1, 4, 5, 5)


def test_auto_pad_same_is_derived_from_the_output_shape():
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv", auto_pad="SAME_UPPER", strides=[2, 2])]
    net = from_onnx(make_model(nodes, [vi("x", [1, 3, 8, 8])], [vi("y", None)], initializers=[w]))
    assert net.out_shape(1) == (1, 4, 4, 4)
    assert (net.ph[1], net.pw[1]) == (1, 1)  # (4-1)*2 + 3 - 8


def test_external_data_weights_are_not_needed(tmp_path):
    proto = onnx.load(export(SmallCNN(), torch.randn(1, 3, 16, 16), tmp_path / "cnn.onnx"))
    onnx.save(proto, str(tmp_path / "ext.onnx"), save_as_external_data=True, location="ext.data", size_threshold=0)
    net, ref = from_onnx(tmp_path / "ext.onnx"), from_onnx(proto)
    assert net.type_labels() == ref.type_labels()
    assert np.array_equal(net.ops, ref.ops) and net.total_weights == ref.total_weights


# --------------------------------------------------------------------------------------------------
# bad inputs


def test_missing_file(tmp_path):
    with pytest.raises(ModelLoadError, match="not found"):
        from_onnx(tmp_path / "nope.onnx")


def test_truncated_file(tmp_path):
    path = export(SmallCNN(), torch.randn(1, 3, 16, 16), tmp_path / "cnn.onnx")
    data = open(path, "rb").read()
    bad = tmp_path / "half.onnx"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelLoadError):
        from_onnx(bad)


@pytest.mark.parametrize("content", [b"", b"this is not an onnx model\n"])
def test_not_an_onnx_model(tmp_path, content):
    bad = tmp_path / "x.onnx"
    bad.write_bytes(content)
    with pytest.raises(ModelLoadError):
        from_onnx(bad)


def test_dynamic_batch_needs_input_shape(tmp_path):
    path = export(SmallCNN(), torch.randn(1, 3, 16, 16), tmp_path / "dyn.onnx", input_names=["x"],
                  dynamic_axes={"x": {0: "batch"}})
    with pytest.raises(ModelLoadError, match=r"static input shape, e\.g\. input_shape=\(1, 3, 16, 16\)"):
        from_onnx(path)
    net = from_onnx(path, input_shape=(4, 3, 16, 16))
    assert net.out_shape(0) == (4, 3, 16, 16)
    assert net.out_shape(len(net) - 1) == (4, 10, 1, 1)
    fc = only(net, T.FULLY_CONNECTED)
    assert net.ops[fc] == 2 * 4 * 10 * 256
    with pytest.raises(ModelLoadError, match="dimensions"):
        from_onnx(path, input_shape=(4, 3, 16))


def test_front_ends_take_model_input_shape_name_in_that_order(tmp_path):
    """``from_onnx(model, input_shape, name)`` and ``trace(module, input_shape, name)``, positionally."""
    from annette_torch.frontends.fx import trace

    path = export(SmallCNN(), torch.randn(1, 3, 16, 16), tmp_path / "dyn.onnx", input_names=["x"],
                  dynamic_axes={"x": {0: "batch"}})
    net = from_onnx(path, (2, 3, 16, 16), "cnn")
    assert net.name == "cnn" and net.out_shape(0) == (2, 3, 16, 16)
    traced = trace(SmallCNN(), (2, 3, 16, 16), "cnn")
    assert traced.name == "cnn" and traced.out_shape(0) == (2, 3, 16, 16)


def test_dynamic_export_shape_arithmetic_is_folded(tmp_path):
    """Shape -> Gather -> Div -> Slice chains of a dynamic export become constants once the shape is given."""
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3)
            self.fc = nn.Linear(2 * 6 * 6, 5)

        def forward(self, x):
            y = torch.chunk(self.conv(x), 2, 1)[1]
            return self.fc(y.reshape(y.size(0), -1))

    path = export(M(), torch.randn(1, 3, 8, 8), tmp_path / "dyn.onnx", input_names=["x"],
                  dynamic_axes={"x": {0: "batch"}})
    assert {"Shape", "Gather", "Div"} <= {n.op_type for n in onnx.load(path).graph.node}
    net = from_onnx(path, input_shape=(3, 3, 8, 8))
    assert types_of(net) == [T.INPUT, T.CONV, T.SLICE, T.RESHAPE, T.FULLY_CONNECTED]
    assert net.out_shape(2) == (3, 2, 6, 6) and net.out_shape(3) == (3, 72, 1, 1)
    assert net.edges.tolist() == [[0, 1], [1, 2], [2, 3], [3, 4]]
    assert net.ops[4] == 2 * 3 * 5 * 72


def test_input_shape_overrides_static_shape_without_mutating_proto(tmp_path):
    proto = onnx.load(export(SmallCNN(), torch.randn(1, 3, 16, 16), tmp_path / "cnn.onnx"))
    before = proto.SerializeToString()
    net = from_onnx(proto, input_shape=(2, 3, 16, 16))
    assert net.out_shape(0) == (2, 3, 16, 16) and net.out_shape(len(net) - 1) == (2, 10, 1, 1)
    assert proto.SerializeToString() == before


def test_input_shape_conflicting_with_a_static_dimension_names_both(tmp_path):
    path = export(SmallCNN(), torch.randn(1, 3, 16, 16), tmp_path / "cnn.onnx", input_names=["x"])
    with pytest.raises(ModelLoadError) as e:
        from_onnx(path, input_shape=(1, 5, 16, 16))
    msg = str(e.value)
    assert "[1, 5, 16, 16]" in msg and "[1, 3, 16, 16]" in msg and "dimension 1" in msg and "'x'" in msg
    with pytest.raises(ModelLoadError, match="dimension 3 is 32"):
        from_onnx(path, input_shape=(1, 3, 16, 32))


def test_input_shape_conflict_in_the_cli_is_one_line(tmp_path, capsys):
    from annette_torch.cli.app import main

    path = export(SmallCNN(), torch.randn(1, 3, 16, 16), tmp_path / "cnn.onnx")
    assert main(["estimate", path, "--input-shape", "1,5,32,32"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("annette: error:") and "[1, 5, 32, 32]" in err[0] \
        and "[1, 3, 16, 16]" in err[0]
    assert main(["estimate", path, "--input-shape", "2,3,16,16"]) == 0  # the batch may change


def test_input_shape_beyond_int64_is_an_error():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [1, "n"])], [vi("y", None)])
    with pytest.raises(ModelLoadError, match="2\\^50"):
        from_onnx(model, input_shape=(1, 2**70))
    with pytest.raises(ModelLoadError, match="positive"):
        from_onnx(model, input_shape=(1, -3))


def test_huge_static_dimension_is_an_error():
    model = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [2**40, 2**40])],
                       [vi("y", None)])
    with pytest.raises(ModelLoadError, match="2\\^50"):
        from_onnx(model)


def test_non_utf8_names_are_one_error():
    model = make_model([helper.make_node("Relu", ["x"], ["y"], name="NODEMARK")], [vi("x", [1, 3])],
                       [vi("y", None)])
    model.graph.name = "GRAPHMARK"
    data = model.SerializeToString()
    for marker, what in ((b"GRAPHMARK", "graph name"), (b"NODEMARK", "node #0")):
        bad = onnx.load_from_string(data.replace(marker, b"\xff" * len(marker)))
        with pytest.raises(ModelLoadError, match=what):
            from_onnx(bad)


def test_supported_node_without_inferable_shape_names_the_node():
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"], name="my_reshape")]
    model = make_model(nodes, [vi("x", [1, 12]), vi("s", [2], TensorProto.INT64)], [vi("y", None)])
    with pytest.raises(ModelLoadError, match="my_reshape"):
        from_onnx(model)


def test_wrong_argument_type():
    with pytest.raises(TypeError):
        from_onnx(42)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------
# a deep network (its conversion speed: benchmarks/onnx_load_speed.py)


def test_deep_network_converts(tmp_path):
    """150 convolutions with ~5.5 M weights, read from a file: every layer and its ops."""
    c, layers = 64, 150
    inits, nodes, prev = [], [], "x"
    rng = np.random.default_rng(0)
    for i in range(layers):
        inits.append(numpy_helper.from_array(rng.standard_normal((c, c, 3, 3), dtype=np.float32), f"w{i}"))
        nodes.append(helper.make_node("Conv", [prev, f"w{i}"], [f"c{i}"], name=f"conv{i}", pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"))
        prev = f"r{i}"
    model = make_model(nodes, [vi("x", [1, c, 28, 28])], [vi(prev, None)], initializers=inits)
    path = tmp_path / "deep.onnx"
    onnx.save(model, str(path))
    net = from_onnx(path)
    assert len(net) == 2 * layers + 1
    assert net.total_ops == pytest.approx(layers * (2 * c * 28 * 28 * c * 9 + c * 28 * 28))
