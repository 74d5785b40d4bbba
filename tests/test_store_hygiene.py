"""What the measurement store does with a file before writing to it: another program's SQLite database is
refused and stays byte-identical, an empty file is refused unless a new store is wanted, a corrupt store is
one error line (an export of it leaves the previous CSV), a version-1 store is upgraded in place."""

from __future__ import annotations

import csv
import os
import sqlite3

import pytest

from annette_torch.bench.records import LayerRecord
from annette_torch.bench.store import SCHEMA_VERSION, ConfigResult, Store, StoreError
from annette_torch.cli.app import main

#: the schema of version-1 stores (as written by earlier releases)
V1_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (id INTEGER PRIMARY KEY, platform TEXT NOT NULL, runner TEXT NOT NULL, toolchain TEXT NOT NULL,
    fingerprint TEXT NOT NULL, started REAL NOT NULL, annette_version TEXT NOT NULL);
CREATE TABLE configs (id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id), platform TEXT NOT NULL,
    suite TEXT NOT NULL, config_id TEXT NOT NULL, params TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')), error TEXT, e2e_median_ms REAL, e2e_min_ms REAL,
    e2e_std_ms REAL, iterations INTEGER, seconds REAL, finished REAL NOT NULL, UNIQUE (platform, suite, config_id));
CREATE TABLE layers (config INTEGER NOT NULL REFERENCES configs(id), idx INTEGER NOT NULL, layer TEXT NOT NULL,
    layer_type TEXT NOT NULL, fused TEXT NOT NULL, fused_into TEXT, node TEXT, node_type TEXT, exec_kind TEXT,
    time_ms REAL, min_ms REAL, std_ms REAL, absorbed TEXT, params TEXT, PRIMARY KEY (config, idx));
