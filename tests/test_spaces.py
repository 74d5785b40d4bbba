"""Search spaces: encodings, validity rules, and direct IR builders against traced torch builders."""

from __future__ import annotations

import collections
import csv
import itertools
from pathlib import Path

import numpy as np
import pytest

from annette_torch import trace
from annette_torch.errors import AnnetteError
from annette_torch.ir import INT_COLUMNS, LayerType, Network
from annette_torch.search.spaces import mbv2, nb101, nb201
from annette_torch.search.spaces.registry import SPACES, MBV2Space, NB101Space, NB201Space, Space, get_space


def layer_multiset(net: Network) -> list[tuple]:
    """Sorted (type, in shape, out shape, kernel/stride/padding/..., ops) per layer: order-free IR content."""
    return sorted((int(net.types[i]),) + tuple(int(net.cols[c][i]) for c in INT_COLUMNS) + (float(net.ops[i]),)
                  for i in range(len(net)))


def assert_same_ir(direct: Network, traced: Network) -> None:
    assert layer_multiset(direct) == layer_multiset(traced)
    assert direct.total_ops == traced.total_ops
    assert len(direct.edges) == len(traced.edges)
    # stronger: the same names with the same rows, and the same edges between named layers
    rows = lambda n: {nm: (int(n.types[i]), *(int(n.cols[c][i]) for c in INT_COLUMNS))  # noqa: E731
                      for i, nm in enumerate(n.names)}
    assert rows(direct) == rows(traced)
    edges = lambda n: collections.Counter((n.names[a], n.names[b]) for a, b in n.edges)  # noqa: E731
    assert edges(direct) == edges(traced)


# ------------------------------------------------------------------------------------------------------
# NAS-Bench-201

BEST = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|"
NB201_CASES = [
    "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|",
    BEST,
    nb201.arch_string(["none"] * 6),  # zero output: a constant network, its input alone
    nb201.arch_string(["avg_pool_3x3"] * 6),
    nb201.arch_string(["nor_conv_1x1"] * 6),
    "|skip_connect~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|",  # identity cell: no layers
    "|none~0|+|nor_conv_1x1~0|nor_conv_3x3~1|+|skip_connect~0|skip_connect~1|skip_connect~2|",  # node 1 zero
    "|nor_conv_3x3~0|+|none~0|none~1|+|nor_conv_1x1~0|none~1|none~2|",  # node 1 and 2 dead (dropped)
    "|skip_connect~0|+|skip_connect~0|skip_connect~1|+|none~0|none~1|avg_pool_3x3~2|",  # x + x
    "|nor_conv_3x3~0|+|none~0|none~1|+|none~0|none~1|nor_conv_3x3~2|",  # node 2 zero -> output zero
]


OFFICIAL_INDEX_CSV = Path(__file__).resolve().parents[2] / "shared" / "nb201" / "nb201_official_index.csv"
#: (index, arch) pairs of NAS-Bench-201's own index (its API, NATS-Bench topology files, HELP's str_arch2idx)
NB201_OFFICIAL_PAIRS = [
    (0, "|avg_pool_3x3~0|+|nor_conv_1x1~0|skip_connect~1|+|nor_conv_1x1~0|skip_connect~1|skip_connect~2|"),
    (1, "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|"),
    (2, "|avg_pool_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|avg_pool_3x3~0|avg_pool_3x3~1|avg_pool_3x3~2|"),
    (3, "|avg_pool_3x3~0|+|skip_connect~0|none~1|+|none~0|none~1|skip_connect~2|"),
    (1651, "|none~0|+|none~0|none~1|+|none~0|none~1|none~2|"),
    (9930, BEST),
    (15624, "|nor_conv_1x1~0|+|none~0|nor_conv_1x1~1|+|none~0|nor_conv_1x1~1|nor_conv_1x1~2|"),
]


def test_nb201_enumeration_and_index_round_trip():
    archs = nb201.all_arch_strings()
    assert len(archs) == len(set(archs)) == nb201.NUM_ARCHS == 15625
    assert [nb201.arch_to_index(a) for a in archs] == list(range(nb201.NUM_ARCHS))
    assert all(nb201.index_to_arch(i) == a for i, a in enumerate(archs))
    # arch_code is a dense key of its own, not the benchmark's index
    assert sorted(nb201.arch_code(a) for a in archs) == list(range(nb201.NUM_ARCHS))
    assert nb201.arch_code(nb201.arch_string(["none"] * 6)) == 0
    # parse / arch_string round trip, edge order as in the string
    for a in archs[::97]:
        edges = nb201.parse(a)
        assert [(s, d) for _, s, d in edges] == list(nb201.EDGES)
        assert nb201.arch_string([op for op, _, _ in edges]) == a
    # entries of a node in another order name the same cell
    swapped = "|nor_conv_3x3~0|+|avg_pool_3x3~1|nor_conv_3x3~0|+|skip_connect~2|nor_conv_3x3~1|skip_connect~0|"
    assert nb201.arch_to_index(swapped) == nb201.arch_to_index(NB201_CASES[0])


