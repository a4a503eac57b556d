"""Schema and migrations of the results database. Version 1 is the first; each later version adds a
function to MIGRATIONS that moves a file from version N-1 to N, in one transaction."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import StoreError

SCHEMA_VERSION = 4

# a run's statuses once it has ended (pruned: rlbench tune)
TERMINAL = ("finished", "failed", "interrupted", "pruned")

# the runs table's columns, in order, at the current version
RUN_COLUMNS = (
    "run_id", "suite", "algo", "algo_name", "env", "seed", "config", "status", "attempts", "exit_code",
    "error", "started_at", "ended_at", "duration_s", "host", "device", "git_commit", "git_dirty",
    "python", "packages", "executor", "job_id",
)  # fmt: skip

_V1 = """
CREATE TABLE schema_version (version INTEGER NOT NULL, applied_at TIMESTAMP DEFAULT now());
CREATE TABLE suites (
    name VARCHAR PRIMARY KEY, description VARCHAR, config JSON, source_path VARCHAR,
    created_at TIMESTAMP, updated_at TIMESTAMP
);
CREATE TABLE runs (
    run_id VARCHAR PRIMARY KEY, suite VARCHAR NOT NULL, algo VARCHAR NOT NULL, algo_name VARCHAR,
    env VARCHAR, seed INTEGER, config JSON, status VARCHAR NOT NULL, attempts INTEGER DEFAULT 0,
    exit_code INTEGER, error VARCHAR, started_at TIMESTAMP WITH TIME ZONE, ended_at TIMESTAMP WITH TIME ZONE,
    duration_s DOUBLE, host VARCHAR, device VARCHAR, git_commit VARCHAR, git_dirty BOOLEAN,
    python VARCHAR, packages JSON
);
CREATE TABLE metrics (run_id VARCHAR NOT NULL, step BIGINT NOT NULL, name VARCHAR NOT NULL,
                      value DOUBLE, wall_time DOUBLE);
CREATE TABLE shards (run_id VARCHAR NOT NULL, attempt INTEGER NOT NULL, shard VARCHAR NOT NULL,
                     rows BIGINT, ingested_at TIMESTAMP, PRIMARY KEY (run_id, attempt, shard));
CREATE TABLE artifacts (run_id VARCHAR, kind VARCHAR, path VARCHAR, created_at TIMESTAMP DEFAULT now());
"""


def _v2(con: Any) -> None:
    """Where each attempt ran, whichever executor placed it: executor name and its job id."""
    con.execute("ALTER TABLE runs ADD COLUMN executor VARCHAR")
    con.execute("ALTER TABLE runs ADD COLUMN job_id VARCHAR")


def _v3(con: Any) -> None:
    """AdaStop's decisions of ``rlbench run --adaptive``: one row per suite, task and pair of algorithms."""
    con.execute(
        """CREATE TABLE adaptive_decisions (
            suite VARCHAR NOT NULL, task VARCHAR NOT NULL, algo_a VARCHAR NOT NULL, algo_b VARCHAR NOT NULL,
            decision VARCHAR NOT NULL, look INTEGER, runs_a INTEGER, runs_b INTEGER, mean_a DOUBLE,
            mean_b DOUBLE, settings JSON, updated_at TIMESTAMP,
            PRIMARY KEY (suite, task, algo_a, algo_b))"""
    )


ARTIFACT_COLUMNS = ("run_id", "step", "kind", "path", "bytes", "sha256", "created_at")


def _v4(con: Any) -> None:
    """A run's files listed with their step, size and sha256 (``artifacts``: saved policies, videos,
    transcripts; ``path`` relative to the run folder, or for an imported run's ``source`` where it came
    from). The table is rebuilt in this column order; rows from before keep their run, kind and path."""
    con.execute(
        """CREATE TABLE artifacts_v4 (run_id VARCHAR NOT NULL, step BIGINT, kind VARCHAR NOT NULL,
           path VARCHAR NOT NULL, bytes BIGINT, sha256 VARCHAR, created_at TIMESTAMP DEFAULT now())"""
    )
    con.execute("INSERT INTO artifacts_v4 (run_id, kind, path, created_at) "
                "SELECT run_id, kind, path, created_at FROM artifacts")  # fmt: skip
    con.execute("DROP TABLE artifacts")
    con.execute("ALTER TABLE artifacts_v4 RENAME TO artifacts")


# version N -> function applying N-1 -> N
MIGRATIONS: dict[int, Callable[[Any], None]] = {2: _v2, 3: _v3, 4: _v4}


def _version(con: Any) -> int | None:
    has = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_version'"
    ).fetchall()[0][0]
    if not has:
        return None
    row = con.execute("SELECT max(version) FROM schema_version").fetchall()[0]
    return row[0] if row and row[0] is not None else 0


def check_version(con: Any, path: Path) -> int:
    v = _version(con)
    if v is None:
        tables = con.execute("SELECT count(*) FROM information_schema.tables").fetchall()[0][0]
        if tables:
            raise StoreError(f"{path}: a DuckDB file, but not an rlbench results database; pass another --db")
        return 0
    if v > SCHEMA_VERSION:
        raise StoreError(
            f"{path}: written by a newer rlbench (schema {v}, this one reads up to {SCHEMA_VERSION}); "
            "upgrade rlbench (pip install -U rlbench-cli)"
        )
    return v


def migrate(con: Any, path: Path) -> None:
    v = check_version(con, path)
    if v == SCHEMA_VERSION:
        return
    con.execute("BEGIN TRANSACTION")
    try:
        if v == 0:
            con.execute(_V1)
            con.execute("INSERT INTO schema_version (version) VALUES (1)")
            v = 1
        while v < SCHEMA_VERSION:
            MIGRATIONS[v + 1](con)
            v += 1
            con.execute("INSERT INTO schema_version (version) VALUES (?)", [v])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
