"""Optuna searches with predicted latency: constraint soundness, shared storages, objectives, CLI."""

from __future__ import annotations

import csv
import multiprocessing as mp

import numpy as np
import pytest

optuna = pytest.importorskip("optuna")

from annette_torch import estimate  # noqa: E402
from annette_torch.cli.app import main  # noqa: E402
from annette_torch.errors import AnnetteError  # noqa: E402
from annette_torch.search import optuna_search as osr  # noqa: E402
from annette_torch.search.spaces import nb201  # noqa: E402

from optuna.trial import TrialState  # noqa: E402


@pytest.fixture(autouse=True)
def _quiet_optuna():
    old = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    yield
    optuna.logging.set_verbosity(old)


# ------------------------------------------------------------------------------------------------------
# constraint soundness


@pytest.mark.parametrize("space,budget,trials", [("nb201", 0.2, 40), ("nb101", 2.0, 25), ("mbv2", 1.6, 15)])
def test_every_feasible_architecture_satisfies_the_predicted_constraint(space, budget, trials):
    study = osr.latency_constrained_search(space, "zcu102", budget, "synthetic", trials, seed=1)
    sp = osr.get_space(space)
    feasible = osr.feasible_trials(study)
    assert feasible, "the budget is loose enough for some feasible trials"
    infeasible = 0
    for t in study.get_trials(states=(TrialState.COMPLETE,)):
        arch = sp.decode(t.user_attrs["arch"])
        ms = estimate(sp.network(arch), "zcu102").total_ms  # recomputed independently
        assert ms == pytest.approx(t.user_attrs["latency_ms"], rel=1e-9)
        constraint = list(t.constraints.values()) if hasattr(t, "constraints") else t.user_attrs["constraint"]
        assert constraint[0] == pytest.approx(ms - budget)
        if t in feasible:
            assert ms <= budget
        else:
            infeasible += 1
            assert ms > budget
    for r in osr.best_feasible(study, 5):
        assert estimate(sp.network(sp.decode(r["arch"])), "zcu102").total_ms <= budget
    # Optuna's own notion of the best trial respects the constraint too
    assert study.best_trial.user_attrs["latency_ms"] <= budget
    assert study.best_trial.value == max(t.value for t in feasible)


def test_best_feasible_is_sorted_distinct_and_within_budget():
    study = osr.latency_constrained_search("nb201", "zcu102", 0.15, "synthetic", 40, seed=3)
    best = osr.best_feasible(study, 10)
    archs = [r["arch"] for r in best]
    assert len(set(archs)) == len(archs)
    assert [r["objective"] for r in best] == sorted((r["objective"] for r in best), reverse=True)
    assert all(r["latency_ms"] <= 0.15 for r in best)


def test_skip_infeasible_prunes_without_evaluating_the_objective():
    calls = []
    proxy = osr.synthetic_accuracy("nb201")

    def objective(arch):
        calls.append(arch)
        return proxy(arch)

    study = osr.latency_constrained_search("nb201", "zcu102", 0.1, objective, 30, seed=0, skip_infeasible=True)
    pruned = study.get_trials(states=(TrialState.PRUNED,))
    assert pruned and all(t.user_attrs["latency_ms"] > 0.1 for t in pruned)
    assert all(estimate(nb201.build_network(a), "zcu102").total_ms <= 0.1 for a in calls)


def test_latency_and_objective_are_cached_per_architecture():
    arch = "|nor_conv_3x3~0|+|nor_conv_3x3~0|skip_connect~1|+|none~0|none~1|nor_conv_1x1~2|"
    oracle = osr.LatencyOracle("nb201", "zcu102")
    a = oracle(arch)
    b = oracle(arch)
    assert a == b == pytest.approx(estimate(nb201.build_network(arch), "zcu102").total_ms)
    assert (oracle.calls, oracle.misses) == (2, 1)
    many = oracle.many([arch, nb201.index_to_arch(7), nb201.index_to_arch(7)])
    assert many[0] == a and many[1] == many[2] == pytest.approx(
        estimate(nb201.build_network(nb201.index_to_arch(7)), "zcu102").total_ms)

    seen = []

    def objective(x):
        seen.append(x)
        return 1.0

    study = osr.latency_constrained_search("nb201", "zcu102", 1.0, objective, 30, seed=0)
    assert len(seen) == len({t.user_attrs["arch"] for t in study.trials})  # one evaluation per architecture


def test_pareto_search_front_is_non_dominated():
    from annette_torch.search.pareto import pareto_front

    study = osr.pareto_search("nb201", "zcu102", "synthetic", 40, seed=0, population_size=10)
    assert [d.name for d in study.directions] == ["MAXIMIZE", "MINIMIZE"]
    front = osr.best_feasible(study, 0)
    assert front
    done = study.get_trials(states=(TrialState.COMPLETE,))
    lat = np.array([t.values[1] for t in done])
    acc = np.array([t.values[0] for t in done])
    expected = {done[i].user_attrs["arch"] for i in pareto_front(lat, acc)}
    assert {r["arch"] for r in front} == expected
    assert {t.user_attrs["arch"] for t in study.best_trials} == expected
    assert [r["latency_ms"] for r in front] == sorted(r["latency_ms"] for r in front)