@pytest.mark.parametrize("index, arch", NB201_OFFICIAL_PAIRS)
def test_nb201_official_index_pairs(index, arch):
    assert nb201.index_to_arch(index) == arch
    assert nb201.arch_to_index(arch) == index
    assert nb201.all_arch_strings()[index] == arch


@pytest.mark.skipif(not OFFICIAL_INDEX_CSV.is_file(), reason="../shared/nb201 (the benchmark's index table) absent")
def test_nb201_index_equals_the_benchmark_table():
    with OFFICIAL_INDEX_CSV.open(newline="") as f:
        table = {int(r["nb201_index"]): r["arch_str"] for r in csv.DictReader(f)}
    assert sorted(table) == list(range(nb201.NUM_ARCHS))
    archs = nb201.all_arch_strings()
    assert [table[i] for i in range(nb201.NUM_ARCHS)] == archs
    assert all(nb201.arch_to_index(a) == i for i, a in table.items())


@pytest.mark.parametrize("bad, match", [
    ("", "3 node groups"),
    ("|nor_conv_3x3~0|+|nor_conv_3x3~0|", "3 node groups"),
    ("nor_conv_3x3~0|+|none~0|none~1|+|none~0|none~1|none~2|", "start and end with '|'"),
    ("|conv5x5~0|+|none~0|none~1|+|none~0|none~1|none~2|", "unknown op 'conv5x5'"),
    ("|none~1|+|none~0|none~1|+|none~0|none~1|none~2|", "cannot take input from node 1"),
    ("|none~0|+|none~0|none~0|+|none~0|none~1|none~2|", "given twice"),
    ("|none~0|+|none~0|+|none~0|none~1|none~2|", "node 2 lacks input"),
    ("|none~0|+|none~0|none~1|+|none~0|none~1|", "lacks input"),
    ("|none0|+|none~0|none~1|+|none~0|none~1|none~2|", "not 'op~source'"),
])
def test_nb201_parse_errors(bad, match):
    with pytest.raises(ValueError, match=match):
        nb201.parse(bad)
    with pytest.raises(ValueError):
        nb201.build_network(bad)


def test_nb201_index_errors():
    for bad in (-1, nb201.NUM_ARCHS, 2.5, "3"):
        with pytest.raises(ValueError, match="index"):
            nb201.index_to_arch(bad)  # type: ignore[arg-type]


def test_nb201_live_edges():
    assert nb201.live_edges(nb201.arch_string(["none"] * 6)) == ()
    assert nb201.live_edges(NB201_CASES[5]) == (("skip_connect", 0, 3),)
    # node 1 is zero: its outgoing convolution edges vanish
    assert nb201.live_edges(NB201_CASES[6]) == (("nor_conv_1x1", 0, 2), ("skip_connect", 0, 3),
                                                ("skip_connect", 2, 3))
    # node 1 does not reach the output: dead code
    assert nb201.live_edges(NB201_CASES[7]) == (("nor_conv_1x1", 0, 3),)
    assert nb201.live_edges(nb201.parse(BEST)) == nb201.live_edges(BEST)
    assert len({nb201.live_edges(i) for i in nb201.all_arch_strings()}) == 9445


@pytest.mark.parametrize("arch", NB201_CASES)
def test_nb201_direct_equals_traced(arch):
    direct = nb201.build_network(arch)
    traced = trace(nb201.build_module(arch), nb201.INPUT_SHAPE)
    assert_same_ir(direct, traced)


def test_nb201_small_configuration_and_batch():
    arch = NB201_CASES[0]
    assert_same_ir(nb201.build_network(arch, C=8, N=2, num_classes=100),
                   trace(nb201.build_module(arch, C=8, N=2, num_classes=100), nb201.INPUT_SHAPE))
    batch = nb201.build_networks(NB201_CASES)
    for arch, net in zip(NB201_CASES, batch):
        one = nb201.build_network(arch)
        assert net.names == one.names and net.name == arch
        assert np.array_equal(net.types, one.types) and np.array_equal(net.edges, one.edges)
        assert all(np.array_equal(net.cols[c], one.cols[c]) for c in INT_COLUMNS)


