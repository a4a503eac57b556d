"""rlbench ui's reads through one in-memory DuckDB with the store attached per read (``ui.attached``): the
same rows as a connection of its own, each read sees what was written before it, and between reads the file
is free for a writer of another process; a reader waits while another process holds the file for writing
(``store.connection.write_locked``, from /proc/locks) and not for its own process's writer."""

from __future__ import annotations

import subprocess
import sys

import duckdb
import pytest

from rlbench_cli.store import Store
from rlbench_cli.store.connection import write_locked
from rlbench_cli.ui import data
from rlbench_cli.ui.attached import AttachedStore

INSERT = """import duckdb, sys
con = duckdb.connect(sys.argv[1])
con.execute("INSERT INTO runs (run_id, suite, algo, algo_name, env, seed, config, status, attempts) "
            "VALUES ('r1', 's', 'a', 'a', 'e', 0, '{}', 'queued', 0)")
con.close()
"""
HOLD = "import duckdb, sys, time; con = duckdb.connect(sys.argv[1]); print('held', flush=True); time.sleep(float(sys.argv[2]))"


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "rlbench.duckdb", wait=10)
    with s.writer() as con:
        s.register_suite(con, "s", "", {"name": "s"}, "s.yaml")
    return s


def test_reads_through_the_attached_file_see_each_write_and_leave_the_file_free(store):
    fast = AttachedStore(store)
    with fast.reader() as con:
        before = con.execute("SELECT count(*) FROM runs").fetchall()[0][0]
    # another process writes between two reads: the file is free, and the next read sees the row
    subprocess.run([sys.executable, "-c", INSERT, str(store.path)], check=True)
    with fast.reader() as con, fast.reader() as inner:  # overlapping reads share one attachment
        assert con.execute("SELECT count(*) FROM runs").fetchall()[0][0] == before + 1
        assert inner.execute("SELECT run_id FROM runs").fetchall() == [("r1",)]
    assert data.suites(fast) == data.suites(store)


def test_a_reader_waits_while_another_process_writes_not_for_its_own_writer(store):
    assert not write_locked(store.path)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(store.path), "1.5"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert write_locked(store.path)
        with AttachedStore(store).reader() as con:  # waits for the writer to let go, then reads
            assert con.execute("SELECT count(*) FROM runs").fetchall() == [(0,)]
    finally:
        holder.wait(timeout=30)
    assert not write_locked(store.path)
    con = duckdb.connect(str(store.path))
    try:
        assert not write_locked(store.path)  # this process's own writer
    finally:
        con.close()
