"""LatencyConstraint in a user's Optuna objective, function spaces, supernet tables, proxyless targets,
masked storage URLs and heartbeats of killed workers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

optuna = pytest.importorskip("optuna")
torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402

import annette_torch as at  # noqa: E402
from annette_torch.errors import AnnetteError  # noqa: E402
from annette_torch.lookup import Choice, LatencyTable  # noqa: E402
from annette_torch.search import LatencyConstraint  # noqa: E402
from annette_torch.search.storage import mask_url, open_storage  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)
SHAPE = (1, 3, 32, 32)


def _model(width: int, depth: int) -> nn.Module:
    return nn.Sequential(*[nn.Conv2d(3 if i == 0 else width, width, 3, padding=1) for i in range(depth)])


def _objective(constraint):
    def objective(trial):
        w = trial.suggest_categorical("width", [8, 16, 32, 64, 128])
        d = trial.suggest_int("depth", 1, 4)
        constraint(trial, _model(w, d))
        return w * d
    return objective


@pytest.mark.parametrize("sampler", ["tpe", "nsga2", "nsga3", "gp"])
def test_every_sampler_sees_the_constraint(sampler):
    c = LatencyConstraint("zcu102-dnndk", latency_ms=0.45, input_shape=SHAPE)
    make = {"tpe": lambda: optuna.samplers.TPESampler(seed=0, n_startup_trials=5, **c.sampler_kwargs()),
            "nsga2": lambda: optuna.samplers.NSGAIISampler(seed=0, population_size=6, **c.sampler_kwargs()),
            "nsga3": lambda: optuna.samplers.NSGAIIISampler(seed=0, population_size=6, **c.sampler_kwargs()),
            "gp": lambda: optuna.samplers.GPSampler(seed=0, n_startup_trials=5, **c.sampler_kwargs())}[sampler]
    study = optuna.create_study(direction="maximize", sampler=make())
    study.optimize(_objective(c), n_trials=14)
    for t in study.trials:
        ms = t.user_attrs["latency_ms"]
        assert ms == pytest.approx(at.estimate(_model(t.params["width"], t.params["depth"]), "zcu102-dnndk", SHAPE).latency_ms)
        assert t.system_attrs.get("constraints:latency", t.user_attrs["constraint"][0]) == pytest.approx(ms - 0.45)
    feasible = [t for t in study.trials if c.feasible(t)]
    assert feasible and all(t.user_attrs["latency_ms"] <= 0.45 for t in feasible)
    assert study.best_trial.user_attrs["latency_ms"] <= 0.45  # the best trial is a feasible one
    assert c.misses < c.calls  # repeated architectures came from the cache


def test_cache_key_is_the_architecture_not_the_object():
    c = LatencyConstraint("zcu102-dnndk", latency_ms=1.0, input_shape=SHAPE)
    a, b = c.predict(_model(16, 2)), c.predict(_model(16, 2))
    assert a == b and c.misses == 1
    c.predict(_model(16, 3))
    assert c.misses == 2
    net = at.trace(_model(16, 2), SHAPE)
    assert c.predict(net) == pytest.approx(a) and c.predict(at.trace(_model(16, 2), SHAPE)) == pytest.approx(a)
    assert c.misses == 3


def test_latency_kind_margin_and_bad_arguments():
    dev = LatencyConstraint("zcu102-dnndk", latency_ms=1.0, input_shape=SHAPE, latency="device")
    est = at.estimate(_model(32, 2), "zcu102-dnndk", SHAPE)
    assert dev.predict(_model(32, 2)) == pytest.approx(est.device_ms)
    lat = LatencyConstraint("zcu102-dnndk", latency_ms=1.0, input_shape=SHAPE)
    assert lat.predict(_model(32, 2)) == pytest.approx(est.latency_ms)
    assert LatencyConstraint("zcu102-dnndk", latency_ms=2.0, input_shape=SHAPE, margin=0.1).budget_ms == pytest.approx(1.8)
    for bad in (dict(latency_ms=0), dict(latency_ms=float("nan")), dict(latency_ms=1, margin=1.0),
                dict(latency_ms=1, latency="e2e")):
        with pytest.raises(AnnetteError):
            LatencyConstraint("zcu102-dnndk", input_shape=SHAPE, **bad)


def test_old_optuna_gets_a_constraints_func(monkeypatch):
    import annette_torch.search.constraint as mod
    monkeypatch.setattr(mod, "has_set_constraint", lambda: False)
    c = LatencyConstraint("zcu102-dnndk", latency_ms=0.45, input_shape=SHAPE)
    kw = c.sampler_kwargs()
    assert kw["constraints_func"] == c.constraints_func
    study = optuna.create_study(direction="maximize")
    study.optimize(_objective(c), n_trials=3)
    assert all(c.constraints_func(t) == t.user_attrs["constraint"] for t in study.trials)
    assert c.constraints_func(optuna.trial.create_trial(value=1.0)) == (1.0,)  # unknown latency: infeasible


@pytest.mark.slow
def test_a_repeated_architecture_is_estimated_once():
    """A new architecture is traced and estimated, a repeated one (a fresh module of the same structure)
    is a cache hit. (The time either adds to a trial: benchmarks/constraint_overhead.py.)"""
    from annette_torch import zoo
    c = LatencyConstraint("zcu102-dnndk", latency_ms=10.0, input_shape=(1, 3, 224, 224))
    study = optuna.create_study()
    new = []
    for i in range(3):
        m2 = zoo.get("resnet18")
        m2.fc = nn.Linear(512, 10 + i)  # a new architecture each time
        new.append(c(study.ask(), m2))
    assert c.misses == 3 and len(set(new)) == 3
    for _ in range(20):
        assert c(study.ask(), zoo.get("resnet18")) == c.predict(zoo.get("resnet18"))
    assert c.misses == 4 and c.calls == 43


def test_function_space_in_the_cli(tmp_path, capsys, monkeypatch):
    from annette_torch.cli.app import main
    (tmp_path / "myspace.py").write_text(textwrap.dedent("""
        import torch.nn as nn
        def build(trial):
            w = trial.suggest_categorical("width", [8, 16, 32])
            return nn.Sequential(nn.Conv2d(3, w, 3, padding=1), nn.ReLU())
    """))
    monkeypatch.chdir(tmp_path)
    assert main(["search", "--space", "myspace:build", "--input-shape", "1,3,32,32", "--latency-ms", "1",
                 "--trials", "6"]) == 0
    out = capsys.readouterr().out
    assert '"width"' in out and "within the budget" in out
    assert main(["search", "--space", "myspace:build", "--latency-ms", "1", "--trials", "2"]) != 0
    assert "--input-shape" in capsys.readouterr().err


def _supernet():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
            self.blocks = nn.Sequential(*[Choice(nn.Conv2d(16, 16, 3, padding=1), nn.Conv2d(16, 16, 5, padding=2),
                                                 nn.Identity(), names=["c3", "c5", "skip"]) for _ in range(3)])
            self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))

        def forward(self, x):
            return self.head(self.blocks(self.stem(x)))
    return Net()


@pytest.mark.parametrize("latency", ["latency", "device"])
def test_from_supernet_matches_full_estimates(latency):
    model = _supernet()
    table = LatencyTable.from_supernet(model, "zcu102-dnndk", (1, 3, 64, 64), latency=latency)
    assert table.ops == [["c3", "c5", "skip"]] * 3 and table.lat[0, 2] == 0
    for path in ([0, 0, 0], [1, 2, 0], [2, 2, 2], [1, 1, 1]):
        for b, k in zip(model.blocks, path):
            b.active = k
        est = at.estimate(model, "zcu102-dnndk", (1, 3, 64, 64))
        assert table.exact(path) == pytest.approx(est.latency_ms if latency == "latency" else est.device_ms, rel=1e-9)


def test_build_takes_modules():
    cands = [[nn.Conv2d(16, 16, k, padding=k // 2) for k in (1, 3)], [nn.Identity(), None]]
    t = LatencyTable.build(cands, "zcu102-dnndk", input_shapes=[(1, 16, 32, 32)] * 2, latency="device")
    net = at.trace(cands[0][1], (1, 16, 32, 32))
    assert t.lat[0, 1] == pytest.approx(at.estimate(net, "zcu102-dnndk").device_ms - at.estimate(net, "zcu102-dnndk").time_ms[0])
    assert t.lat[1, 0] == 0 and t.lat[1, 1] == 0
    nets = LatencyTable.build([[at.trace(c, (1, 16, 32, 32)) for c in cands[0]]], "zcu102-dnndk", fixed=0.5, latency="device")
    assert nets.fixed_ms == 0.5 and np.allclose(nets.lat[0], t.lat[0])
    with pytest.raises(AnnetteError, match="input_shape"):
        LatencyTable.build(cands, "zcu102-dnndk")


@pytest.mark.slow
@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9])
def test_proxyless_derived_architecture_meets_the_target(fraction):
    from annette_torch.search.proxyless import search
    from annette_torch.search.spaces import mbv2
    torch.set_num_threads(1)
    table = mbv2.latency_table("zcu102-dnndk")
    lo, hi = table.extremes()
    target = lo + fraction * (hi - lo)
    res = search("zcu102-dnndk", latency_ms=target, epochs=1, table=table, width_mult=0.125, progress=False)
    assert abs(res.predicted_ms - target) <= 0.05 * target
    assert res.predicted_ms == pytest.approx(at.estimate(mbv2.build_network(res.choices), "zcu102-dnndk").latency_ms)
    assert res.argmax_ms == pytest.approx(res.history[-1].argmax_ms)
    assert len(repr(res)) < 300 and "target" in repr(res)


def test_proxyless_target_is_the_keyword_latency_ms_and_bad_targets_are_one_line():
    from annette_torch.search.proxyless import ProxylessSearch
    from annette_torch.search.spaces import mbv2
    table = mbv2.latency_table("zcu102-dnndk")
    s = ProxylessSearch("zcu102-dnndk", latency_ms=3.0, table=table, width_mult=0.125)
    assert s.latency_ms == 3.0
    with pytest.raises(TypeError, match="target_ms"):
        ProxylessSearch("zcu102-dnndk", target_ms=3.0, table=table, width_mult=0.125)
    with pytest.raises(TypeError):
        ProxylessSearch("zcu102-dnndk", 3.0, table=table, width_mult=0.125)
    with pytest.raises(AnnetteError, match="positive"):
        ProxylessSearch("zcu102-dnndk", latency_ms=float("nan"), table=table, width_mult=0.125)
    with pytest.raises(AnnetteError, match="outside the space's range"):
        ProxylessSearch("zcu102-dnndk", latency_ms=0.1, table=table, width_mult=0.125)


def test_passwords_are_masked():
    assert mask_url("postgresql://bob:hunter2@db:5432/x") == "postgresql://bob:***@db:5432/x"
    with pytest.raises(AnnetteError) as e:
        open_storage("postgresql://bob:hunter2@127.0.0.1:1/x")
    assert "hunter2" not in str(e.value)
    if "psycopg" not in sys.modules:
        assert "psycopg" in str(e.value)


def test_cli_masks_the_password(capsys):
    from annette_torch.cli.app import main
    assert main(["search", "--storage", "postgresql://bob:hunter2@127.0.0.1:1/x", "--latency-ms", "1",
                 "--trials", "1"]) != 0
    cap = capsys.readouterr()
    assert "hunter2" not in cap.out + cap.err and "***" in cap.err


WORKER = """
import sys, time, optuna
from annette_torch.search.storage import open_storage
storage = open_storage(sys.argv[1], heartbeat_interval=1, grace_period=2)
study = optuna.create_study(storage=storage, study_name="hb", load_if_exists=True)
def objective(trial):
    open(sys.argv[2], "w").close()
    time.sleep(60)
    return 0.0