def test_nb201_structure():
    net = nb201.build_network(nb201.arch_string(["avg_pool_3x3"] * 6))
    # stem (input, conv, BN) + 15 cells of 6 pools and 3 adds + 2 x 9 reduction layers + 5 head layers
    assert len(net) == 3 + 15 * 9 + 18 + 5
    assert net.out_shape(net.index("classifier")) == (1, 10, 1, 1)
    assert net.out_shape(net.index("cells.16.edges.3<-2.op")) == (1, 64, 8, 8)
    # parameter counts of the torch builder match the benchmark's range (0.073 - 1.531 M)
    params = lambda arch: sum(p.numel() for p in nb201.build_module(arch).parameters())  # noqa: E731
    assert params(nb201.arch_string(["none"] * 6)) == 73306
    assert params(nb201.arch_string(["nor_conv_3x3"] * 6)) == 1531546


ZERO_OUTPUT = [
    nb201.arch_string(["none"] * 6),
    "|nor_conv_3x3~0|+|none~0|none~1|+|none~0|none~1|nor_conv_3x3~2|",  # node 2 zero -> output zero
    "|nor_conv_3x3~0|+|nor_conv_1x1~0|avg_pool_3x3~1|+|none~0|none~1|none~2|",  # node 3 has no input
]


@pytest.mark.parametrize("arch", ZERO_OUTPUT)
def test_nb201_none_edges_are_no_layers_and_a_zero_cell_is_a_constant_network(arch):
    assert nb201.live_edges(arch) == ()
    net = nb201.build_network(arch)
    # every cell outputs zeros, so the head sees zeros: nothing depends on the input, nothing is computed
    assert len(net) == 1 and net.names == ["inputs"] and int(net.types[0]) == int(LayerType.INPUT)
    assert net.total_ops == 0 and len(net.edges) == 0
    assert not any(int(t) == int(LayerType.MUL) for t in net.types)


def test_nb201_none_edges_add_no_layer_to_a_live_cell():
    # 3 live edges (conv, conv, skip) of 6: the 3 none edges leave no trace
    arch = "|nor_conv_3x3~0|+|none~0|nor_conv_1x1~1|+|none~0|none~1|skip_connect~2|"
    net = nb201.build_network(arch)
    cell = [n for n in net.names if n.startswith("cells.0.")]
    assert sorted(cell) == sorted(f"cells.0.edges.{e}.op.{k}" for e in ("1<-0", "2<-1") for k in range(3))
    assert not any(int(t) == int(LayerType.MUL) for t in net.types)


@pytest.mark.parametrize("arch", ZERO_OUTPUT[:2])
def test_nb201_zero_output_module_computes_what_the_full_network_computes(arch):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    m = nb201.build_module(arch).eval()
    for p in m.parameters():  # non-trivial BN so that the head's constant is not just the classifier bias
        torch.nn.init.uniform_(p, 0.5, 1.5)
    x = torch.randn(2, *nb201.INPUT_SHAPE[1:])
    with torch.no_grad():
        short = m(x)
        m.zero = False  # the whole network: stem, reductions, cells that output zeros
        full = m(x)
    assert short.shape == (2, 10)
    assert torch.allclose(short, full)
    assert torch.allclose(short[0], short[1])  # the output does not depend on the input


@pytest.mark.parametrize("platform", ["zcu102-dnndk", "ort-cpu"])
def test_nb201_all_none_cell_estimates_below_cells_with_convolutions(platform):
    from annette_torch import estimate_many

    none = nb201.arch_string(["none"] * 6)
    archs = [none, "|nor_conv_1x1~0|+|none~0|skip_connect~1|+|none~0|none~1|skip_connect~2|",
             nb201.arch_string(["nor_conv_1x1"] * 6), nb201.arch_string(["nor_conv_3x3"] * 6)]
    ms = estimate_many(nb201.build_networks(archs), platform)
    assert ms[0] < ms[1:].min()
    # and below the identity cell, which still runs stem, reductions and head
    ident = "|skip_connect~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|"
    assert ms[0] < estimate_many(nb201.build_networks([ident]), platform)[0]


# ------------------------------------------------------------------------------------------------------
# NAS-Bench-101

