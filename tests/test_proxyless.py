"""ProxylessNAS-style search: supernet mechanics, latency pull toward the target, determinism."""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import annette_torch as at
from annette_torch.lookup import LatencyTable
from annette_torch.search.proxyless import ProxylessSearch, ProxylessSupernet, search
from annette_torch.search.spaces import mbv2


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny tensors: intra-op threads only add synchronisation (and stall on a loaded machine)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def table() -> LatencyTable:
    return mbv2.latency_table("zcu102-dnndk")


def test_supernet_paths_and_gates():
    torch.manual_seed(0)
    net = ProxylessSupernet(width_mult=0.125)
    g = torch.Generator().manual_seed(0)
    x = torch.rand(4, 1, 8, 8)
    for _ in range(5):
        path = net.sample_path(g)
        assert all(0 <= k < len(ops) for ops, k in zip(net.ops, path))  # masked candidates never drawn
        assert net(x, path).shape == (4, 10)
    path, gates = net.gumbel_path(1.0, g)
    assert torch.allclose(gates, torch.ones_like(gates))
    net(x, path, gates).sum().backward()
    assert net.alpha.grad is not None and net.alpha.grad.abs().sum() > 0
    assert mbv2.validate(net.choices()) == net.choices()


@pytest.mark.parametrize("factor", [0.8, 1.3])
def test_latency_term_pulls_expected_latency_toward_the_target(table, factor):
    s = ProxylessSearch("zcu102-dnndk", latency_ms=factor * table.expected(torch.zeros(table.lat.shape)).item(),
                        table=table, width_mult=0.125)
    before = abs(float(s.expected_ms().detach()) - s.target_ms)
    s.latency_term(s.expected_ms()).backward()
    with torch.no_grad():
        s.net.alpha -= 1.0 * s.net.alpha.grad / s.net.alpha.grad.abs().max()
    assert abs(float(s.expected_ms().detach()) - s.target_ms) < before


@pytest.mark.slow
def test_search_on_digits_lowers_latency_toward_the_target(table):
    target = 0.6 * table.extremes()[1]  # 60% of the slowest architecture's latency
    res = search("zcu102-dnndk", latency_ms=target, epochs=4, lam=1.0, seed=0, table=table, width_mult=0.125)
    traj = [res.initial_expected_ms] + [h.expected_ms for h in res.history]
    # expected latency falls monotonically toward the target over the first epochs
    assert res.initial_expected_ms > target  # uniform weights start above the target
    assert abs(traj[-1] - target) < abs(traj[0] - target)
    assert abs(traj[-1] - target) < 0.05 * target
    assert traj[1] < traj[0] and traj[2] < traj[1]
    assert res.history[-1].ce < res.history[0].ce and res.history[-1].accuracy > 0.3  # the proxy learns
    # the derived architecture's latency is the full-size network's estimate, equal to the table's sum
    assert mbv2.validate(res.choices) == res.choices
    full = at.estimate(mbv2.build_network(res.choices), "zcu102-dnndk").latency_ms
    assert res.predicted_ms == pytest.approx(full, rel=1e-12)
    assert res.table_ms == pytest.approx(full, rel=1e-9)
    assert len(res.alpha) == len(mbv2.BLOCKS) and all(len(a) == len(b.ops) for a, b in zip(res.alpha, mbv2.BLOCKS))


def test_search_is_deterministic_and_takes_any_dataloader(table):
    g = torch.Generator().manual_seed(3)
    x, y = torch.rand(96, 3, 12, 12, generator=g), torch.randint(0, 4, (96,), generator=g)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(1))
    runs = []
    for _ in range(2):
        loader.generator.manual_seed(1)
        runs.append(search("zcu102-dnndk", latency_ms=3.0, epochs=2, lam=2.0, data=loader, seed=7, table=table,
                           num_classes=4, width_mult=0.125))
    a, b = runs
    assert a.choices == b.choices and a.alpha == b.alpha
    assert [h.expected_ms for h in a.history] == [h.expected_ms for h in b.history]
    assert all(math.isfinite(h.ce) for h in a.history)
