"""Optuna searches with predicted latency: constraint soundness, shared storages, objectives, CLI."""

from __future__ import annotations

import ast
import csv
import multiprocessing as mp
import pathlib
import re

import numpy as np
import pytest

optuna = pytest.importorskip("optuna")

from annette_torch import estimate  # noqa: E402
from annette_torch.cli.app import main  # noqa: E402
from annette_torch.errors import AnnetteError  # noqa: E402
import annette_torch.search  # noqa: E402
from annette_torch.search import optuna_search as osr  # noqa: E402
from annette_torch.search.objectives import (  # noqa: E402
    csv_objective, load_objective, read_accuracy_csv, synthetic_accuracy, text_key)
from annette_torch.search.oracle import LatencyOracle  # noqa: E402
from annette_torch.search.spaces import nb101, nb201  # noqa: E402
from annette_torch.search.spaces.registry import get_space, same_network  # noqa: E402
from annette_torch.search.storage import STUDY_ATTR, open_storage  # noqa: E402

from optuna.trial import TrialState  # noqa: E402


pytestmark = pytest.mark.usefixtures("quiet_optuna")


# ------------------------------------------------------------------------------------------------------
# constraint soundness


@pytest.mark.parametrize("space,budget,trials", [("nb201", 0.6, 40), ("nb101", 2.0, 25), ("mbv2", 3.9, 15)])
def test_every_feasible_architecture_satisfies_the_predicted_constraint(space, budget, trials):
    study = osr.latency_constrained_search(space, "zcu102-dnndk", "synthetic", trials, latency_ms=budget, seed=1)
    sp = get_space(space)
    feasible = osr.feasible_trials(study)
    assert feasible, "the budget is loose enough for some feasible trials"
    infeasible = 0
    for t in study.get_trials(states=(TrialState.COMPLETE,)):
        arch = sp.decode(t.user_attrs["arch"])
        ms = estimate(sp.network(arch), "zcu102-dnndk").latency_ms  # recomputed independently
        assert ms == pytest.approx(t.user_attrs["latency_ms"], rel=1e-9)
        constraint = list(t.constraints.values()) if hasattr(t, "constraints") else t.user_attrs["constraint"]
        assert constraint[0] == pytest.approx(ms - budget)
        if t in feasible:
            assert ms <= budget
        else:
            infeasible += 1
            assert ms > budget
    for r in osr.best_feasible(study, 5):
        assert estimate(sp.network(sp.decode(r["arch"])), "zcu102-dnndk").latency_ms <= budget
    # Optuna's own notion of the best trial respects the constraint too
    assert study.best_trial.user_attrs["latency_ms"] <= budget
    assert study.best_trial.value == max(t.value for t in feasible)


def test_best_feasible_is_sorted_distinct_and_within_budget():
    study = osr.latency_constrained_search("nb201", "zcu102-dnndk", "synthetic", 40, latency_ms=0.15, seed=3)
    best = osr.best_feasible(study, 10)
    archs = [r["arch"] for r in best]
    assert len(set(archs)) == len(archs)
    assert [r["objective"] for r in best] == sorted((r["objective"] for r in best), reverse=True)
    assert all(r["latency_ms"] <= 0.15 for r in best)


def test_skip_infeasible_prunes_without_evaluating_the_objective():
    calls = []
    proxy = synthetic_accuracy("nb201")

    def objective(arch):
        calls.append(arch)
        return proxy(arch)

    study = osr.latency_constrained_search("nb201", "zcu102-dnndk", objective, 30, latency_ms=0.45, seed=0,
                                           skip_infeasible=True)
    pruned = study.get_trials(states=(TrialState.PRUNED,))
    assert pruned and all(t.user_attrs["latency_ms"] > 0.45 for t in pruned)
    assert all(estimate(nb201.build_network(a), "zcu102-dnndk").latency_ms <= 0.45 for a in calls)


def test_latency_and_objective_are_cached_per_architecture():
    arch = "|nor_conv_3x3~0|+|nor_conv_3x3~0|skip_connect~1|+|none~0|none~1|nor_conv_1x1~2|"
    oracle = LatencyOracle("nb201", "zcu102-dnndk")
    a = oracle(arch)
    b = oracle(arch)
    assert a == b == pytest.approx(estimate(nb201.build_network(arch), "zcu102-dnndk").latency_ms)
    assert (oracle.calls, oracle.misses) == (2, 1)
    many = oracle.many([arch, nb201.index_to_arch(7), nb201.index_to_arch(7)])
    assert many[0] == a and many[1] == many[2] == pytest.approx(
        estimate(nb201.build_network(nb201.index_to_arch(7)), "zcu102-dnndk").latency_ms)

    seen = []

    def objective(x):
        seen.append(x)
        return 1.0

    study = osr.latency_constrained_search("nb201", "zcu102-dnndk", objective, 30, latency_ms=1.0, seed=0)
    assert len(seen) == len({t.user_attrs["arch"] for t in study.trials})  # one evaluation per architecture


