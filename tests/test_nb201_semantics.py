"""NAS-Bench-201 cell semantics: what a runtime computes of edges fed by zero nodes and of edges whose result
never reaches the output (``pruned`` / ``reach`` / ``all``); a ``none`` edge is a layer only as eager PyTorch runs the
benchmark's code (``eager``: a multiply by zero)."""

from __future__ import annotations

import numpy as np
import pytest

import annette_torch as at
from annette_torch.ir import LayerType
from annette_torch.platform import Platform
from annette_torch.search.spaces import nb201

T = LayerType
# the fixed skeleton: stem conv 3x3, two reduction blocks (two 3x3 convs and a 1x1 shortcut each)
SKELETON_CONV3, SKELETON_CONV1 = 5, 2
CELLS = 15
# node 1 = conv3(x) never reaches the output, node 2 is zero, node 3 = conv1(zero)
DEAD_AND_ZERO = "|nor_conv_3x3~0|+|none~0|none~1|+|none~0|none~1|nor_conv_1x1~2|"
# node 1 zero; node 2 = conv3(x) + conv1(zero); node 3 = pool(node 2)
ZERO_FED = "|none~0|+|nor_conv_3x3~0|nor_conv_1x1~1|+|none~0|none~1|avg_pool_3x3~2|"
# node 1 = conv1(x) is dead code; node 3 = conv3(x) + skip(skip(x))
DEAD = "|nor_conv_1x1~0|+|skip_connect~0|none~1|+|nor_conv_3x3~0|none~1|skip_connect~2|"


def _convs(net, k: int) -> int:
    return int(np.sum((net.types == int(T.CONV)) & (net.cols["kh"] == k)))


def _per_cell(arch: str, semantics: str) -> tuple[int, int, int, int, int]:
    """(3x3 convs, 1x1 convs, 3x3 pools, adds, multiplies by zero) per cell of the network built with
    ``semantics``."""
    net = nb201.build_network(arch, semantics=semantics)
    pools = int(np.sum((net.types == int(T.AVG_POOL)) & (net.cols["kh"] == 3)))
    adds = int(np.sum(net.types == int(T.ADD))) - 2  # the reduction blocks' residual adds
    zeros = int(np.sum(net.types == int(T.MUL)))
    c3, c1 = _convs(net, 3) - SKELETON_CONV3, _convs(net, 1) - SKELETON_CONV1
    assert c3 % CELLS == c1 % CELLS == pools % CELLS == adds % CELLS == zeros % CELLS == 0
    return c3 // CELLS, c1 // CELLS, pools // CELLS, adds // CELLS, zeros // CELLS


@pytest.mark.parametrize("arch, semantics, expect", [
    (ZERO_FED, "pruned", (1, 0, 1, 0, 0)),
    (ZERO_FED, "reach", (1, 1, 1, 1, 0)),  # the 1x1 conv on the zero node is computed and added
    (ZERO_FED, "all", (1, 1, 1, 1, 0)),
    (DEAD, "pruned", (1, 0, 0, 1, 0)),
    (DEAD, "reach", (1, 0, 0, 1, 0)),
    (DEAD, "all", (1, 1, 0, 1, 0)),  # dead code computed: the dead 1x1 conv too
    # eager PyTorch: both none edges multiply by zero, and every node sums all its inputs
    (DEAD, "eager", (1, 1, 0, 3, 2)),
    (DEAD_AND_ZERO, "eager", (1, 1, 0, 3, 4)),  # never a constant: the dead and the zero-fed conv both run
])
def test_each_semantics_builds_the_layers_its_runtime_computes(arch, semantics, expect):
    assert _per_cell(arch, semantics) == expect


@pytest.mark.parametrize("semantics", ["pruned", "reach", "all"])
def test_a_cell_whose_output_cannot_depend_on_the_input_is_a_constant_network(semantics):
    for arch in (DEAD_AND_ZERO, nb201.arch_string(["none"] * 6)):
        edges, constant = nb201.cell_edges(arch, semantics)
        net = nb201.build_network(arch, semantics=semantics)
        assert constant and edges == () and len(net) == 1 and net.types[0] == int(T.INPUT)


def test_only_eager_makes_a_none_edge_a_layer_and_it_is_never_constant():
    rng = np.random.default_rng(3)
    archs = [nb201.index_to_arch(int(i)) for i in rng.choice(nb201.NUM_ARCHS, 40, replace=False)]
    archs.append(nb201.arch_string(["none"] * 6))
    for sem in nb201.SEMANTICS:
        for arch, net in zip(archs, nb201.build_networks(archs, semantics=sem)):
            edges, constant = nb201.cell_edges(arch, sem)
            nones = sum(op == "none" for op, _, _ in edges)
            assert int(np.sum(net.types == int(T.MUL))) == CELLS * nones, (sem, arch)
            if sem == "eager" or (sem == "eager-folded" and not constant):  # the Zero op, x.mul(0.), per none edge
                assert not constant and edges == tuple(nb201.parse(arch))
            else:
                assert nones == 0
    # the all-none cell computes the skeleton alone when everything is computed
    net = nb201.build_network(nb201.arch_string(["none"] * 6), semantics="eager")
    assert _convs(net, 3) == SKELETON_CONV3 and _convs(net, 1) == SKELETON_CONV1


def test_eager_folded_is_eager_but_a_constant_where_the_output_cannot_depend_on_the_input():
    for arch in nb201.all_arch_strings()[::53]:
        edges, constant = nb201.cell_edges(arch, "eager-folded")
        assert constant == nb201.cell_edges(arch, "reach")[1]
        assert edges == (() if constant else nb201.cell_edges(arch, "eager")[0])


def test_semantics_only_add_edges_and_pruned_is_the_default():
    archs = nb201.all_arch_strings()[::97]
    for arch in archs:
        pruned, c0 = nb201.cell_edges(arch, "pruned")
        reach, c1 = nb201.cell_edges(arch, "reach")
        assert pruned == nb201.live_edges(arch) == nb201.cell_edges(arch)[0] and c0 == (not pruned)
        assert c1 == c0  # the output depends on the input alike
        every, c2 = nb201.cell_edges(arch, "all")
        assert set(pruned) <= set(reach) <= set(every) <= set(nb201.cell_edges(arch, "eager")[0]) and c2 == c0
    a = nb201.build_network(DEAD)
    b = nb201.build_network(DEAD, semantics="pruned")
    assert a.names == b.names and np.array_equal(a.edges, b.edges)


def test_an_unknown_semantics_is_one_clear_error():
    with pytest.raises(ValueError, match="pruned, reach, all, eager, eager-folded"):
        nb201.build_network(DEAD, semantics="lazy")
    with pytest.raises(ValueError, match="pruned, reach, all"):
        nb201.cell_edges(DEAD, "folded")


def test_estimate_all_follows_the_semantics_an_adapted_platform_records():
    base = at.load_platform("ort-cpu")
    d = base.to_dict()
    d["adapted"] = {"from": "ort-cpu", "nb201_semantics": "all"}
    adapted = Platform.from_dict(d, "ort-cpu-all")
    assert nb201.platform_semantics(base) == "pruned" and nb201.platform_semantics(adapted) == "all"
    i = nb201.arch_to_index(DEAD)
    expect = at.estimate(nb201.build_network(DEAD, semantics="all"), adapted).latency_ms
    assert nb201.estimate_all(adapted)[i] == pytest.approx(expect, rel=1e-9)
    assert nb201.estimate_all(adapted, semantics="pruned")[i] < expect
