"""Schema migrations: an older results file is upgraded in one transaction, or not at all."""

import time

import pytest

from rlbench_cli.store import Store, schema

pytestmark = pytest.mark.fast

RUN = {"run_id": "r1", "suite": "s", "algo": "a", "algo_name": "random", "env": "E", "seed": 0, "config": {}}


def _v1_file(tmp_path, monkeypatch):
    """A results file as rlbench wrote it before schema 2 (no executor / job_id columns)."""
    monkeypatch.setattr(schema, "SCHEMA_VERSION", 1)
    store = Store(tmp_path / "old.duckdb")
    with store.writer() as con:
        store.add_runs(con, [RUN])
        con.execute("UPDATE runs SET status = 'finished', attempts = 1, host = 'h', device = 'cpu'")
        con.execute("INSERT INTO metrics VALUES ('r1', 0, 'eval/return', 1.5, 0.0)")
    monkeypatch.undo()
    return store


def test_a_schema_1_file_gains_executor_and_job_id_and_keeps_its_data(tmp_path, monkeypatch):
    store = _v1_file(tmp_path, monkeypatch)
    with store.writer() as con:
        versions = [r[0] for r in con.execute("SELECT version FROM schema_version ORDER BY 1").fetchall()]
        assert versions == [1, 2, 3, 4]
        (run,) = store.runs(con)
        assert (run["status"], run["host"], run["executor"], run["job_id"]) == ("finished", "h", None, None)
        assert con.execute("SELECT value FROM metrics").fetchall() == [(1.5,)]
        store.start_attempt(con, "r1", 2, {"started_at": time.time(), "executor": "slurm", "job_id": "12_3"})
        (run,) = store.runs(con)
        assert (run["executor"], run["job_id"]) == ("slurm", "12_3")


def test_a_schema_3_file_gains_the_artifact_columns_and_keeps_its_rows(tmp_path, monkeypatch):
    store = _v1_file(tmp_path, monkeypatch)
    monkeypatch.setattr(schema, "SCHEMA_VERSION", 3)
    with store.writer() as con:
        con.execute("INSERT INTO artifacts (run_id, kind, path) VALUES ('r1', 'source', 'runs.csv')")
    monkeypatch.undo()
    with store.writer() as con:
        cols = [r[0] for r in con.execute("DESCRIBE artifacts").fetchall()]
        assert tuple(cols) == schema.ARTIFACT_COLUMNS
        assert con.execute("SELECT run_id, step, kind, path, bytes, sha256 FROM artifacts").fetchall() == [
            ("r1", None, "source", "runs.csv", None, None)
        ]


def test_an_older_file_is_migrated_and_keeps_its_data(tmp_path, monkeypatch):
    store = _v1_file(tmp_path, monkeypatch)

    def v5(con):
        con.execute("ALTER TABLE runs ADD COLUMN tags JSON")

    monkeypatch.setattr(schema, "SCHEMA_VERSION", 5)
    monkeypatch.setitem(schema.MIGRATIONS, 5, v5)
    with store.writer() as con:
        versions = [r[0] for r in con.execute("SELECT version FROM schema_version ORDER BY 1").fetchall()]
        assert versions == [1, 2, 3, 4, 5]
        assert con.execute("SELECT tags FROM runs").fetchall() == [(None,)]
        assert con.execute("SELECT value FROM metrics").fetchall() == [(1.5,)]
    with store.writer() as con:  # a second open migrates nothing more
        assert con.execute("SELECT count(*) FROM schema_version").fetchall()[0][0] == 5


def test_a_failing_migration_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    store = _v1_file(tmp_path, monkeypatch)

    def broken(con):
        con.execute("ALTER TABLE runs ADD COLUMN tags JSON")
        raise RuntimeError("disk full")

    monkeypatch.setattr(schema, "SCHEMA_VERSION", 5)
    monkeypatch.setitem(schema.MIGRATIONS, 5, broken)
    with pytest.raises(RuntimeError, match="disk full"):
        with store.writer():
            pass
    monkeypatch.setattr(schema, "SCHEMA_VERSION", 1)
    with store.reader() as con:
        assert [r[0] for r in con.execute("SELECT version FROM schema_version").fetchall()] == [1]
        cols = [r[0] for r in con.execute("DESCRIBE runs").fetchall()]
        assert "tags" not in cols
        assert con.execute("SELECT value FROM metrics").fetchall() == [(1.5,)]