def test_both_searches_take_one_argument_order():
    import inspect

    def positional(f):
        return [p.name for p in inspect.signature(f).parameters.values() if p.kind == p.POSITIONAL_OR_KEYWORD]
    assert positional(osr.latency_constrained_search) == positional(osr.pareto_search) == \
        ["space", "platform", "objective", "n_trials"]
    for f in (osr.latency_constrained_search, osr.pareto_search):
        assert inspect.signature(f).parameters["latency_ms"].kind == inspect.Parameter.KEYWORD_ONLY


def test_pareto_search_front_is_non_dominated():
    from annette_torch.search.pareto import pareto_front

    study = osr.pareto_search("nb201", "zcu102-dnndk", "synthetic", 40, seed=0, population_size=10)
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
    _osr.latency_constrained_search("nb201", "zcu102-dnndk", "synthetic", n, latency_ms=0.6, storage=storage,
                                    study_name=study_name, seed=seed)


@pytest.mark.slow
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
    study = optuna.load_study(study_name="shared", storage=open_storage(storage))
    trials = study.get_trials()
    assert len(trials) == 2 * n
    assert sorted(t.number for t in trials) == list(range(2 * n))
    assert all(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials)
    assert all("latency_ms" in t.user_attrs and "arch" in t.user_attrs for t in trials)
    assert study.user_attrs[STUDY_ATTR]["latency_budget_ms"] == 0.6


def test_joining_a_study_with_another_budget_is_an_error(tmp_path):
    storage = f"journal:{tmp_path / 'j.log'}"
    osr.latency_constrained_search("nb201", "zcu102-dnndk", "synthetic", 2, latency_ms=0.6, storage=storage, study_name="s")
    with pytest.raises(AnnetteError, match="latency_budget_ms"):
        osr.latency_constrained_search("nb201", "zcu102-dnndk", "synthetic", 2, latency_ms=0.3, storage=storage,
                                       study_name="s")
    study = osr.latency_constrained_search("nb201", "zcu102-dnndk", "synthetic", 3, latency_ms=0.6, storage=storage,
                                           study_name="s")
    assert len(study.trials) == 5


def test_storage_errors_are_annette_errors(tmp_path):
    with pytest.raises(AnnetteError, match="storage URL"):
        open_storage("study.db")
    with pytest.raises(AnnetteError, match="does not exist"):
        open_storage(f"journal:{tmp_path / 'missing' / 'x.log'}")
    with pytest.raises(AnnetteError, match="journal:PATH"):
        open_storage("journal:")
    assert open_storage(None) is None


# ------------------------------------------------------------------------------------------------------
# objectives


def test_synthetic_accuracy_is_deterministic_and_documented_as_not_accuracy():
    f, g = synthetic_accuracy("nb201"), synthetic_accuracy("nb201")
    archs = nb201.all_arch_strings()[::997]
    assert [f(a) for a in archs] == [g(a) for a in archs]
    assert f(nb201.arch_string(["none"] * 6)) == 10.0  # all-none cell: zero output, chance
    full3 = nb201.arch_string(["nor_conv_3x3"] * 6)
    skip = nb201.arch_string(["skip_connect"] * 6)
    assert f(full3) > f(skip)
    assert "NOT" in synthetic_accuracy.__doc__
    for space in ("nb101", "mbv2"):
        assert "NOT" in synthetic_accuracy(space).__doc__


def test_csv_objective_lookup_and_missing_architectures(tmp_path):
    a, b = nb201.index_to_arch(123), nb201.index_to_arch(4567)
    path = tmp_path / "acc.csv"
    path.write_text(f"arch,accuracy\n{a},91.5\n{b},88.25\n")
    obj = csv_objective(path, "nb201")
    assert obj(a) == 91.5 and obj(b) == 88.25
    with pytest.raises(optuna.TrialPruned):
        obj(nb201.index_to_arch(9))
    # in a search, a missing architecture prunes its trial
    study = osr.latency_constrained_search("nb201", "zcu102-dnndk", str(path), 10, latency_ms=1.0, seed=0)
    assert {t.state for t in study.trials} <= {TrialState.COMPLETE, TrialState.PRUNED}
    assert any(t.state == TrialState.PRUNED for t in study.trials)


def test_csv_objective_nb101_matches_by_hash(tmp_path):
    sp = get_space("nb101")
    specs = nb101.sample(3, 0)
    path = tmp_path / "acc101.csv"
    path.write_text("arch,accuracy\n" + f"{nb101.spec_hash(*specs[0])},90\n{sp.encode(specs[1])},80\n")
    obj = csv_objective(path, "nb101")
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
        csv_objective(path, "nb201")