CREATE INDEX layers_type ON layers(layer_type);
INSERT INTO meta VALUES ('schema_version', '1');
INSERT INTO runs VALUES (1, 'ort-cpu', 'ort-cpu', '{}', '{}', 0, '0.1.0');
INSERT INTO configs VALUES (1, 1, 'ort-cpu', 'conv', 'abc', '{"h": 8}', 'ok', NULL, 1.5, 1.4, 0.1, 20, 0.2, 0);
INSERT INTO layers VALUES (1, 0, 'conv', 'Conv', 'not-fused', '', 'conv', 'Conv', 'kernel', 1.2, 1.1, 0.05, '[]', '{}');
"""


def _errors(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("annette: error:") == 1 and "Traceback" not in err, err
    return err


def _fill(path, n: int = 300) -> None:
    with Store(path) as st:
        run = st.start_run("p", "r", {}, {})
        for i in range(n):
            st.add(run, "p", ConfigResult("s", f"c{i:04d}", {"i": i, "pad": "x" * 200}, "ok",
                                          [LayerRecord(f"l{k}", "Conv", "not-fused", time_ms=0.1 * k,
                                                       params={"pad": "y" * 100}) for k in range(8)]))


@pytest.mark.slow
def test_an_optuna_study_file_is_refused_and_left_byte_identical(tmp_path, capsys):
    optuna = pytest.importorskip("optuna")
    study_db = tmp_path / "study.db"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=f"sqlite:///{study_db}", study_name="s")
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
    del study
    before = study_db.read_bytes()
    out = tmp_path / "o.csv"
    for argv in (["bench", "status", "--db", str(study_db)],
                 ["bench", "export", "--db", str(study_db), "--out", str(out)],
                 ["bench", "-p", "ort-cpu", "-s", "relu", "-n", "1", "--db", str(study_db)]):
        assert main(argv) == 1
        err = _errors(capsys)
        assert "another program" in err and "studies" in err and "left untouched" in err
    assert study_db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["study.db"]  # no -wal, no -shm, no CSV


def test_an_empty_file_is_a_store_only_when_one_is_created(tmp_path, capsys):
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    assert main(["bench", "status", "--db", str(empty)]) == 1
    assert "empty file (0 bytes)" in _errors(capsys)
    assert main(["bench", "export", "--db", str(empty), "--out", str(tmp_path / "o.csv")]) == 1
    _errors(capsys)
    assert empty.stat().st_size == 0 and not (tmp_path / "o.csv").exists()
    assert main(["bench", "status", "--db", str(tmp_path / "missing.sqlite")]) == 1
    assert "no such measurement store" in _errors(capsys)
    assert not (tmp_path / "missing.sqlite").exists()
    with Store(empty) as st:  # a command that creates a store may use it
        assert st.counts() == {}
    with Store(empty, create=False) as st:
        assert st.counts() == {}


def test_a_file_that_is_no_database_is_one_line(tmp_path, capsys):
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not an sqlite file at all " * 200)
    before = junk.read_bytes()
    assert main(["bench", "status", "--db", str(junk)]) == 1
    assert "not an SQLite database" in _errors(capsys)
    with pytest.raises(StoreError, match="not a measurement store"):
        Store(junk)
    assert junk.read_bytes() == before


def test_garbage_pages_are_one_line_and_the_previous_export_stays(tmp_path, capsys):
    db, out = tmp_path / "m.sqlite", tmp_path / "out.csv"
    _fill(db)
    assert main(["bench", "export", "--db", str(db), "--out", str(out)]) == 0
    good = out.read_bytes()
    assert len(list(csv.DictReader(out.open()))) == 300 * 8
    size = db.stat().st_size
    with open(db, "r+b") as f:  # garbage over everything after the first pages
        f.seek(8 * 4096)
        f.write(os.urandom(size - 8 * 4096))
    capsys.readouterr()
    for argv in (["bench", "export", "--db", str(db), "--out", str(out)], ["bench", "status", "--db", str(db)]):
        assert main(argv) == 1
        assert "corrupt measurement store" in _errors(capsys)
    assert out.read_bytes() == good  # the failed export left the previous file as it was
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # and no temporary file


def test_an_export_that_fails_half_way_leaves_the_previous_file(tmp_path, monkeypatch):
    db, out = tmp_path / "m.sqlite", tmp_path / "out.csv"
    _fill(db, 5)
    out.write_text("previous export\n")

    real_rows = Store.rows

    def broken(self, platform=None, suite=None):
        for i, row in enumerate(real_rows(self, platform, suite)):
            if i == 3:
                raise StoreError("m.sqlite: connection lost")
            yield row

    monkeypatch.setattr(Store, "rows", broken)
    with Store(db) as st, pytest.raises(StoreError, match="connection lost"):
        st.export_csv(out)
    assert out.read_text() == "previous export\n"


def test_a_version_1_store_is_upgraded_in_place(tmp_path):
    db = tmp_path / "old.sqlite"
    con = sqlite3.connect(db)
    con.executescript(V1_SCHEMA)
    con.close()
    with Store(db, create=False) as st:
        assert st.counts() == {("ort-cpu", "conv"): {"ok": 1, "failed": 0}}
        (rec,) = [L for _, _, _, L in st.layer_records("ort-cpu")]
        assert (rec.layer, rec.time_ms) == ("conv", 1.2)
        assert st.e2e_medians("ort-cpu") == {("conv", "abc"): 1.5}
        run = st.start_run("ort-cpu", "ort-cpu", {}, {}, worker="w", machine="m")
        assert not st.add(run, "ort-cpu", ConfigResult("conv", "abc", {}, "ok"))  # stored already: kept
    con = sqlite3.connect(db)
    assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    assert {"worker", "machine"} <= {r[1] for r in con.execute("PRAGMA table_info(runs)")}
    assert {"claims", "plan"} <= {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    con.close()


def test_a_store_of_a_newer_schema_is_refused(tmp_path):
    db = tmp_path / "new.sqlite"
    with Store(db):
        pass
    con = sqlite3.connect(db)
    con.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="schema 99 is newer"):
        Store(db)


def test_urls_and_drivers(tmp_path):
    with Store(f"sqlite:///{tmp_path / 'u.sqlite'}") as st:  # an sqlite:/// URL is a file like any other
        assert st.path == str(tmp_path / "u.sqlite") and st.counts() == {}
    with pytest.raises(StoreError, match="needs a file"):
        Store("sqlite://")
    with pytest.raises(Exception, match=r"mysql://u:\*\*\*@h/d") as e:
        Store("mysql://u:topsecret@h/d")
    assert "topsecret" not in str(e.value)
