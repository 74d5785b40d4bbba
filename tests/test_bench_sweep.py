"""Sweeps: resumable, crash-isolated, atomic per configuration; export and ingest."""

from __future__ import annotations

import csv
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from annette_torch.bench.store import Store
from annette_torch.bench.suites import SUITES
from annette_torch.bench.sweep import parse_budget, run_sweep
from annette_torch.errors import AnnetteError

HERE = Path(__file__).resolve().parent
FAKE = "fake_runner:FakeRunner"


@pytest.fixture(autouse=True)
def _importable_fake(monkeypatch):
    # the worker is a spawned process: it finds fake_runner through PYTHONPATH
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    sys.path.insert(0, str(HERE))
    yield
    sys.path.remove(str(HERE))


def _configs(n=6):
    return SUITES["fc"].configs(n=n, seed=1)


def _layer_rows(db):
    for _ in range(50):  # the sweep may be creating the schema right now
        try:
            con = sqlite3.connect(db, timeout=10)
            rows = con.execute("SELECT c.config_id, COUNT(l.idx) FROM configs c LEFT JOIN layers l ON "
                               "l.config=c.id GROUP BY c.id").fetchall()
            con.close()
            return dict(rows)
        except sqlite3.OperationalError:
            time.sleep(0.1)
    raise AssertionError("measurement database stayed locked")


@pytest.mark.slow
def test_failures_are_recorded_and_the_sweep_goes_on(tmp_path):
    cfgs = _configs(6)
    ids = [c["config_id"] for c in cfgs]
    with Store(tmp_path / "m.sqlite") as st:
        res = run_sweep(st, "fake", "fc", cfgs, FAKE, {"raise_on": [ids[1]], "hang_on": [ids[2]], "crash_on": [ids[3]]},
                        iterations=5, warmup=1, timeout_s=3, progress=False)
        assert (res.measured, res.failed) == (3, 3)
        rows = {r["config_id"]: r for r in st.rows() if r["status"] == "failed"}
        assert "RuntimeError: toolchain rejected" in rows[ids[1]]["error"]
        assert "timed out after 3 s" in rows[ids[2]]["error"]
        assert "crashed" in rows[ids[3]]["error"] or "killed" in rows[ids[3]]["error"]
        # a second run skips everything; retrying the failed ones with a healthy runner fills them in
        again = run_sweep(st, "fake", "fc", cfgs, FAKE, {}, iterations=5, warmup=1, progress=False)
        assert (again.measured, again.skipped) == (0, 6)
        retry = run_sweep(st, "fake", "fc", cfgs, FAKE, {}, iterations=5, warmup=1, progress=False, retry_failed=True)
        assert retry.measured == 3
        assert st.counts()[("fake", "fc")] == {"ok": 6, "failed": 0}


