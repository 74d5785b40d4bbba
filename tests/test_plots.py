"""Charts show every point on readable axes: the Pareto chart's legend hides no point (it sits outside the
axes), its dots are visible, its log axes carry plain-number labels; the breakdown chart's title gives the
latency the CLI prints, with its definition."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from annette_torch.plots import _brief, _breakdown_figure, _pareto_figure, _plain, plot_pareto


def _table(n: int, plats: tuple[str, ...], accuracy: bool, seed: int = 0) -> SimpleNamespace:
    rng = np.random.default_rng(seed)
    ops = rng.uniform(1e7, 5e8, n)
    lat = {p: ops / (1e8 * (k + 1)) * rng.uniform(0.5, 2.0, n) for k, p in enumerate(plats)}
    acc = 50 + 40 * rng.random(n) if accuracy else None
    from annette_torch.search.pareto import pareto_front
    return (SimpleNamespace(space="toy", archs=[f"a{i}" for i in range(n)], params=ops / 300, ops=ops,
                            latency_ms=lat, accuracy=acc, latency="latency",
                            definitions={p: f"{p} latency, end to end (as measured)" for p in plats}),
            {p: pareto_front(lat[p], acc if accuracy else ops) for p in plats})


def _rendered(fig):
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def _overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


@pytest.mark.parametrize("accuracy", [False, True])
@pytest.mark.parametrize("n, plats", [(300, ("p1",)), (5000, ("zcu102-dnndk", "ncs2", "ort-cpu"))])
def test_pareto_legend_hides_no_point_and_axes_hold_every_point(accuracy, n, plats):
    table, front = _table(n, plats, accuracy)
    fig = _pareto_figure(table, front, None)
    r = _rendered(fig)
    (legend,) = fig.legends
    box = legend.get_window_extent(r)
    for ax in fig.axes:
        assert not _overlaps(box, ax.get_window_extent(r)), "the legend overlaps an axes"
        assert ax.get_legend() is None
        x0, x1 = sorted(ax.get_xlim())
        y0, y1 = sorted(ax.get_ylim())
        for coll in ax.collections:  # every point inside the axes' limits
            xy = coll.get_offsets()
            assert len(xy) and (xy[:, 0] >= x0).all() and (xy[:, 0] <= x1).all()
            assert (xy[:, 1] >= y0).all() and (xy[:, 1] <= y1).all()
            assert min(coll.get_sizes()) >= 6  # visible dots: at least ~2.5 points across
    assert len(legend.get_texts()) == len(plats)


@pytest.mark.parametrize("accuracy", [False, True])
def test_pareto_log_axes_have_plain_number_labels(accuracy):
    table, front = _table(2000, ("a", "b"), accuracy)
    fig = _pareto_figure(table, front, None)
    _rendered(fig)
    labelled = 0
    for ax in fig.axes:
        for axis, scale in ((ax.xaxis, ax.get_xscale()), (ax.yaxis, ax.get_yscale())):
            if scale != "log":
                continue
            texts = [t.get_text() for t in axis.get_ticklabels(which="both") if t.get_text() and t.get_visible()]
            assert all("10^" not in t and "times" not in t and "$" not in t for t in texts), texts
            labelled += len(texts) >= 2
    assert labelled == (1 if accuracy else 3)  # without accuracy: two x axes, one shared y axis


def test_plot_pareto_writes_each_format(tmp_path):
    table, front = _table(400, ("a",), False)
    for name, magic in (("p.png", b"\x89PNG"), ("p.pdf", b"%PDF"), ("p.svg", b"<svg")):
        data = (tmp_path / name).read_bytes() if plot_pareto(table, tmp_path / name, front) else b""
        assert magic in data[:400]


@given(st.floats(min_value=1e-4, max_value=1e12, allow_nan=False, allow_infinity=False))
@settings(max_examples=200, deadline=None)
def test_plain_tick_labels_are_plain_numbers(v):
    text = _plain(v)
    assert "e" not in text.rstrip("kMG") and "^" not in text, text
    mult = {"k": 1e3, "M": 1e6, "G": 1e9}.get(text[-1], 1.0)
    assert float(text.rstrip("kMG")) * mult == pytest.approx(v, rel=1e-5)


@given(st.text(min_size=0, max_size=200))
@settings(max_examples=200, deadline=None)
def test_brief_definitions_fit(text):
    out = _brief(text, 60)
    assert len(out) <= 60
    assert " (" not in out


def test_breakdown_title_gives_latency_ms_and_its_definition():
    from annette_torch import estimate, zoo
    from annette_torch.estimator import latency_definition
    from annette_torch.frontends.fx import trace

    net = trace(zoo.get("tiny_resnet"), zoo.INPUT_SHAPES["tiny_resnet"], name="tiny_resnet")
    ests = [estimate(net, "zcu102-dnndk"), estimate(net, "ncs2")]
    assert ests[0].latency_ms != pytest.approx(ests[0].device_ms)  # zcu102: whole-application != layer sum
    fig = _breakdown_figure(ests, 5)
    for ax, est in zip(fig.axes, ests):
        title = ax.get_title()
        assert f"latency {est.latency_ms:.3f} ms" in title
        assert _brief(latency_definition(est.platform)) in title
        layer_sum = sum(r["time_ms"] for r in est.table())
        assert f"of {layer_sum:.3f} ms layer sum" in title