def test_bad_arguments():
    with pytest.raises(AnnetteError, match="positive"):
        osr.latency_constrained_search("nb201", "zcu102-dnndk", "synthetic", 5, latency_ms=-1)
    with pytest.raises(AnnetteError, match="positive"):
        osr.pareto_search("nb201", "zcu102-dnndk", "synthetic", 5, latency_ms=True)
    with pytest.raises(TypeError):  # the budget is a keyword: a number in the objective's place is no budget
        osr.latency_constrained_search("nb201", "zcu102-dnndk", 0.6, "synthetic", 5)
    with pytest.raises(AnnetteError, match="unknown search space"):
        get_space("nb999")
    with pytest.raises(AnnetteError, match="unknown objective"):
        load_objective("accuracy please", "nb201")


@pytest.mark.parametrize("name", ["nb201", "nb101", "mbv2"])
def test_space_encodings_round_trip(name):
    sp = get_space(name)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    archs = []
    for _ in range(50):  # NB101 prunes invalid cells: draw until a few valid ones
        trial = study.ask()
        try:
            archs.append(sp.suggest(trial))
        except optuna.TrialPruned:
            assert name == "nb101" and trial.user_attrs["invalid"]
        if len(archs) == 3:
            break
    assert len(archs) == 3
    for arch in archs:
        text = sp.encode(arch)
        back = sp.decode(text)
        assert sp.encode(back) == text
        assert same_network(sp.network(back), sp.network(arch)) and len(sp.network(arch)) > 1
    with pytest.raises(ValueError):
        sp.decode("not an architecture")


# ------------------------------------------------------------------------------------------------------
# CLI


