"""The per-layer table of `annette estimate` shows a ``switch_ms`` column exactly when the Estimate's rows carry
one that is non-zero somewhere (the accelerator<->host switch cost kept apart from ``time_ms``), and tolerates
its absence; the CSV of several platforms keeps every column the rows carry."""

from __future__ import annotations

import csv
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from annette_torch.cli.app import _per_layer, _write_csv


@pytest.fixture(scope="module")
def estimates():
    from annette_torch import estimate, zoo
    from annette_torch.frontends.fx import trace

    net = trace(zoo.get("tiny_cnn"), zoo.INPUT_SHAPES["tiny_cnn"], name="tiny_cnn")
    return [estimate(net, "zcu102-dnndk"), estimate(net, "ncs2")]


def _with_switches(est, values):
    """``est`` whose table rows carry ``switch_ms`` values (None: the column left out)."""
    rows = [dict(r) for r in est.table()]
    for r in rows:
        r.pop("switch_ms", None)
    if values is not None:
        for r, v in zip(rows, values):
            r["switch_ms"] = v
    return SimpleNamespace(network=est.network, platform=est.platform, table=lambda: rows)


def test_no_switch_column_without_the_key_or_with_zeros(estimates):
    est = estimates[0]
    without = _per_layer(_with_switches(est, None))
    assert "switch_ms" not in without and "time_ms" in without
    assert _per_layer(_with_switches(est, [0.0] * len(est.table()))) == without


def test_switch_column_shows_each_layers_value_beside_time_ms(estimates):
    est = estimates[0]
    n = len(est.table())
    values = [0.0] * n
    values[1] = 0.9123
    lines = _per_layer(_with_switches(est, values)).splitlines()
    header, body = lines[1], lines[3:]
    assert header.split()[header.split().index("time_ms") + 1] == "switch_ms"
    start = header.index("switch_ms")
    cells = [line[start:start + len("switch_ms")].strip() for line in body]  # right-aligned under its head
    assert cells[1] == "0.9123" and all(c == "0.0000" for i, c in enumerate(cells) if i != 1)


@given(st.lists(st.one_of(st.just(0.0), st.floats(min_value=1e-6, max_value=50.0), st.none()), min_size=1,
                max_size=12))
@settings(max_examples=40, deadline=None)
def test_switch_column_appears_exactly_when_some_value_is_non_zero(estimates, values):
    est = estimates[1]
    n = len(est.table())
    full = (values * (n // len(values) + 1))[:n]
    text = _per_layer(_with_switches(est, full))
    assert ("switch_ms" in text) == any(v for v in full)
    assert len(text.splitlines()) == n + 3


def test_csv_of_several_platforms_keeps_the_switch_column(estimates, tmp_path):
    a = _with_switches(estimates[0], [0.5] + [0.0] * (len(estimates[0].table()) - 1))
    b = _with_switches(estimates[1], None)
    path = tmp_path / "t.csv"
    _write_csv([a, b], str(path))
    rows = list(csv.DictReader(path.open()))
    assert "switch_ms" in rows[0]
    assert rows[0]["switch_ms"] == "0.5" and rows[-1]["switch_ms"] == ""
    assert {r["platform"] for r in rows} == {estimates[0].platform.name, estimates[1].platform.name}
