"""Shared sweeps: several workers on one store (an SQLite file, and a real PostgreSQL server) measure every
configuration of the plan exactly once; a killed worker's claim returns after its lease; workers on one
machine take turns; status per worker and machine; the job-folder flow on a shared store; passwords masked."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from annette_torch.bench import claims as C
from annette_torch.bench.store import Store
from annette_torch.errors import AnnetteError
from annette_torch.bench.suites import SUITES
from annette_torch.bench.sweep import CLAIM_AHEAD, run_sweep
from annette_torch.dburl import driver_url

HERE = Path(__file__).resolve().parent
FAKE = "fake_runner:FakeRunner"
PASSWORD = "pw-Zq7-secret"  # pg_server.PASSWORD: must never be printed


@pytest.fixture(autouse=True)
def _importable_fake_and_own_lock(monkeypatch, tmp_path):
    # the measuring processes are spawned: they find fake_runner through PYTHONPATH; the machine's measuring
    # lock lives in this test's folder (the test never waits on another session's measurements)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("ANNETTE_LOCK_DIR", str(tmp_path))
    sys.path.insert(0, str(HERE))
    yield
    sys.path.remove(str(HERE))


@pytest.fixture(params=["sqlite", "postgresql"])
def store_target(request, tmp_path):
    """One store per test: an SQLite file, or a fresh database on the session's PostgreSQL server."""
    if request.param == "sqlite":
        return str(tmp_path / "m.sqlite")
    url = request.getfixturevalue("pg_url")
    name = f"t{os.getpid()}_{int(time.time() * 1e6) % 10**9}"
    admin = create_engine(driver_url(url), isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    return url.rsplit("/", 1)[0] + "/" + name


def _plan(n: int) -> list[dict]:
    return SUITES["fc"].configs(n=n, seed=3)


def _worker_cmd(target: str, name: str, n: int, runner_kw: dict, lease: float = 5.0) -> list[str]:
    code = ("import json, sys; from annette_torch.bench.store import Store; from annette_torch.bench.suites import "
            "SUITES; from annette_torch.bench.sweep import run_sweep\n"
            f"st = Store({target!r})\n"
            f"r = run_sweep(st, 'fake', 'fc', SUITES['fc'].configs(n={n}, seed=3), {FAKE!r}, {runner_kw!r}, "
            f"iterations=2, warmup=0, progress=False, worker={name!r}, lease_s={lease})\n"
            "print(json.dumps({'measured': r.measured, 'failed': r.failed, 'skipped': r.skipped, "
            "'by_others': r.by_others}))\n")
    return [sys.executable, "-c", code]


def _stored(target: str) -> list[tuple[str, str, str | None]]:
    """(config_id, status, worker) of every stored configuration, duplicates included."""
    with Store(target, create=False) as st, st.transaction(write=False) as c:
        return [tuple(r) for r in c.execute(text(
            "SELECT c.config_id, c.status, r.worker FROM configs c JOIN runs r ON r.id = c.run_id "
            "WHERE c.platform = 'fake' AND c.suite = 'fc'"))]


@pytest.mark.slow
def test_two_workers_measure_the_plan_once(store_target, tmp_path):
    n = 24
    trace = tmp_path / "trace.txt"
    procs = [subprocess.Popen(_worker_cmd(store_target, f"w{i}", n, {"slow": 0.1, "trace": str(trace)}),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in (1, 2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    res = [json.loads(o[0].strip().splitlines()[-1]) for o in outs]
    rows = _stored(store_target)
    ids = [r[0] for r in rows]
    plan = {c["config_id"] for c in _plan(n)}
    assert len(ids) == len(set(ids)), "no configuration stored twice"
    assert set(ids) == plan, "none lost: the union is the plan"
    assert {r[1] for r in rows} == {"ok"}
    assert sum(r["measured"] for r in res) == n  # each measured once, by one of the two
    assert all(r["measured"] + r["by_others"] + r["skipped"] == n for r in res)
    assert {r[2] for r in rows} == {"w1", "w2"}, "both workers took part"
    # one machine, a runner that times its CPU: the measurements never overlapped
    spans = sorted((float(a), float(b), pid) for pid, a, b in (line.split() for line in trace.read_text().splitlines()))
    assert len(spans) == n
    assert all(nxt[0] >= cur[1] - 1e-3 for cur, nxt in zip(spans, spans[1:]))
    with Store(store_target) as st:
        prog = C.progress(st)
    (s,) = prog.suites
    assert (s.planned, s.ok, s.failed, s.measuring, s.remaining) == (n, n, 0, 0, 0)
    assert {w.worker for w in prog.workers} == {"w1", "w2"} and sum(w.ok for w in prog.workers) == n
    assert [(m.workers, m.ok) for m in prog.machines] == [(2, n)]


@pytest.mark.slow
def test_killed_worker_claim_returns_after_its_lease(store_target):
    n, lease = 8, 2.0
    victim = subprocess.Popen(_worker_cmd(store_target, "victim", n, {"slow": 60}, lease=lease),
                              start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    held, deadline = None, time.time() + 120
    while held is None and time.time() < deadline:
        time.sleep(0.2)
        try:
            with Store(store_target, create=False) as st, st.transaction(write=False) as c:
                held = c.execute(text("SELECT config_id, lease_until FROM claims WHERE worker='victim' "
                                      "AND state='claimed'")).first()
        except Exception:  # noqa: BLE001 - the store is being created right now
            continue
    assert held is not None, victim.stderr.read().decode()[-2000:] if victim.poll() is not None else "no claim"
    os.killpg(victim.pid, signal.SIGKILL)  # mid-configuration: the sweep and its measuring process
    victim.wait()
    killed = time.time()
    with Store(store_target) as st:
        res = run_sweep(st, "fake", "fc", _plan(n), FAKE, {}, iterations=2, warmup=0, progress=False,
                        worker="rescuer", lease_s=lease)
        rows = {cid: (status, worker) for cid, status, worker in _stored(store_target)}
        with st.transaction(write=False) as c:
            finished = c.execute(text("SELECT finished FROM configs WHERE config_id = :c"), {"c": held[0]}).scalar()
    assert res.measured == n and res.taken_over == CLAIM_AHEAD  # the victim's: the one measured and those ahead
    assert set(rows) == {c["config_id"] for c in _plan(n)} and rows[held[0]] == ("ok", "rescuer")
    assert finished >= held[1] - 0.5 and time.time() - killed < 60  # taken over once its lease had run out


def test_a_claim_says_which_configurations_it_took_from_a_stopped_worker(store_target):
    """An expired claim taken at the first attempt counts as taken over too (a slow machine may start the next
    worker only after the lease of a killed one ran out), a fresh or a stored one does not."""
    with Store(store_target) as st:
        C.add_plan(st, "p", "s", ["a", "b"])
        assert C.claim(st, "p", "s", ["a"], "w1", "m1", lease_s=-1).taken_over == []  # fresh; its lease already past
        got = C.claim(st, "p", "s", ["a", "b"], "w2", "m2", lease_s=60)
        assert (got.claimed, got.taken_over) == (["a", "b"], ["a"])
        again = C.claim(st, "p", "s", ["a"], "w2", "m2", lease_s=60, again=True)
        assert (again.claimed, again.taken_over) == (["a"], [])  # its own claim, written again


def test_a_claim_is_one_workers_until_its_lease_expires(store_target):
    with Store(store_target) as st:
        ids = ["a", "b", "c"]
        C.add_plan(st, "p", "s", ids)
        assert C.claim(st, "p", "s", ids[:2], "w1", "m1", lease_s=60).claimed == ["a", "b"]
        got = C.claim(st, "p", "s", ids, "w2", "m2", lease_s=60)
        assert (got.claimed, got.busy, got.stored) == (["c"], ["a", "b"], [])
        assert C.renew(st, "p", "s", ["a", "b", "c"], "w1", lease_s=-1) == 2  # w1's lease on a, b now past
        got = C.claim(st, "p", "s", ids, "w3", "m3", lease_s=60)
        assert (got.claimed, got.busy) == (["a", "b"], ["c"])  # expired claims are taken over, live ones not
        assert C.renew(st, "p", "s", ["a"], "w1") == 0  # w1 lost it
        run = st.start_run("p", "r", {}, {}, worker="w3", machine="m3")
        from annette_torch.bench.store import ConfigResult
        assert st.add(run, "p", ConfigResult("s", "a", {}, "ok"))
        assert not st.add(run, "p", ConfigResult("s", "a", {}, "ok"))  # stored once; the second is dropped
        got = C.claim(st, "p", "s", ["a"], "w4", "m4", lease_s=-1)
        assert got.stored == ["a"] and not got.claimed
        C.release(st, "p", "s", ["b"], "w3")
        assert C.claim(st, "p", "s", ["b"], "w4", "m4").claimed == ["b"]  # released: free at once
        prog = C.progress(st)
        (s,) = prog.suites
        assert (s.planned, s.ok, s.failed, s.measuring, s.remaining) == (3, 1, 0, 2, 0)


def test_retry_failed_reclaims_failed_configurations(tmp_path):
    from annette_torch.bench.store import ConfigResult
    with Store(tmp_path / "m.sqlite") as st:
        run = st.start_run("p", "r", {}, {})
        assert C.claim(st, "p", "s", ["a"], "w1", "m").claimed == ["a"]
        st.add(run, "p", ConfigResult("s", "a", {}, "failed", error="boom"))
        assert C.claim(st, "p", "s", ["a"], "w2", "m").stored == ["a"]
        assert C.claim(st, "p", "s", ["a"], "w2", "m", retry_failed=True).claimed == ["a"]
        assert C.claim(st, "p", "s", ["a"], "w3", "m", retry_failed=True).busy == ["a"]
        assert st.add(run, "p", ConfigResult("s", "a", {}, "ok"))  # replaces the failed row
        assert st.counts() == {("p", "s"): {"ok": 1, "failed": 0}}


@pytest.mark.slow
def test_status_and_sweep_on_postgresql_never_print_the_password(pg_url, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    cli = [sys.executable, "-m", "annette_torch.cli.app"]
    runs = [
        ["bench", "-p", "fake", "-s", "fc", "-n", "3", "--runner", FAKE, "--iterations", "2", "--warmup", "0",
         "--db", pg_url, "--worker", "alpha"],
        ["bench", "status", "--db", pg_url],
        ["bench", "export", "--db", pg_url, "--out", str(tmp_path / "x.csv")],
        ["bench", "status", "--db", pg_url.replace(PASSWORD, PASSWORD + "-wrong")],
        ["bench", "status", "--db", pg_url.rsplit("/", 1)[0] + "/no_such_db"],
    ]
    outs = [subprocess.run(cli + r, capture_output=True, text=True, env=env, timeout=300) for r in runs]
    for r, o in zip(runs, outs):
        both = o.stdout + o.stderr
        assert PASSWORD not in both, (r, both)
        assert "Traceback" not in both, both
    assert [o.returncode for o in outs] == [0, 0, 0, 1, 1], [o.stderr for o in outs]
    assert "3 measured" in outs[0].stdout and "annette:***@" in outs[0].stdout
    status = outs[1].stdout
    assert "alpha" in status and "last activity" in status and "remaining" in status
    assert outs[3].stderr.count("annette: error:") == 1 and "password authentication failed" in outs[3].stderr
    assert outs[4].stderr.count("annette: error:") == 1


def test_status_table(tmp_path, capsys):
    from annette_torch.cli.app import main
    db = str(tmp_path / "m.sqlite")
    assert main(["bench", "-p", "fake", "-s", "fc", "-n", "3", "--runner", FAKE, "--iterations", "2", "--warmup",
                 "0", "--db", db, "--worker", "bench-a"]) == 0
    capsys.readouterr()
    assert main(["bench", "status", "--db", db]) == 0
    out = capsys.readouterr().out.splitlines()
    head = next(i for i, line in enumerate(out) if line.startswith("platform"))
    assert out[head].split() == ["platform", "suite", "planned", "measured", "failed", "measuring", "remaining"]
    assert out[head + 1].split() == ["fake", "fc", "3", "3", "0", "0", "0"]
    worker = next(line for line in out if line.startswith("bench-a"))
    assert worker.split()[2:5] == ["3", "0", "0"] and worker.endswith("ago")


@pytest.mark.slow
def test_job_folders_shared_by_two_machines(store_target, tmp_path, capsys):
    """Two hosts with their own boards share one sweep: each writes the job folders of its share (--take),
    a third gets none; reports ingested from both settle every claim."""
    import shutil
    from annette_torch.cli.app import main
    argv = ["bench", "-p", "zcu102-dnndk", "-s", "conv", "-n", "4", "--db", store_target, "--iterations", "5"]
    for host in ("a", "b", "c"):
        assert main(argv + ["--jobs-dir", str(tmp_path / host), "--take", "2", "--worker", host]) == 0
    out = capsys.readouterr().out
    assert "wrote 2 job folders" in out and "wrote 0 job folders" in out and "4 claimed by other workers" in out
    jobs = sorted(p.parent for host in "ab" for p in (tmp_path / host).glob("*/annette-job.json"))
    assert len(jobs) == 4 and not list((tmp_path / "c").glob("*/annette-job.json"))
    assert main(argv + ["--jobs-dir", str(tmp_path / "a"), "--take", "2", "--worker", "a"]) == 0  # again: its own
    assert "wrote 2 job folders" in capsys.readouterr().out
    assert sorted(p.parent for host in "ab" for p in (tmp_path / host).glob("*/annette-job.json")) == jobs
    assert len({json.loads((j / "annette-job.json").read_text())["config"]["config_id"] for j in jobs}) == 4
    with Store(store_target) as st:
        (s,) = C.progress(st).suites
        assert (s.planned, s.measuring, s.remaining) == (4, 4, 0)
    fixture = HERE / "fixtures" / "dpu" / "job_smallcnn" / "reports"
    for j in jobs:  # the boards' reports, copied back
        shutil.copytree(fixture, j / "reports")
    assert main(["bench", "ingest", "--platform", "zcu102-dnndk", "--db", store_target, *map(str, jobs[:2])]) == 0
    assert main(["bench", "ingest", "--platform", "zcu102-dnndk", "--db", store_target, *map(str, jobs)]) == 0
    out = capsys.readouterr().out
    assert "ingested 2 benchmark(s)" in out and "2 already stored" in out
    with Store(store_target) as st:
        (s,) = C.progress(st).suites
        assert (s.planned, s.ok, s.measuring, s.remaining) == (4, 4, 0, 0)


@pytest.mark.slow
def test_boards_with_their_own_host_measure_in_parallel(tmp_path):
    """A hardware module that does not time this machine's CPU (a board) takes no machine lock."""
    db, trace = str(tmp_path / "m.sqlite"), tmp_path / "trace.txt"
    kw = {"slow": 0.4, "trace": str(trace), "host_cpu": False}
    procs = [subprocess.Popen(_worker_cmd(db, f"board{i}", 8, kw), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for i in (1, 2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    spans = sorted((float(a), float(b), pid) for pid, a, b in (line.split() for line in trace.read_text().splitlines()))
    assert len(spans) == 8 and len({s[2] for s in spans}) == 2
    assert any(nxt[0] < cur[1] and nxt[2] != cur[2] for cur, nxt in zip(spans, spans[1:]))  # overlapping


def test_a_lock_folder_that_cannot_hold_the_lock_is_one_error(monkeypatch, tmp_path):
    from annette_torch.bench.hostlock import MachineLock
    monkeypatch.setenv("ANNETTE_LOCK_DIR", str(tmp_path / "missing"))
    with pytest.raises(AnnetteError, match="ANNETTE_LOCK_DIR"):
        MachineLock(True)


def test_a_lock_file_of_another_user_opens_without_creating(monkeypatch, tmp_path):
    from annette_torch.bench import hostlock
    monkeypatch.setenv("ANNETTE_LOCK_DIR", str(tmp_path))
    for name in (hostlock.LOCK_NAME, hostlock.LOCK_NAME + ".queue"):
        (tmp_path / name).write_text("")
    calls = []
    real_open = os.open

    def spy(path, flags, *a):
        calls.append(flags)
        return real_open(path, flags, *a)
    monkeypatch.setattr(hostlock.os, "open", spy)
    hostlock.MachineLock(True).close()
    assert calls and not any(f & os.O_CREAT for f in calls)


@pytest.mark.slow
def test_claims_queued_ahead_keep_their_leases_while_another_worker_measures(tmp_path):
    """A sweep that waits for this machine's turn with configurations claimed ahead renews their leases."""
    import threading

    from annette_torch.bench.hostlock import MachineLock
    lease, n = 0.6, 6
    db = tmp_path / "m.sqlite"
    other = MachineLock(True, poll_s=0.01)
    done: list = []
    with Store(db) as st:
        t = threading.Thread(target=lambda: done.append(run_sweep(
            st, "fake", "fc", _plan(n), FAKE, {"slow": 0.3}, iterations=1, warmup=0, progress=False,
            worker="w", lease_s=lease)))
        t.start()
        deadline = time.time() + 60
        while time.time() < deadline and not st.done("fake", "fc") and not done:
            time.sleep(0.02)  # until the sweep has claimed ahead and measured once (then it takes turns)
        with other.hold() as got:  # another worker's turn, five leases long
            assert got
            time.sleep(2 * lease)
            stored = st.done("fake", "fc")
            with st.transaction() as c:
                rows = [r for r in c.execute(text("SELECT config_id, lease_until FROM claims WHERE worker='w'"))
                        if r[0] not in stored]  # claimed ahead, waiting for the machine
            read_at = time.time()
            time.sleep(3 * lease)
        t.join(60)
    other.close()
    assert done and done[0].measured == n and done[0].taken_over == 0
    assert rows and all(r[1] > read_at for r in rows)  # two leases into the wait, still live: renewed


def test_postgresql_urls_name_their_driver():
    """A bare postgresql:// names psycopg 3 explicitly: SQLAlchemy before 2.1 would pick psycopg2 for it."""
    assert driver_url("postgresql://u:p@h/d") == "postgresql+psycopg://u:p@h/d"
    assert driver_url("postgres://u@h/d") == "postgresql+psycopg://u@h/d"
    assert driver_url("postgresql+psycopg2://u@h/d") == "postgresql+psycopg2://u@h/d"
    assert driver_url("sqlite:///m.sqlite") == "sqlite:///m.sqlite"


def test_workers_opening_a_new_store_at_once_all_get_it(tmp_path):
    """Two connections switching a new SQLite file to WAL at the same moment: SQLite fails one at once
    ("database is locked", no busy wait); opening a store retries that switch, so every worker gets in."""
    import sqlite3
    import threading

    from annette_torch.bench.sqlite import sqlite_pragma

    def race(n: int, opener) -> list[str]:
        errors: list[str] = []
        for trial in range(40):
            path = str(tmp_path / f"{opener.__name__}{trial}.sqlite")
            barrier = threading.Barrier(n)

            def go() -> None:
                con = sqlite3.connect(path, timeout=60, isolation_level=None)
                barrier.wait()
                try:
                    opener(con)
                except sqlite3.OperationalError as e:
                    errors.append(str(e))
                finally:
                    con.close()
            threads = [threading.Thread(target=go) for _ in range(n)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        return errors

    def plain(con) -> None:
        con.execute("PRAGMA journal_mode=WAL")

    def retried(con) -> None:
        sqlite_pragma(con, "journal_mode=WAL")

    assert race(4, retried) == []
    # (the race it guards against; SQLite versions or schedulers that never lose it would make this vacuous)
    lost = race(4, plain)
    print(f"plain PRAGMA journal_mode=WAL lost the race {len(lost)} times in 40")