def test_cli_search_with_journal_storage_and_csv(tmp_path, capsys):
    storage = f"journal:{tmp_path / 'cli.log'}"
    out = tmp_path / "trials.csv"
    args = ["search", "--space", "nb201", "--platform", "zcu102-dnndk", "--latency-ms", "0.6", "--trials", "12",
            "--storage", storage, "--study", "cli", "--out", str(out), "--top", "3"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "best architectures within the budget" in text and "optuna-dashboard" in text
    assert main(args) == 0  # a second run joins the same study
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 24
    for r in rows:
        if r["feasible"] == "1":
            assert estimate(nb201.build_network(r["arch"]), "zcu102-dnndk").latency_ms <= 0.6


def test_cli_search_multi_objective_and_csv_objective(tmp_path, capsys):
    acc = tmp_path / "acc.csv"
    f = synthetic_accuracy("nb201")
    with acc.open("w") as fh:
        fh.write("arch,accuracy\n")
        for a in nb201.all_arch_strings()[::3]:
            fh.write(f"{a},{f(a):.3f}\n")
    table = read_accuracy_csv(acc, "nb201")
    assert main(["search", "--multi-objective", "--trials", "15", "--objective", str(acc), "--seed", "2"]) == 0
    text = capsys.readouterr().out
    assert "Pareto front (fastest first)" in text
    front = re.findall(r"objective +([\d.]+) +latency ([\d.]+) ms +trial \d+ +(\S+)", text)
    assert front
    for value, ms, arch in front:  # every listed architecture is scored by the CSV and predicted as printed
        assert float(value) == pytest.approx(table[arch], abs=1e-3)
        assert float(ms) == pytest.approx(estimate(nb201.build_network(arch), "zcu102").latency_ms,
                                          abs=1e-4)
    lat = [float(ms) for _, ms, _ in front]
    assert lat == sorted(lat)
    assert main(["search", "--space", "nb101", "--latency-ms", "3", "--trials", "8"]) == 0
    text = capsys.readouterr().out
    assert "search     nb101 on zcu102-vai3" in text and "trials     8 run here" in text


@pytest.mark.parametrize("argv,code,needle", [
    (["search", "--latency-ms", "-1"], 2, "positive"),
    (["search", "--trials", "5"], 1, "--latency-ms"),
    (["search", "--latency-ms", "1", "--objective", "nope.csv"], 1, "no such accuracy file"),
    (["search", "--latency-ms", "1", "--storage", "study.db"], 1, "storage URL"),
    (["search", "--latency-ms", "1", "--platform", "tpu9"], 1, "unknown platform"),
    (["search", "--space", "nb999", "--latency-ms", "1"], 1, "unknown search space"),
])
def test_cli_search_errors_are_one_line(argv, code, needle, capsys):
    assert main(argv) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("annette: error:") and needle in err


def test_mbv2_stitched_network_is_identical_to_the_builder():
    from annette_torch.search.spaces import mbv2

    sp = get_space("mbv2")
    rng = np.random.default_rng(0)
    archs = [tuple(b.ops[rng.integers(len(b.ops))] for b in mbv2.BLOCKS) for _ in range(15)]
    archs.append(tuple("zero" if "zero" in b.ops else b.ops[-1] for b in mbv2.BLOCKS))
    for a in archs:
        assert same_network(sp.network(a), mbv2.build_network(a))
    assert sp._fast is True
    assert estimate(sp.network(archs[-1]), "ncs2").latency_ms == estimate(mbv2.build_network(archs[-1]), "ncs2").latency_ms


def test_margin_tightens_the_enforced_budget():
    from annette_torch.search.optuna_search import best_feasible, latency_constrained_search
    study = latency_constrained_search("nb201", "zcu102-dnndk", "synthetic", 25, latency_ms=0.6, seed=1, margin=0.1)
    rows = best_feasible(study, k=10)
    assert rows and all(r["latency_ms"] <= 0.6 * 0.9 + 1e-12 for r in rows)
    with pytest.raises(AnnetteError):
        latency_constrained_search("nb201", "zcu102-dnndk", "synthetic", 2, latency_ms=0.6, margin=1.5)


def test_enqueue_runs_the_given_architectures_first():
    sp = get_space("nb201")
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    archs = [nb201.index_to_arch(123), nb201.index_to_arch(4567)]
    osr.enqueue(study, sp, archs)
    study.optimize(lambda t: float(len(sp.suggest(t))), n_trials=3)
    assert [sp.suggest(optuna.trial.FixedTrial(t.params)) for t in study.trials[:2]] == archs
    with pytest.raises(AnnetteError, match="not supported for mbv2"):
        osr.enqueue(study, "mbv2", [])


# ------------------------------------------------------------------------------------------------------
# accuracy tables and module structure


def test_read_accuracy_csv_headers_and_keys(tmp_path):
    a, b = nb201.index_to_arch(5), nb201.index_to_arch(6)
    plain = tmp_path / "plain.csv"
    plain.write_text(f"{a},70.5\n\n{b},71\n")  # no header, a blank line
    assert read_accuracy_csv(plain) == {a: 70.5, b: 71.0}
    named = tmp_path / "named.csv"
    named.write_text(f"idx,test_accuracy,arch\n0,80,{a}\n1,81, {b} \n")  # columns found by name
    assert read_accuracy_csv(named, "nb201") == {a: 80.0, b: 81.0}
    # NB101: the encoding and the spec hash of a cell give the same key
    sp = get_space("nb101")
    spec = nb101.sample(1, 0)[0]
    assert text_key(sp, sp.encode(spec)) == text_key(sp, nb101.spec_hash(*spec)) == nb101.spec_hash(*spec)
    short = tmp_path / "short.csv"
    short.write_text(f"arch,accuracy\n{a}\n")
    with pytest.raises(AnnetteError, match=r"short.csv:2: expected 'arch,accuracy'"):
        read_accuracy_csv(short)


def test_search_api_names_are_importable_from_optuna_search():
    for name in osr.__all__:
        assert getattr(osr, name) is not None
    assert osr.get_space is get_space and osr.LatencyOracle is LatencyOracle
    assert osr.synthetic_accuracy is synthetic_accuracy and osr.open_storage is open_storage


def _search_imports() -> dict[str, set[str]]:
    """Module -> the modules of annette_torch.search it imports (anywhere in the file, functions included)."""
    root = pathlib.Path(annette_torch.search.__file__).parent
    found: dict[str, set[str]] = {}
    for f in root.rglob("*.py"):
        parts = list(f.relative_to(root).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        name = ".".join(["annette_torch.search", *(parts[:-1] if is_pkg else parts)])
        pkg = name if is_pkg else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1] if node.level else []
                mod = ".".join(base + ([node.module] if node.module else []))
                deps.update([mod] + [f"{mod}.{a.name}" for a in node.names])
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
        found[name] = deps
    assert "annette_torch.search.optuna_search" in found
    return found


def test_search_modules_import_no_cycle_and_no_private_names():
    found = _search_imports()
    for name, deps in found.items():
        assert not any(d == "search" or d.startswith("search.") for d in deps), f"{name} imports top-level search"
    edges = {m: {d for d in deps if d in found and d != m} for m, deps in found.items()}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(n == goal or (n not in seen and not seen.add(n) and reaches(n, goal, seen)) for n in edges[start])

    cycles = [m for m in edges if reaches(m, m, set())]
    assert not cycles, f"import cycle through {cycles}"
    pareto_src = (pathlib.Path(annette_torch.search.__file__).parent / "pareto.py").read_text(encoding="utf-8")
    assert "optuna_search" not in pareto_src