# ------------------------------------------------------------------------------------------------------
# shared storage, several processes


def _worker(storage: str, study_name: str, n: int, seed: int) -> None:
    import optuna as _optuna

    from annette_torch.search import optuna_search as _osr

    _optuna.logging.set_verbosity(_optuna.logging.WARNING)
    _osr.latency_constrained_search("nb201", "zcu102", 0.2, "synthetic", n, storage=storage,
                                    study_name=study_name, seed=seed)


@pytest.mark.parametrize("kind", ["journal", "sqlite"])
def test_two_processes_share_one_study_without_losing_trials(tmp_path, kind):
    n = 6
    storage = f"journal:{tmp_path / 'study.log'}" if kind == "journal" else f"sqlite:///{tmp_path / 'study.db'}"
    # both workers start on a fresh storage: one creates the study (and the database schema), the other joins
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(storage, "shared", n, seed)) for seed in (11, 12)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0]
    study = optuna.load_study(study_name="shared", storage=osr.open_storage(storage))
    trials = study.get_trials()
    assert len(trials) == 2 * n
    assert sorted(t.number for t in trials) == list(range(2 * n))
    assert all(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials)
    assert all("latency_ms" in t.user_attrs and "arch" in t.user_attrs for t in trials)
    assert study.user_attrs[osr.STUDY_ATTR]["latency_budget_ms"] == 0.2


def test_joining_a_study_with_another_budget_is_an_error(tmp_path):
    storage = f"journal:{tmp_path / 'j.log'}"
    osr.latency_constrained_search("nb201", "zcu102", 0.2, "synthetic", 2, storage=storage, study_name="s")
    with pytest.raises(AnnetteError, match="latency_budget_ms"):
        osr.latency_constrained_search("nb201", "zcu102", 0.3, "synthetic", 2, storage=storage, study_name="s")
    study = osr.latency_constrained_search("nb201", "zcu102", 0.2, "synthetic", 3, storage=storage, study_name="s")
    assert len(study.trials) == 5


def test_storage_errors_are_annette_errors(tmp_path):
    with pytest.raises(AnnetteError, match="storage URL"):
        osr.open_storage("study.db")
    with pytest.raises(AnnetteError, match="does not exist"):
        osr.open_storage(f"journal:{tmp_path / 'missing' / 'x.log'}")
    with pytest.raises(AnnetteError, match="journal:PATH"):
        osr.open_storage("journal:")
    assert osr.open_storage(None) is None


# ------------------------------------------------------------------------------------------------------
# objectives


def test_synthetic_accuracy_is_deterministic_and_documented_as_not_accuracy():
    f, g = osr.synthetic_accuracy("nb201"), osr.synthetic_accuracy("nb201")
    archs = nb201.all_arch_strings()[::997]
    assert [f(a) for a in archs] == [g(a) for a in archs]
    assert f(nb201.index_to_arch(0)) == 10.0  # all-none cell: zero output, chance
    full3 = nb201.arch_string(["nor_conv_3x3"] * 6)
    skip = nb201.arch_string(["skip_connect"] * 6)
    assert f(full3) > f(skip)
    assert "NOT" in osr.synthetic_accuracy.__doc__
    for space in ("nb101", "mbv2"):
        assert "NOT" in osr.synthetic_accuracy(space).__doc__


def test_csv_objective_lookup_and_missing_architectures(tmp_path):
    a, b = nb201.index_to_arch(123), nb201.index_to_arch(4567)
    path = tmp_path / "acc.csv"
    path.write_text(f"arch,accuracy\n{a},91.5\n{b},88.25\n")
    obj = osr.csv_objective(path, "nb201")
    assert obj(a) == 91.5 and obj(b) == 88.25
    with pytest.raises(optuna.TrialPruned):
        obj(nb201.index_to_arch(9))
    # in a search, a missing architecture prunes its trial
    study = osr.latency_constrained_search("nb201", "zcu102", 1.0, str(path), 10, seed=0)
    assert {t.state for t in study.trials} <= {TrialState.COMPLETE, TrialState.PRUNED}
    assert any(t.state == TrialState.PRUNED for t in study.trials)


def test_csv_objective_nb101_matches_by_hash(tmp_path):
    from annette_torch.search.spaces import nb101

    sp = osr.get_space("nb101")
    specs = nb101.sample(3, 0)
    path = tmp_path / "acc101.csv"
    path.write_text("arch,accuracy\n" + f"{nb101.spec_hash(*specs[0])},90\n{sp.encode(specs[1])},80\n")
    obj = osr.csv_objective(path, "nb101")
    assert obj(specs[0]) == 90 and obj(specs[1]) == 80


