"""`annette adapt` from search-space candidates: ``SPACE:ARCH[:CLASSES]`` rows in ``--latencies`` and
``(model, latency_ms)`` pairs in Python; every malformed row or pair is one error line naming it."""

from __future__ import annotations

import csv
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import annette_torch as at
from annette_torch.cli import main
from annette_torch.errors import AnnetteError
from annette_torch.fit.adapt import AdaptError, adapt, given_latencies, read_latencies
from annette_torch.ir import LayerType
from annette_torch.search.spaces import mbv2, nb101, nb201
from annette_torch.search.spaces.registry import space_network, split_space_spec

CELLS = [0, 1, 2, 9930, 15624]  # benchmark indices
CONV3 = nb201.arch_string(["nor_conv_3x3"] * 6)


def _write(path: Path, rows: list[tuple[str, str, str]]) -> Path:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model", "input_shape", "latency_ms"])
        w.writerows(rows)
    return path


def _classes(net) -> int:
    return int(net.cols["c_out"][net.types == int(LayerType.FULLY_CONNECTED)][-1])


def test_split_space_spec_tells_candidates_from_files_zoo_names_and_callables():
    assert split_space_spec(f"nb201:{CONV3}:100") == ("nb201", CONV3, 100)
    assert split_space_spec(f" NB201 : {CONV3} ") == ("nb201", CONV3, None)
    assert split_space_spec("mbv2:" + "-".join(["mb3_e3"] * len(mbv2.BLOCKS))) is not None
    # not a built-in space before the first colon: the other row kinds, untouched
    for text in ("resnet18", "model.onnx", "torchvision.models:resnet18", "mypkg.nb201:make", "nb2010:x",
                 "C:/models/net.onnx"):
        assert split_space_spec(text) is None
        assert space_network(text) is None


def test_nb201_rows_name_the_benchmark_cell_and_its_classes(tmp_path):
    rows = [(f"nb201:{nb201.index_to_arch(i)}:100", "", "1.5") for i in CELLS[:3]]
    rows.append((f"nb201:{CONV3}", "1,3,32,32", "2.0"))
    got = read_latencies(_write(tmp_path / "lat.csv", rows))
    assert [g[0] for g in got] == ["nb201#0:100", "nb201#1:100", "nb201#2:100", f"nb201#{nb201.arch_to_index(CONV3)}"]
    assert [_classes(g[1]) for g in got] == [100, 100, 100, 10]
    # the same network as the space builds, with a 100-way classifier
    ref = nb201.build_network(nb201.index_to_arch(1), num_classes=100)
    assert got[1][1].names == ref.names and np.array_equal(got[1][1].edges, ref.edges)


def test_nb101_and_mbv2_rows(tmp_path):
    cell = "nb101:011/001/000|input;conv3x3-bn-relu;output"
    blocks = "mbv2:" + "-".join(["mb3_e3"] * len(mbv2.BLOCKS))
    got = read_latencies(_write(tmp_path / "lat.csv", [(cell + ":7", "", "1"), (cell, "1,3,32,32", "1"),
                                                       (blocks, "1,3,160,160", "3")]))
    assert [_classes(g[1]) for g in got] == [7, 10, 1000]
    assert got[2][1].out_shape(0) == (1, 3, 160, 160)
    spec = nb101.validate(np.array([[0, 1, 1], [0, 0, 1], [0, 0, 0]]), ("input", "conv3x3-bn-relu", "output"))
    assert len(got[1][1]) == len(nb101.build_network(spec.matrix, spec.ops))