I, O = nb101.INPUT, nb101.OUTPUT
C3, C1, MP = nb101.OPS
#: The Inception-like cell of the NB101 README.
README_MATRIX = np.array([[0, 1, 1, 1, 0, 1, 0],
                          [0, 0, 0, 0, 0, 0, 1],
                          [0, 0, 0, 0, 0, 0, 1],
                          [0, 0, 0, 0, 1, 0, 0],
                          [0, 0, 0, 0, 0, 0, 1],
                          [0, 0, 0, 0, 0, 0, 1],
                          [0, 0, 0, 0, 0, 0, 0]])
README_OPS = (I, C1, C3, C3, C3, MP, O)


def test_nb101_pruning():
    # vertex 2 feeds nothing and vertex 3 is fed by nothing: both pruned
    m = np.zeros((5, 5), int)
    m[0, 1] = m[1, 4] = m[0, 2] = m[3, 4] = 1
    spec = nb101.validate(m, (I, C3, C1, MP, O))
    assert spec.ops == (I, C3, O)
    assert spec.matrix.tolist() == [[0, 1, 0], [0, 0, 1], [0, 0, 0]]
    # output unreachable
    m = np.zeros((4, 4), int)
    m[0, 1] = m[2, 3] = 1
    assert nb101.prune(m, (I, C3, C3, O)) is None
    assert not nb101.is_valid(m, (I, C3, C3, O))
    # input straight to output is a valid 2-vertex cell
    assert nb101.validate([[0, 1], [0, 0]], (I, O)).ops == (I, O)
    assert nb101.is_valid(README_MATRIX, README_OPS)


@pytest.mark.parametrize("matrix, ops, match", [
    (np.zeros((3, 4)), (I, C3, O), "square"),
    (np.zeros((3, 3)), (I, O), "3x3 matrix but 2 ops"),
    ([[0, 1, 0], [1, 0, 1], [0, 0, 0]], (I, C3, O), "upper triangular"),
    ([[0, 2, 0], [0, 0, 1], [0, 0, 0]], (I, C3, O), "0 or 1"),
    (np.triu(np.ones((8, 8), int), 1), (I,) + (C3,) * 6 + (O,), "8 vertices, at most 7"),
    (np.triu(np.ones((7, 7), int), 1), (I,) + (C3,) * 5 + (O,), "21 edges"),
    ([[0, 1, 0], [0, 0, 1], [0, 0, 0]], (C3, C3, O), "first op"),
    ([[0, 1, 0], [0, 0, 1], [0, 0, 0]], (I, C3, C3), "last op"),
    ([[0, 1, 0], [0, 0, 1], [0, 0, 0]], (I, "conv5x5", O), "unknown interior op"),
    ([[0, 1, 0], [0, 0, 0], [0, 0, 0]], (I, C3, O), "not reachable"),
])
def test_nb101_invalid(matrix, ops, match):
    with pytest.raises(ValueError, match=match):
        nb101.validate(matrix, ops)
    assert not nb101.is_valid(matrix, ops)


def test_nb101_edge_limit_counts_after_pruning():
    m = np.triu(np.ones((7, 7), int), 1)  # 21 edges
    m[:, 6] = 0
    m[5, 6] = 1  # only vertex 5 feeds the output: still > 9 edges on paths
    assert not nb101.is_valid(m, (I,) + (C3,) * 5 + (O,))
    chain = np.eye(7, k=1, dtype=int)  # 6 edges
    assert nb101.is_valid(chain, (I,) + (C3,) * 5 + (O,))


def test_nb101_hash_isomorphism():
    h = nb101.spec_hash(README_MATRIX, README_OPS)
    # relabel interior vertices with every permutation that keeps the matrix upper triangular
    seen = 0
    for perm in itertools.permutations(range(1, 6)):
        p = [0, *perm, 6]
        m = README_MATRIX[np.ix_(p, p)]
        if np.tril(m).any():
            continue
        ops = tuple(README_OPS[i] for i in p)
        assert nb101.spec_hash(m, ops) == h
        assert nb101.build_network(m, ops, stem_channels=16).total_ops == \
            nb101.build_network(README_MATRIX, README_OPS, stem_channels=16).total_ops
        seen += 1
    assert seen > 1
    # a different op or edge changes the hash; pruned-away vertices do not
    assert nb101.spec_hash(README_MATRIX, (I, C3, C3, C3, C3, MP, O)) != h
    m = README_MATRIX.copy()
    m[0, 5], m[3, 5] = 0, 1  # the max pool reads vertex 3 instead of the input
    assert nb101.spec_hash(m, README_OPS) != h
    padded = np.zeros((7, 7), int)
    padded[0, 1] = padded[1, 6] = padded[2, 3] = 1  # vertices 2..5 dangling
    assert nb101.spec_hash(padded, (I, C3, C1, C1, MP, MP, O)) == nb101.spec_hash([[0, 1, 0], [0, 0, 1], [0, 0, 0]],
                                                                                 (I, C3, O))