@pytest.mark.slow
def test_killed_sweep_resumes_without_loss_or_duplicates(tmp_path):
    db = tmp_path / "m.sqlite"
    n = 30
    cmd = [sys.executable, "-c",
           "import sys; from annette_torch.bench.store import Store; from annette_torch.bench.suites import SUITES;"
           "from annette_torch.bench.sweep import run_sweep;"
           f"st=Store({str(db)!r}); run_sweep(st,'fake','fc',SUITES['fc'].configs(n={n},seed=1),{FAKE!r},"
           "{'slow':0.05},iterations=3,warmup=0,progress=False,lease_s=2)"]  # (short lease: taken over in 2 s)
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    p = subprocess.Popen(cmd, env=env, start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        time.sleep(0.3)
        if db.exists() and len(_layer_rows(db)) >= 5:
            break
    os.killpg(p.pid, signal.SIGKILL)  # the sweep and its worker, mid-run
    p.wait()
    before = _layer_rows(db)
    assert 5 <= len(before) < n
    expected_layers = {c["config_id"]: len(SUITES["fc"].build(c)) for c in SUITES["fc"].configs(n=n, seed=1)}
    assert all(cnt == expected_layers[cid] for cid, cnt in before.items()), "no half-written configuration"
    with Store(db) as st:
        res = run_sweep(st, "fake", "fc", SUITES["fc"].configs(n=n, seed=1), FAKE, {}, iterations=3, warmup=0,
                        progress=False)
    after = _layer_rows(db)
    assert res.skipped == len(before) and res.measured == n - len(before)
    assert len(after) == n and all(after[c] == expected_layers[c] for c in after)


def test_budget_stops_early(tmp_path):
    with Store(tmp_path / "m.sqlite") as st:
        res = run_sweep(st, "fake", "fc", _configs(20), FAKE, {"slow": 0.2}, iterations=2, warmup=0,
                        budget_s=0.5, progress=False)
    assert res.stopped_by_budget and 1 <= res.measured < 20


def test_one_measuring_process_serves_several_sweeps(tmp_path):
    """A caller's process measures both sweeps (the same worker, still running after them) and stops at the
    end of its block; a process of another runner is refused."""
    from annette_torch.bench.sweep import measuring_process
    with Store(tmp_path / "m.sqlite") as st, measuring_process(FAKE, {"trace": str(tmp_path / "t")}) as proc:
        a = run_sweep(st, "fake", "fc", _configs(3), FAKE, {"trace": str(tmp_path / "t")}, iterations=2, warmup=0,
                      progress=False, process=proc)
        pid = proc.proc.pid
        b = run_sweep(st, "fake", "add", SUITES["add"].configs(n=2, seed=1), FAKE, {"trace": str(tmp_path / "t")},
                      iterations=2, warmup=0, progress=False, process=proc, max_s=0.25)
        assert proc.proc.is_alive() and proc.proc.pid == pid
        with pytest.raises(AnnetteError, match="measuring process runs"):
            run_sweep(st, "fake", "fc", _configs(4), FAKE, {}, progress=False, process=proc)
        worker = proc.proc
    assert (a.measured, b.measured) == (3, 2) and not worker.is_alive() and proc.proc is None
    pids = {line.split()[0] for line in (tmp_path / "t").read_text().splitlines()}
    assert pids == {str(pid)}


def test_stored_iterations_are_those_timed(tmp_path):
    """A budget that cuts a slow configuration's runs is recorded: the store says how many were timed."""
    from annette_torch.bench.runners.base import MIN_ITERATIONS
    with Store(tmp_path / "m.sqlite") as st:
        run_sweep(st, "ort-cpu", "conv", SUITES["conv"].configs(n=2, seed=1), "ort-cpu", {"threads": 1},
                  iterations=20, warmup=2, progress=False, max_s=1e-6)
    con = sqlite3.connect(tmp_path / "m.sqlite")
    assert [r[0] for r in con.execute("SELECT iterations FROM configs")] == [MIN_ITERATIONS] * 2
    con.close()


def test_parse_budget():
    assert parse_budget("10m") == 600 and parse_budget("2h") == 7200 and parse_budget("90s") == 90
    with pytest.raises(AnnetteError):
        parse_budget("ten minutes")
    with pytest.raises(AnnetteError):
        parse_budget("-1m")


def test_cli_bench_real_ort_and_export(tmp_path, capsys):
    from annette_torch.cli.app import main
    db, out = tmp_path / "m.sqlite", tmp_path / "r.csv"
    assert main(["bench", "--platform", "ort-cpu", "--suite", "conv_bn_relu", "-n", "3", "--db", str(db),
                 "--iterations", "5"]) == 0
    assert main(["bench", "export", "--db", str(db), "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert {"suite", "config_id", "status", "layer", "layer_type", "fused", "time_ms"} <= set(rows[0])
    assert {r["status"] for r in rows} == {"ok"}
    fused = {(r["layer_type"], r["fused"]) for r in rows}
    assert ("Relu", "fused") in fused and ("Conv", "not-fused") in fused  # ORT fuses conv+bn+relu
    # resumable: the same command measures nothing new
    capsys.readouterr()
    assert main(["bench", "--platform", "ort-cpu", "--suite", "conv_bn_relu", "-n", "3", "--db", str(db)]) == 0
    assert "0 measured, 0 failed, 3 already stored" in capsys.readouterr().out


@pytest.mark.slow
def test_cli_bench_errors(tmp_path, capsys):
    from annette_torch.cli.app import main
    assert main(["bench", "--platform", "tpu", "--suite", "conv", "--db", str(tmp_path / "x.db")]) == 1
    assert main(["bench", "--platform", "ort-cpu", "--suite", "nope", "--db", str(tmp_path / "x.db")]) == 1
    assert main(["bench", "export", "--db", str(tmp_path / "none.db"), "--out", str(tmp_path / "o.csv")]) == 1
    (tmp_path / "junk.db").write_text("not sqlite at all, clearly" * 100)
    assert main(["bench", "status", "--db", str(tmp_path / "junk.db")]) == 1
    err = capsys.readouterr().err
    assert err.count("annette: error:") == 4 and "Traceback" not in err
    assert main(["bench", "--list"]) == 0


def test_ingest_job_folder_and_corrupt_report(tmp_path):
    from annette_torch.bench.ingest import ingest_reports
    fixtures = HERE / "fixtures" / "dpu"
    reports = sorted(p for p in fixtures.iterdir() if p.is_file() and "trunc" not in p.name and "unknown" not in p.name)
    db = tmp_path / "m.sqlite"
    assert ingest_reports([str(reports[0])], "zcu102-dnndk", str(db)) == (1, 0, 0)
    assert ingest_reports([str(reports[0])], "zcu102-dnndk", str(db)) == (0, 0, 1)  # again: kept, not duplicated
    trunc = [p for p in fixtures.iterdir() if "trunc" in p.name]
    assert trunc, "fixture with a truncated report expected"
    db2 = tmp_path / "m2.sqlite"
    assert ingest_reports([str(trunc[0])], "zcu102-dnndk", str(db2)) == (0, 1, 0)
    assert not db2.exists() or Store(db2).counts() == {}