@pytest.mark.parametrize("text,match", [
    ("", "empty"),
    ("arch,accuracy\n|bad|,1\n", "not a nb201 architecture"),
    (f"arch,accuracy\n{nb201.index_to_arch(5)},high\n", "not a number"),
])
def test_bad_accuracy_csv(tmp_path, text, match):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(AnnetteError, match=match):
        osr.csv_objective(path, "nb201")


def test_bad_arguments():
    with pytest.raises(AnnetteError, match="positive"):
        osr.latency_constrained_search("nb201", "zcu102", -1, "synthetic", 5)
    with pytest.raises(AnnetteError, match="unknown search space"):
        osr.get_space("nb999")
    with pytest.raises(AnnetteError, match="unknown objective"):
        osr.load_objective("accuracy please", "nb201")


def test_space_encodings_round_trip():
    for name in ("nb201", "nb101", "mbv2"):
        sp = osr.get_space(name)
        study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
        trial = study.ask()
        try:
            arch = sp.suggest(trial)
        except optuna.TrialPruned:
            continue
        assert sp.encode(sp.decode(sp.encode(arch))) == sp.encode(arch)
        assert len(sp.network(arch)) > 0


# ------------------------------------------------------------------------------------------------------
# CLI


def test_cli_search_with_journal_storage_and_csv(tmp_path, capsys):
    storage = f"journal:{tmp_path / 'cli.log'}"
    out = tmp_path / "trials.csv"
    args = ["search", "--space", "nb201", "--platform", "zcu102", "--latency-ms", "0.2", "--trials", "12",
            "--storage", storage, "--study", "cli", "--out", str(out), "--top", "3"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "best architectures within the budget" in text and "optuna-dashboard" in text
    assert main(args) == 0  # a second run joins the same study
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 24
    for r in rows:
        if r["feasible"] == "1":
            assert estimate(nb201.build_network(r["arch"]), "zcu102").total_ms <= 0.2


def test_cli_search_multi_objective_and_csv_objective(tmp_path, capsys):
    acc = tmp_path / "acc.csv"
    f = osr.synthetic_accuracy("nb201")
    with acc.open("w") as fh:
        fh.write("arch,accuracy\n")
        for a in nb201.all_arch_strings()[::3]:
            fh.write(f"{a},{f(a):.3f}\n")
    assert main(["search", "--multi-objective", "--trials", "15", "--objective", str(acc), "--seed", "2"]) == 0
    assert "Pareto front" in capsys.readouterr().out
    assert main(["search", "--space", "nb101", "--latency-ms", "3", "--trials", "8"]) == 0


@pytest.mark.parametrize("argv,code,needle", [
    (["search", "--latency-ms", "-1"], 2, "positive"),
    (["search", "--trials", "5"], 1, "--latency-ms"),
    (["search", "--latency-ms", "1", "--objective", "nope.csv"], 1, "no such accuracy file"),
    (["search", "--latency-ms", "1", "--storage", "study.db"], 1, "storage URL"),
    (["search", "--latency-ms", "1", "--platform", "tpu9"], 1, "unknown platform"),
    (["search", "--space", "nb999", "--latency-ms", "1"], 2, "invalid choice"),
])
def test_cli_search_errors_are_one_line(argv, code, needle, capsys):
    assert main(argv) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("annette: error:") and needle in err


def test_mbv2_stitched_network_is_identical_to_the_builder():
    from annette_torch.search.spaces import mbv2

    sp = osr.get_space("mbv2")
    rng = np.random.default_rng(0)
    archs = [tuple(b.ops[rng.integers(len(b.ops))] for b in mbv2.BLOCKS) for _ in range(15)]
    archs.append(tuple("zero" if "zero" in b.ops else b.ops[-1] for b in mbv2.BLOCKS))
    for a in archs:
        assert osr._same_network(sp.network(a), mbv2.build_network(a))
    assert sp._fast is True
    assert estimate(sp.network(archs[-1]), "ncs2").total_ms == estimate(mbv2.build_network(archs[-1]), "ncs2").total_ms


def test_margin_tightens_the_enforced_budget():
    from annette_torch.search.optuna_search import best_feasible, latency_constrained_search
    study = latency_constrained_search("nb201", "zcu102", 0.2, "synthetic", 25, seed=1, margin=0.1)
    rows = best_feasible(study, k=10)
    assert rows and all(r["latency_ms"] <= 0.2 * 0.9 + 1e-12 for r in rows)
    with pytest.raises(AnnetteError):
        latency_constrained_search("nb201", "zcu102", 0.2, "synthetic", 2, margin=1.5)