def test_nb101_sample():
    specs = nb101.sample(30, np.random.default_rng(1))
    hashes = [nb101.spec_hash(*s) for s in specs]
    assert len(specs) == 30 and len(set(hashes)) == 30
    for s in specs:
        assert nb101.validate(*s).matrix.tolist() == s.matrix.tolist()  # valid and already pruned
        assert s.matrix.sum() <= nb101.MAX_EDGES
    assert [nb101.spec_hash(*s) for s in nb101.sample(5, 7)] == [nb101.spec_hash(*s) for s in nb101.sample(5, 7)]


def test_nb101_vertex_channels():
    # output fan-in of 4 vertices from 128 channels: 32 each; vertex 3 takes its successor's (vertex 4)
    assert nb101.compute_vertex_channels(128, 128, README_MATRIX) == [128, 32, 32, 32, 32, 32, 128]
    # 3 vertices feed the output: 43, 43, 42 (remainder to the first)
    m = np.zeros((5, 5), int)
    m[0, 1:4] = 1
    m[1:4, 4] = 1
    assert nb101.compute_vertex_channels(64, 128, m) == [64, 43, 43, 42, 128]


NB101_CASES = [(README_MATRIX, README_OPS), ([[0, 1], [0, 0]], (I, O))] + \
    [tuple(s) for s in nb101.sample(3, np.random.default_rng(3))]


@pytest.mark.parametrize("case", range(len(NB101_CASES)))
def test_nb101_direct_equals_traced(case):
    matrix, ops = NB101_CASES[case]
    assert_same_ir(nb101.build_network(matrix, ops, stem_channels=16),
                   trace(nb101.build_module(matrix, ops, stem_channels=16), nb101.INPUT_SHAPE))


def test_nb101_full_size_readme_cell():
    module = nb101.build_module(README_MATRIX, README_OPS)
    # the trainable-parameter count NB101 reports for this cell (its README example)
    assert sum(p.numel() for p in module.parameters()) == 2694282
    direct = nb101.build_network(README_MATRIX, README_OPS)
    assert_same_ir(direct, trace(module, nb101.INPUT_SHAPE))
    assert direct.out_shape(direct.index("cells.8.ops.vertex_5")) == (1, 128, 8, 8)  # 512 / 4 vertices


# ------------------------------------------------------------------------------------------------------
# MobileNetV2 / ProxylessNAS

