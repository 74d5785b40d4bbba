"""The layer-model program (`annette_torch.models.program`) and the stacked feature rows against each model's own
``predict``, bit for bit: every kind the program covers (refined rooflines with dimensions in any order and
replicated ones, mixed models over both roofline kinds with tree, polynomial and linear-model-tree corrections,
zero corrections, standalone statistical models), a kind it does not cover, and host rows (``rows``)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import annette_torch as at
from annette_torch import zoo
from annette_torch.ir import Network, NetworkBuilder
from annette_torch.models import LayerFeatures, Mixed, RefinedRoofline, Roofline
from annette_torch.models.statistical import Statistical
from annette_torch.platform import Platform, platform_dir
from annette_torch.prediction import model_times


class _Halved(Roofline):
    """A layer-model kind the program does not know: it must predict its own rows."""

    kind = "halved_roofline_test"

    def predict(self, X: LayerFeatures) -> np.ndarray:
        return super().predict(X) / 2


def _models() -> dict[str, object]:
    """Layer models of every kind the program covers, from the shipped CPU platforms (no fitting here)."""
    ort = Platform.load(platform_dir() / "ort-cpu.json").layers
    ov = Platform.load(platform_dir() / "openvino-cpu.json").layers
    mixed = [m for m in list(ort.values()) + list(ov.values()) if isinstance(m, Mixed)]
    by = {}
    for m in mixed:
        by.setdefault((type(m.base).__name__, m.correction_.regressor_.kind), m)
    refined = copy.deepcopy(ov["Conv"].base)  # three unrolled dimensions
    assert type(refined) is RefinedRoofline and len(refined.unroll) == 3
    shuffled = copy.deepcopy(refined)  # dimensions in another order, one replicated: another product
    dims = list(shuffled.unroll)[::-1]
    shuffled.unroll = {d: dict(shuffled.unroll[d]) for d in dims}
    shuffled.unroll[dims[0]]["replicate"] = True
    zero = copy.deepcopy(by[("Roofline", "trees")])
    zero.clip_min_ = zero.clip_max_ = 0.25
    standalone = copy.deepcopy(by[("RefinedRoofline", "trees")].correction_)
    assert type(standalone) is Statistical
    dilated = copy.deepcopy(by[("RefinedRoofline", "trees")])  # a tap slope: dilated rows scaled down
    dilated.taps_slope_ = 0.7
    return {"Conv": dilated, "DepthwiseConv": shuffled, "GroupConv": refined,
            "Add": by[("Roofline", "trees")], "Relu6": by.get(("Roofline", "lmt"), by[("Roofline", "poly")]),
            "Relu": by[("Roofline", "poly")], "BatchNorm": zero, "GlobalPool": standalone,
            "FullyConnected": _Halved(2e10, 5e9), "Base": Roofline(1e10, 1e9)}


@pytest.fixture(scope="module")
def platform() -> Platform:
    return Platform("program-test", _models())


@pytest.fixture(scope="module")
def network() -> Network:
    nets = [at.trace(zoo.get(m), zoo.INPUT_SHAPES[m]) for m in ("mobilenet_v2", "resnet18")]
    b = NetworkBuilder("atrous")  # DeepLab's atrous convolutions: rows with a dilated tap share
    x = b.input("x", (1, 64, 33, 33))
    for d in (1, 2, 6, 12, 18):
        b.conv(f"aspp{d}", x, 32, 3, padding=d, dilation=d)
    return Network.concat(nets + [b.build()])[0]


def _own(plat: Platform, net: Network, rows: np.ndarray) -> np.ndarray:
    """Each row's time from its model's own ``predict`` (no forest, no program)."""
    tables = plat.tables
    mi = tables.model_of_type[net.types[rows]]
    t = np.zeros(len(rows))
    for m in np.unique(mi):
        sel = np.flatnonzero(mi == m)
        t[sel] = tables.models[m].predict(LayerFeatures.from_network(net, rows[sel]))
    return t


def test_program_covers_the_kinds(platform) -> None:
    """All but the unknown kind (and plain rooflines, the tables' own) run in the program."""
    prog, keys = platform.tables.program, platform.tables.keys
    covered = {k for k, c in zip(keys, prog.covers) if c}
    assert covered == {"Conv", "DepthwiseConv", "GroupConv", "Add", "Relu6", "Relu", "BatchNorm", "GlobalPool"}


@pytest.mark.parametrize("forest", [True, False], ids=["forest", "alone"])
def test_program_equals_each_model(platform, network, forest) -> None:
    plat = platform
    if not forest:  # every regressor predicts on its own (as a platform with a single ensemble does)
        plat = copy.copy(platform)
        plat.tables = copy.copy(platform.tables)
        plat.tables.forest, plat.tables.member = None, np.full_like(platform.tables.member, -1)
    else:
        assert plat.tables.forest is not None
    used = set(plat.tables.model_of_type[network.types].tolist())
    assert {plat.tables.keys.index(k) for k in ("Conv", "DepthwiseConv", "Add", "BatchNorm", "GlobalPool",
                                                 "FullyConnected", "Relu6")} <= used
    assert (network.taps[2] < 0).sum() == 4
    all_rows = np.arange(len(network))
    np.testing.assert_array_equal(model_times(plat.tables, network)[0], _own(plat, network, all_rows))
    rows = all_rows[::3]  # a subset (the host's rows of a placement)
    np.testing.assert_array_equal(model_times(plat.tables, network, rows)[0], _own(plat, network, rows))


def test_stacked_rows_equal_the_columns(network) -> None:
    rows = np.arange(len(network))[::2]
    X, S = LayerFeatures.from_network(network, rows), LayerFeatures.stacked_of(network, rows)
    np.testing.assert_array_equal(S.stacked(), X.stacked())
    assert len(S) == len(rows)
    for name in LayerFeatures.NAMES:
        np.testing.assert_array_equal(getattr(S, name), getattr(X, name))
    np.testing.assert_array_equal(S.take(np.array([3, 1])).stacked(), X.take(np.array([3, 1])).stacked())
    plain = Network(network.name, network.names, network.types, network.cols, network.edges)  # no matrix
    np.testing.assert_array_equal(LayerFeatures.stacked_of(plain, rows).stacked(), X.stacked())


def _random_layers(rng: np.random.Generator, n: int) -> LayerFeatures:
    """Layers over wide ranges: compute-bound and memory-bound ones, channels below and above any unrolling."""
    c_in, c_out, groups = rng.integers(1, 600, n), rng.integers(1, 600, n), rng.choice([1, 1, 2, 4], n)
    h, w = rng.integers(1, 120, n), rng.integers(1, 120, n)
    k = rng.choice([1, 3, 5], n)
    ops = 2.0 * c_out * h * w * (c_in // groups) * k * k * rng.choice([1.0, 1e-3, 1e3], n)
    cols = dict(n=np.ones(n, np.int64), c_in=c_in, h_in=h, w_in=w, c_out=c_out, h_out=h, w_out=w, kh=k, kw=k,
                sh=np.ones(n, np.int64), sw=np.ones(n, np.int64), groups=groups, ops=ops,
                in_elems=(c_in * h * w).astype(float), out_elems=(c_out * h * w).astype(float),
                weights=(c_in * c_out * k * k / groups).astype(float))
    return LayerFeatures(**cols, d_taps=np.log(rng.choice([1.0, 1.0, 0.8, 0.3], n)))


def test_program_equals_each_model_on_any_input(platform) -> None:
    """Per covered model, on random layers and regressor outputs far beyond every clip: the program's times are
    the model's own ``predict`` (given the same regressor output) bit for bit."""
    tables, prog = platform.tables, platform.tables.program
    rng = np.random.default_rng(0)
    X = _random_layers(rng, 400)
    raw = rng.normal(0, 8, len(X))
    sizes = np.stack([X.h_out, X.w_out, X.c_in // np.maximum(X.groups, 1), X.c_out])
    for m in np.flatnonzero(prog.covers):
        model = tables.models[m]
        byts = X.in_elems + X.out_elems
        byts = byts * tables.act_bytes[m] + X.weights * tables.weight_bytes[m]
        got = prog.times(np.full(len(X), m), X.ops, byts, sizes, raw if prog.needs_raw[m] else np.zeros(len(X)),
                         X.d_taps)
        want = model.predict(X, raw=raw) if prog.needs_raw[m] else model.predict(X)
        np.testing.assert_array_equal(got, want, err_msg=tables.keys[m])