def test_anb_rows_build_the_accel_nasbench_candidate(tmp_path):
    from annette_torch.search.spaces import anb
    from annette_torch.search.spaces.registry import ANBSpace
    arch = "e4k3l2+se-e4k3l2-e4k5l2+se-e4k5l2-e1k3l2+se-e6k5l2+se-e6k5l1+se"
    rows = [(f"anb:{arch}", "", "4.2"), (f"anb:{arch}:10", "1,3,192,192", "3.1"), ("resnet18", "", "9")]
    got = read_latencies(_write(tmp_path / "lat.csv", rows))
    ref = ANBSpace().network(anb.decode(arch))
    assert got[0][1].names == ref.names and np.array_equal(got[0][1].edges, ref.edges)
    assert _classes(got[1][1]) == 10 and got[1][1].out_shape(0) == (1, 3, 192, 192)
    with pytest.raises(AnnetteError, match="square image input"):
        space_network(f"anb:{arch}", (1, 3, 32, 64))


def test_a_board_is_adapted_from_nb201_cells_through_the_cli(tmp_path, capsys):
    """A board 1.6x slower than zcu102's end-to-end model, plus 0.2 ms: the adapted file predicts the rest."""
    archs = [nb201.index_to_arch(i) for i in range(12)]
    base = at.load_platform("zcu102-dnndk")
    truth = {a: 1.6 * at.estimate(nb201.build_network(a, num_classes=100), base).latency_ms + 0.2 for a in archs}
    path = _write(tmp_path / "lat.csv", [(f"nb201:{a}:100", "", f"{truth[a]:.9g}") for a in archs[:10]])
    out = tmp_path / "board.json"
    assert main(["adapt", "-p", "zcu102-dnndk", "--latencies", str(path), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "nb201#0:100" in text and "10 networks" in text
    board = at.load_platform(str(out))
    for a in archs[10:]:  # cells it was not adapted on
        net = nb201.build_network(a, num_classes=100)
        assert at.estimate(net, board).latency_ms == pytest.approx(truth[a], rel=0.05)


def test_the_python_form_takes_networks_modules_and_names(tmp_path):
    base = at.load_platform("zcu102-dnndk")
    nets = [nb201.build_network(nb201.index_to_arch(i)) for i in CELLS]
    module = nb201.build_module(nb201.index_to_arch(3))
    truth = lambda net: 1.3 * at.estimate(net, base).latency_ms  # noqa: E731
    pairs = [(n, truth(n)) for n in nets]
    pairs.append((module, truth(nb201.build_network(nb201.index_to_arch(3))), nb201.INPUT_SHAPE))
    pairs.append((f"nb201:{nb201.index_to_arch(5)}", truth(nb201.build_network(nb201.index_to_arch(5)))))
    res = adapt("zcu102-dnndk", latencies=pairs, save=False)
    assert res.names[-2:] == ["TinyNetwork-5", "nb201#5"]
    assert len(res.names) == 7 and res.mape_after < 0.01
    assert "given in Python" in res.platform.meta["end_to_end"]["predicts"] or \
        "given in Python" in res.platform.description


@pytest.mark.parametrize("model, shape, needle", [
    ("nb201:make", "", "not a valid nb201 candidate"),
    ("nb201:make", "", "package.nb201:make"),
    ("nb201:|nor_conv_3x3~0|", "", "expected 3 node groups"),
    ("nb201:|conv~0|+|none~0|none~1|+|none~0|none~1|none~2|", "", "unknown op 'conv'"),
    (f"nb201:{CONV3}:0", "", "not a whole number >= 1"),
    (f"nb201:{CONV3}:many", "", "not a whole number >= 1"),
    ("nb201::100", "", "no architecture after 'nb201'"),
    ("nb201:", "", "no architecture after 'nb201'"),
    (f"nb201:{CONV3}", "1,3,64,64", "CIFAR input 1x3x32x32"),
    ("nb101:011/001|input;output", "", "not a valid nb101 candidate"),
    ("mbv2:mb3_e3", "", "not a valid mbv2 candidate"),
    ("mbv2:" + "-".join(["mb3_e3"] * len(mbv2.BLOCKS)), "1,3,160,128", "square image input"),
])
def test_a_bad_space_row_is_one_error_line_naming_the_row(tmp_path, capsys, model, shape, needle):
    good = (f"nb201:{CONV3}", "", "1.0")
    path = _write(tmp_path / "lat.csv", [good, (model, shape, "1.0"), good])
    assert main(["adapt", "-p", "zcu102-dnndk", "--latencies", str(path)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("annette: error:")
    assert "line 3" in err and needle in err


@pytest.mark.parametrize("item, needle", [
    ("resnet18", "expected (model, latency_ms)"),
    ((nb201.build_network(CONV3),), "expected (model, latency_ms)"),
    ((nb201.build_network(CONV3), "fast"), "not a number"),
    ((nb201.build_network(CONV3), True), "not a number"),
    ((nb201.build_network(CONV3), -1.0), "positive number"),
    ((nb201.build_network(CONV3), float("nan")), "positive number"),
    ((nb201.build_network(CONV3), 1.0, "1,3"), "is not like"),
    ((nb201.build_network(CONV3), 1.0, (1, 0, 32, 32)), "positive sizes"),
    ((nb201.build_module(CONV3), 1.0), "needs its input shape"),
    ((42, 1.0), "cannot estimate a int"),
    (("nb201:make", 1.0), "not a valid nb201 candidate"),
])
def test_a_bad_python_pair_is_one_error_line_naming_its_position(item, needle):
    good = (nb201.build_network(CONV3), 1.0)
    with pytest.raises(AdaptError) as e:
        given_latencies([good, good, item])
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("latencies[2]: ") and needle in msg


def test_too_few_pairs_are_refused():
    with pytest.raises(AdaptError, match="at least 3"):
        adapt("zcu102-dnndk", latencies=[(nb201.build_network(CONV3), 1.0)] * 2, save=False)
    with pytest.raises(AdaptError, match="at least 3"):
        adapt("zcu102-dnndk", latencies=[], save=False)


_ARCH_CHARS = st.sampled_from(list("|+~:0123 ") + ["none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3",
                                                   "avg_pool_3x3", "nb201", "x"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.lists(_ARCH_CHARS, max_size=20).map("".join), classes=st.one_of(st.none(), st.text(max_size=4)),
       space=st.sampled_from(["nb201", "NB201", "nb101", "mbv2"]))
def test_malformed_space_rows_are_an_adapt_error_never_another_exception(body, classes, space):
    model = f"{space}:{body}" + ("" if classes is None else f":{classes}")
    with tempfile.TemporaryDirectory() as d:
        path = _write(Path(d) / "lat.csv", [(model, "", "1.0")] * 3)
        try:
            rows = read_latencies(path)
        except AdaptError as e:
            assert "\n" not in str(e) and "line 2" in str(e)
        else:
            assert len(rows) == 3 and all(len(r[1]) >= 1 for r in rows)
    try:
        given_latencies([(model, 1.0)] * 3)
    except AdaptError as e:
        assert "\n" not in str(e) and str(e).startswith("latencies[0]: ")


@settings(max_examples=40, deadline=None)
@given(item=st.one_of(st.none(), st.integers(), st.text(max_size=8),
                      st.tuples(st.sampled_from([f"nb201:{CONV3}", "nb201:x", "tiny_cnn"]),
                                st.one_of(st.floats(allow_nan=True), st.integers(-3, 3), st.text(max_size=3))),
                      st.lists(st.integers(-2, 40), max_size=4).map(lambda s: (f"nb201:{CONV3}", 1.0, s))))
def test_malformed_python_pairs_are_an_adapt_error_never_another_exception(item):
    try:
        rows = given_latencies([item] * 3)
    except AdaptError as e:
        assert "\n" not in str(e)
    else:
        assert len(rows) == 3


def test_space_network_raises_only_annette_errors():
    with pytest.raises(AnnetteError):
        space_network("nb201:|none~0|+|none~0|none~1|+|none~0|none~1|none~3|")