def mbv2_choices(seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [str(rng.choice(b.ops)) for b in mbv2.BLOCKS]


MBV2_CASES = [[b.ops[0] for b in mbv2.BLOCKS], [b.ops[-1] for b in mbv2.BLOCKS], mbv2_choices(0)]


def test_mbv2_blocks():
    assert len(mbv2.BLOCKS) == 21
    assert [b.out_ch for b in mbv2.BLOCKS[:5]] == [24, 24, 24, 24, 40]
    assert mbv2.BLOCKS[0].in_ch == 16 and mbv2.BLOCKS[-1].out_ch == 320
    zero = [i for i, b in enumerate(mbv2.BLOCKS) if mbv2.ZERO in b.ops]
    assert zero == [i for i, b in enumerate(mbv2.BLOCKS) if b.residual] and len(zero) == 15
    assert 12 not in zero  # the first 96-channel block has stride 1 but changes channels
    assert mbv2.parse_op("mb7_e6") == (7, 6) and mbv2.parse_op("zero") is None
    for bad in ("mb4_e3", "mb3", "conv3x3", ""):
        with pytest.raises(ValueError, match="not 'zero'"):
            mbv2.parse_op(bad)
    with pytest.raises(ValueError, match="21 expected"):
        mbv2.build_network(["mb3_e3"] * 20)
    with pytest.raises(ValueError, match="block 0 .* does not allow 'zero'"):
        mbv2.build_network(["zero"] + ["mb3_e3"] * 20)


@pytest.mark.parametrize("case", range(len(MBV2_CASES)))
def test_mbv2_direct_equals_traced(case):
    choices = MBV2_CASES[case]
    assert_same_ir(mbv2.build_network(choices), trace(mbv2.build_module(choices), mbv2.INPUT_SHAPE))


def test_mbv2_small_resolution_and_blocks():
    choices = mbv2_choices(1)
    assert_same_ir(mbv2.build_network(choices, num_classes=10, resolution=64),
                   trace(mbv2.build_module(choices, num_classes=10), (1, 3, 64, 64)))
    net = mbv2.build_network(MBV2_CASES[0])
    assert net.out_shape(len(net) - 1) == (1, 1000, 1, 1)
    assert net.out_shape(net.index("feature_mix_layer.2")) == (1, 1280, 7, 7)


@pytest.mark.parametrize("case", range(len(MBV2_CASES)))
def test_mbv2_parts_add_up(case):
    choices = MBV2_CASES[case]
    full = mbv2.build_network(choices)
    parts = [mbv2.stem_network(), mbv2.head_network()] + [mbv2.block_network(i, op) for i, op in enumerate(choices)]
    assert sum(p.total_ops for p in parts) == full.total_ops
    assert sum(p.total_weights for p in parts) == full.total_weights
    # every part's layers (Input excluded) appear in the full network with the same shapes
    for p in parts:
        for i in range(1, len(p)):
            name = p.names[i]
            if name.startswith("add"):
                continue  # residual adds are numbered per network
            j = full.index(name)
            assert (p.in_shape(i), p.out_shape(i)) == (full.in_shape(j), full.out_shape(j))


def test_mbv2_block_network():
    net = mbv2.block_network(1, "mb5_e6")
    assert net.in_shape(0) == (1, 24, 56, 56) and net.summary()["Add"] == 1
    assert net.out_shape(net.index("blocks.1.conv.depth_conv.0")) == (1, 144, 56, 56)
    assert len(mbv2.block_network(1, "zero")) == 1
    assert (lambda n: n.out_shape(len(n) - 1))(mbv2.block_network(0, "mb3_e3")) == (1, 24, 56, 56)
    with pytest.raises(ValueError, match="does not allow 'zero'"):
        mbv2.block_network(0, "zero")
    with pytest.raises(ValueError, match="block index"):
        mbv2.block_network(21, "mb3_e3")


# ------------------------------------------------------------------------------------------------------
# registry: the adapters the Optuna searches use


def test_get_space_by_name_and_passes_custom_spaces_through():
    assert set(SPACES) == {"nb201", "nb101", "mbv2", "anb", "accel-nasbench", "vit", "hybrid"}
    for name, cls in (("nb201", NB201Space), ("NB101", NB101Space), ("mbv2", MBV2Space)):
        sp = get_space(name)
        assert type(sp) is cls and sp.name == name.lower() and isinstance(sp, Space)

    class Chain:
        name = "chain"

        def suggest(self, trial):
            return 1

        def network(self, arch):
            return nb201.build_network(nb201.index_to_arch(arch))

        def encode(self, arch):
            return str(arch)

        def decode(self, text):
            return int(text)

    custom = Chain()
    assert get_space(custom) is custom
    with pytest.raises(AnnetteError, match="is not a search space: it lacks suggest, network, encode"):
        get_space(object())
    with pytest.raises(AnnetteError, match="unknown search space 'nb999'"):
        get_space("nb999")


def test_adapter_keys():
    sp201 = get_space("nb201")
    # cells with equal live edges share one latency-cache key; the table key is the canonical arch string
    assert sp201.latency_key(NB201_CASES[7]) == sp201.latency_key(
        "|nor_conv_3x3~0|+|nor_conv_1x1~0|none~1|+|nor_conv_1x1~0|none~1|none~2|")
    swapped = "|nor_conv_3x3~0|+|avg_pool_3x3~1|nor_conv_3x3~0|+|skip_connect~2|nor_conv_3x3~1|skip_connect~0|"
    assert sp201.text_key(swapped) == NB201_CASES[0]
    sp101 = get_space("nb101")
    spec = nb101.validate(README_MATRIX, README_OPS)
    h = nb101.spec_hash(README_MATRIX, README_OPS)
    assert sp101.key(spec) == h == sp101.text_key(sp101.encode(spec)) == sp101.text_key(h.upper())
    assert sp101.decode(sp101.encode(spec).replace(";", ",")).ops == spec.ops
    with pytest.raises(ValueError, match="expected 'matrix rows\\|ops'"):
        sp101.decode("0110")
    spm = get_space("mbv2")
    assert spm.decode(spm.encode(MBV2_CASES[2])) == tuple(MBV2_CASES[2])