study.optimize(objective, n_trials=1)
"""


@pytest.mark.slow
def test_a_killed_workers_trial_is_failed(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    started = tmp_path / "started"
    p = subprocess.Popen([sys.executable, "-c", WORKER, url, str(started)])
    try:
        for _ in range(600):
            if started.exists():
                break
            time.sleep(0.05)
        assert started.exists()
        time.sleep(1.2)
        os.kill(p.pid, signal.SIGKILL)
        p.wait(10)
    finally:
        if p.poll() is None:
            p.kill()
    time.sleep(2.5)  # past the grace period
    from annette_torch.search.storage import fail_stale
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = optuna.load_study(study_name="hb", storage=open_storage(url, heartbeat_interval=1, grace_period=2))
    failed = 0
    for _ in range(30):  # the grace period counts from the last heartbeat: poll, a loaded machine is slow
        failed += fail_stale(study)
        if failed:
            break
        time.sleep(0.5)
    assert failed == 1
    states = [t.state for t in study.get_trials()]
    assert states == [optuna.trial.TrialState.FAIL]


def _plain_supernet_and_choices():
    """A supernet whose searchable blocks are ordinary submodules, and the function that lists them."""
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(1, 8, 3, padding=1)
            self.b1 = nn.Conv2d(8, 8, 3, padding=1)
            self.b2 = nn.Conv2d(8, 8, 3, padding=1)
            self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))

        def forward(self, x):
            return self.head(self.b2(self.b1(self.stem(x))))

    def choices(model):
        return [(name, [nn.Conv2d(8, 8, 3, padding=1), nn.Conv2d(8, 8, 7, padding=3), nn.Identity()])
                for name in ("b1", "b2")]
    return Net(), choices


@pytest.mark.slow
def test_proxyless_on_a_user_supernet_named_by_a_choices_function():
    from annette_torch.search.proxyless import ProxylessSearch, digits_loaders
    torch.manual_seed(0)
    model, choices = _plain_supernet_and_choices()
    with pytest.raises(AnnetteError, match="supernet="):
        ProxylessSearch("zcu102-dnndk", latency_ms=1.0, choices=choices)
    table = LatencyTable.from_supernet(_plain_supernet_and_choices()[0], "zcu102-dnndk", (1, 1, 8, 8), choices=choices)
    target = table.exact([0, 1])  # an architecture of the space: the derived one must end within 5% of it
    s = ProxylessSearch("zcu102-dnndk", latency_ms=target, supernet=model, input_shape=(1, 1, 8, 8), choices=choices)
    assert isinstance(model.b1, Choice) and len(model.b1.candidates) == 3  # wrapped in place, so training reaches them
    assert s.table.ops == table.ops and np.allclose(s.table.lat, table.lat)
    train, val = digits_loaders(64, seed=0)
    s.fit(train, val, 1)
    res = s.result()
    path = [s.table.ops[b].index(c) for b, c in enumerate(res.choices)]
    for b, k in zip((model.b1, model.b2), path):
        b.active = k
    assert res.predicted_ms == pytest.approx(at.estimate(model, "zcu102-dnndk", (1, 1, 8, 8)).latency_ms, rel=1e-9)
    assert abs(res.predicted_ms - target) <= 0.05 * target


def test_choices_naming_no_submodule_is_one_error():
    from annette_torch.search.proxyless import wrap_choices
    model, _ = _plain_supernet_and_choices()
    with pytest.raises(AnnetteError, match="no submodule 'b9'"):
        wrap_choices(model, lambda m: [("b9", [nn.Identity()])])
    with pytest.raises(AnnetteError, match="must be nn.Modules"):
        wrap_choices(model, [("b1", ["conv"])])
