import subprocess
import sys
import textwrap
import time

import pytest

from rlbench_cli.errors import StoreBusy, StoreError
from rlbench_cli.sink import ShardSink, list_shards
from rlbench_cli.store import SCHEMA_VERSION, Store

RUN = {"run_id": "r1", "suite": "s", "algo": "a", "algo_name": "random", "env": "E", "seed": 0, "config": {}}


def _shards(tmp_path, n_flushes=3, per=100):
    sink = ShardSink(tmp_path / "metrics", background=False)
    for f in range(n_flushes):
        for i in range(per):
            sink.log(f * per + i, **{"eval/return": float(i), "train/loss": 0.5})
        sink.flush()
    sink.close()
    return list_shards(tmp_path / "metrics")


def test_ingest_is_idempotent(tmp_path):
    store = Store(tmp_path / "db.duckdb")
    shards = _shards(tmp_path)
    assert len(shards) == 3
    with store.writer() as con:
        store.add_runs(con, [RUN])
        store.start_attempt(con, "r1", 1, {"started_at": time.time()})
        assert store.ingest_shards(con, "r1", 1, shards[:2]) == 400
        assert store.ingest_shards(con, "r1", 1, shards) == 200
        assert store.ingest_shards(con, "r1", 1, shards) == 0
    with store.reader() as con:
        t = store.query_metrics(con, suite="s")
        assert t.num_rows == 600
        assert set(t.column_names) >= {"run_id", "suite", "algo", "env", "seed", "step", "name", "value"}
        assert store.query_metrics(con, metrics=["eval/return"]).num_rows == 300


def test_new_attempt_replaces_old_metrics(tmp_path):
    store = Store(tmp_path / "db.duckdb")
    shards = _shards(tmp_path, 1, 10)
    with store.writer() as con:
        store.add_runs(con, [RUN])
        store.start_attempt(con, "r1", 1, {"started_at": time.time()})
        store.ingest_shards(con, "r1", 1, shards)
        store.start_attempt(con, "r1", 2, {"started_at": time.time()})
        assert con.execute("SELECT count(*) FROM metrics").fetchall()[0][0] == 0
        assert store.ingest_shards(con, "r1", 2, shards) == 20
        store.add_runs(con, [RUN])  # re-adding leaves the row as it is
        (row,) = store.runs(con, "s")
        assert row["attempts"] == 2 and row["status"] == "running"


def test_filters_are_bound_parameters(tmp_path):
    store = Store(tmp_path / "db.duckdb")
    with store.writer() as con:
        store.add_runs(con, [RUN])
        store.start_attempt(con, "r1", 1, {"started_at": time.time()})
        store.ingest_shards(con, "r1", 1, _shards(tmp_path, 1, 5))
    with store.reader() as con:
        for evil in ["a' OR '1'='1", "a'); DROP TABLE metrics; --"]:
            assert store.query_metrics(con, algos=[evil]).num_rows == 0
        assert store.query_metrics(con).num_rows == 10


def test_not_duckdb_and_newer_schema(tmp_path):
    bad = tmp_path / "text.duckdb"
    bad.write_text("hello, I am not a database\n" * 100)
    with pytest.raises(StoreError, match="not a usable DuckDB results file"):
        with Store(bad).reader():
            pass
    store = Store(tmp_path / "db.duckdb")
    with store.writer() as con:
        con.execute("INSERT INTO schema_version (version) VALUES (?)", [SCHEMA_VERSION + 1])
    with pytest.raises(StoreError, match="newer rlbench"):
        with store.reader():
            pass
    with pytest.raises(StoreError, match="no results database here"):
        with Store(tmp_path / "nope.duckdb").reader():
            pass


def test_reader_waits_for_writer_then_gives_up(tmp_path):
    db = tmp_path / "db.duckdb"
    with Store(db).writer():
        pass
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import duckdb, sys, time
            con = duckdb.connect({str(db)!r})
            print("held", flush=True)
            time.sleep(float(sys.argv[1]))
        """), "1.5"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(StoreBusy, match="another process has held the database"):
        with Store(db, wait=0.2).reader():
            pass
    t0 = time.monotonic()
    with Store(db, wait=30).reader() as con:  # waits for the holder to exit, then reads
        assert con.execute("SELECT count(*) FROM runs").fetchall()[0][0] == 0
    assert time.monotonic() - t0 < 10
    holder.wait()


def first_shard(folder, timeout: float) -> list:
    """The shards in ``folder`` once there is one (or after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while not list_shards(folder) and time.monotonic() < deadline:
        time.sleep(0.01)
    return list_shards(folder)


def test_sink_flushes_in_background_and_never_leaves_partial_files(tmp_path):
    sink = ShardSink(tmp_path, flush_interval=0.05)
    sink.log(1, a=1.0)
    assert len(first_shard(tmp_path, 5)) == 1
    sink.log(2, a=2.0, b=3)
    sink.close()
    assert sink.rows_written == 3
    assert not list(tmp_path.glob("*.tmp"))
    # a new sink in the same folder continues the numbering instead of overwriting
    s2 = ShardSink(tmp_path, background=False)
    s2.log(3, a=1.0)
    s2.close()
    assert len(list_shards(tmp_path)) == 3


def test_sink_writes_the_first_row_after_a_quiet_spell_at_once_then_one_shard_an_interval(tmp_path):
    # an interval far longer than the test: the first row is written at the flusher's next look, not after it
    sink = ShardSink(tmp_path, flush_interval=600)
    sink.log(1, a=1.0)
    assert len(first_shard(tmp_path, 60)) == 1
    # rows logged since wait for the interval to be over (here: for close)
    sink.log(2, a=2.0)
    sink.log(3, a=3.0)
    time.sleep(0.5)
    assert len(list_shards(tmp_path)) == 1
    sink.close()
    assert len(list_shards(tmp_path)) == 2 and sink.rows_written == 3


def test_sink_keeps_a_row_appended_by_a_call_that_read_the_buffer_before_a_flush(tmp_path):
    # the interleaving that lost rows when a flush swapped in a new list: the logging call has read
    # ``sink._buf`` (its LOAD_ATTR), the flusher writes a shard, then the call appends
    sink = ShardSink(tmp_path, background=False)
    sink.log_columns(0, ("a", "b"), [1.0, 2.0])
    buffer_seen_by_the_call = sink._buf
    assert sink.flush() == 2
    buffer_seen_by_the_call.append((1, time.time(), ("a", "b"), (3.0, 4.0)))
    sink.close()
    assert sink.rows_written == 4 and len(list_shards(tmp_path)) == 2


def test_sink_loses_no_row_while_a_background_flusher_writes_shards(tmp_path):
    import pyarrow.parquet as pq

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as CPython allows, so the flusher meets the logger
    try:
        sink = ShardSink(tmp_path, flush_interval=0.0)
        names = ("x", "y")
        for step in range(50_000):
            sink.log_columns(step, names, [float(step), 0.0])
        sink.close()
    finally:
        sys.setswitchinterval(old)
    steps = [s for p in list_shards(tmp_path) for s in pq.read_table(p, columns=["step"])["step"].to_pylist()]
    assert len(list_shards(tmp_path)) > 1 and sink.rows_written == 100_000
    assert sorted(set(steps)) == list(range(50_000)) and len(steps) == 100_000
