"""The coordinator's batched writes: many runs' shards in one statement, many runs' starts, ingests and ends in
one transaction on a connection kept open for a burst, a reader in another process never blocking the loop,
and a run whose start was never recorded (coordinator killed before its batch) recovered, not re-run."""

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow.parquet as pq
from typer.testing import CliRunner

from rlbench_cli.cli.app import app
from rlbench_cli.coordinator import Recorder, mark_started
from rlbench_cli.executors.base import Job
from rlbench_cli.runner import attempt_dir, run_one
from rlbench_cli.sink import ShardSink, list_shards
from rlbench_cli.store import Store
from rlbench_cli.suite.grid import expand
from rlbench_cli.suite.loader import load_suite


def _run(i: int) -> dict:
    return {"run_id": f"r{i}", "suite": "s", "algo": "a", "algo_name": "random", "env": "E", "seed": i,
            "config": {}}  # fmt: skip


def _shards(folder: Path, run: int, flushes: int = 2, per: int = 5) -> list[Path]:
    sink = ShardSink(folder / "metrics", background=False)
    for f in range(flushes):
        for i in range(per):
            sink.log(f * per + i, **{"eval/return": float(run * 100 + i), "train/loss": float(f)})
        sink.flush()
    sink.close()
    return list_shards(folder / "metrics")


def _rows(store: Store) -> list[tuple]:
    with store.reader() as con:
        return con.execute("SELECT run_id, step, name, value FROM metrics ORDER BY ALL").fetchall()


def test_ingest_many_stores_what_one_run_at_a_time_does_and_is_idempotent(tmp_path):
    shards = {i: _shards(tmp_path / f"f{i}", i) for i in range(3)}
    one, many = Store(tmp_path / "one.duckdb"), Store(tmp_path / "many.duckdb")
    for store in (one, many):
        with store.writer() as con:
            store.add_runs(con, [_run(i) for i in range(3)])
            for i in range(3):
                store.start_attempt(con, f"r{i}", 1, {"started_at": time.time()})
    with one.writer() as con:
        assert sum(one.ingest_shards(con, f"r{i}", 1, shards[i]) for i in range(3)) == 60
    with many.writer() as con:
        # the same shard twice in one call (a tick's ingest and the end's in one batch) loads once
        items = [("r0", 1, shards[0][:1]), ("r1", 1, shards[1]), ("r0", 1, shards[0]), ("r2", 1, shards[2])]
        assert many.ingest_many(con, items) == 60
        assert many.ingest_many(con, items) == 0
        assert con.execute("SELECT count(*) FROM shards").fetchall()[0][0] == 6
        # rows go in per shard, in the order of its file
        steps = [r[0] for r in con.execute("SELECT step FROM metrics WHERE run_id = 'r1'").fetchall()]
        assert steps == sorted(steps)
    assert _rows(one) == _rows(many) and len(_rows(many)) == 60


def test_the_recorder_writes_a_burst_in_one_transaction_and_reports_after_the_commit(tmp_path):
    store = Store(tmp_path / "db.duckdb")
    with store.writer() as con:
        store.add_runs(con, [_run(i) for i in range(4)])
    jobs = []
    for i in range(4):
        folder = tmp_path / f"r{i}" / "attempt-1"
        _shards(folder, i)
        jobs.append(Job(expand_stub(i), folder, 1))
    said: list[str] = []
    rec = Recorder(store)
    rec.last_flush = time.monotonic()  # inside the batching interval: the writes wait for the next tick
    for i, job in enumerate(jobs):
        rec.start(f"r{i}", 1, {"started_at": time.time()}, lambda i=i: said.append(f"started r{i}"))
        rec.ingest(job)
        rec.end(f"r{i}", "finished", {"duration_s": 1.0}, lambda i=i: said.append(f"ended r{i}"))
    assert said == [] and rec.stats["flushes"] == 0
    rec.close()
    assert rec.stats["flushes"] == 1 and rec.stats["ops"] == 12 and rec.stats["connects"] == 1
    assert said == [f"{w} r{i}" for i in range(4) for w in ("started", "ended")]
    with store.reader() as con:
        assert {r["status"] for r in store.runs(con, "s")} == {"finished"}
    assert len(_rows(store)) == 4 * 20


def expand_stub(i: int):
    """A RunSpec-like object with the run_id the recorder reads."""

    class _Spec:
        run_id = f"r{i}"

    return _Spec()


HOLDER = textwrap.dedent(
    """
    import sys, time, duckdb
    con = duckdb.connect(sys.argv[1], read_only=True)
    open(sys.argv[2], "w").close()
    time.sleep(float(sys.argv[3]))
    open(sys.argv[2] + ".releasing", "w").close()  # before the file is released, so a write after it sees it
    con.close()
    """
)


def test_a_reader_in_another_process_never_blocks_the_loop_and_the_end_waits_for_it(tmp_path):
    store = Store(tmp_path / "db.duckdb")
    with store.writer() as con:
        store.add_runs(con, [_run(0)])
    flag = tmp_path / "reading"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(store.path), str(flag), "1.5"])
    try:
        deadline = time.monotonic() + 60
        while not flag.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        rec = Recorder(store)
        rec.start("r0", 1, {"started_at": time.time()})
        assert rec.ops and rec.con is None  # the file is held: the write waits in the queue, nothing raised
        rec.close()  # the end waits for the reader, then records
        assert Path(f"{flag}.releasing").exists()
    finally:
        holder.wait(timeout=60)
    with store.reader() as con:
        assert store.runs(con, "s")[0]["status"] == "running"


def test_a_run_whose_start_was_never_recorded_is_recovered_not_run_again(tmp_path):
    suite_file = tmp_path / "s.yaml"
    suite_file.write_text(
        "name: unrec\nseeds: 2\nbudget: {steps: 40, eval_every: 20, eval_episodes: 1}\n"
        "envs: [CartPole-v1]\nalgorithms: [random]\n"
    )
    db = tmp_path / "db.duckdb"
    specs = expand(load_suite(suite_file))
    store = Store(db)
    with store.writer() as con:  # what a coordinator records before its first batch
        store.add_runs(con, [{"run_id": s.run_id, "suite": s.suite, "algo": s.algo, "algo_name": s.algo_name,
                              "env": s.env, "seed": s.seed, "config": s.to_dict()} for s in specs])  # fmt: skip
    # the first run went to a worker and finished; the coordinator was killed before it recorded its start
    folder = attempt_dir(db.parent / "runs", specs[0], attempt=1)
    folder.mkdir(parents=True)
    mark_started(folder, store)  # what the coordinator does before it sends the job
    result = run_one(specs[0], folder)
    assert result["status"] == "finished"
    rows_on_disk = result["rows"]

    r = CliRunner().invoke(app, ["run", str(suite_file), "--db", str(db), "--workers", "1", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output.strip().splitlines()[-1])
    assert out["recovered"] == 1 and out["finished"] == 1 and out["failed"] == 0
    with store.reader() as con:
        runs = {row["run_id"]: row for row in store.runs(con, "unrec")}
        assert runs[specs[0].run_id]["attempts"] == 1 and runs[specs[0].run_id]["status"] == "finished"
        n = con.execute("SELECT count(*) FROM metrics WHERE run_id = ?", [specs[0].run_id]).fetchall()[0][0]
    assert n == rows_on_disk > 0
    assert not attempt_dir(db.parent / "runs", specs[0], attempt=2).exists()  # not run again

    # another database next to this one shares the runs folder: its runs are its own, nothing is adopted,
    # and its attempts start in empty folders: the first database's files are kept aside, never ingested
    other = tmp_path / "other.duckdb"
    (folder.parent / "checkpoint").mkdir()
    (folder.parent / "checkpoint" / "step-20.pt").write_bytes(b"the first database's")
    r = CliRunner().invoke(app, ["run", str(suite_file), "--db", str(other), "--workers", "1"])
    assert r.exit_code == 0, r.output
    assert "recovered" not in r.output and "2 finished, 0 failed" in r.output
    other_store = Store(other)
    with other_store.reader() as con:
        assert {r["status"] for r in other_store.runs(con, "unrec")} == {"finished"}
        sql = "SELECT count(*) FROM metrics WHERE run_id = ?"
        assert con.execute(sql, [specs[0].run_id]).fetchall()[0][0] == rows_on_disk  # once, not twice

    def training(st: Store) -> list[tuple]:  # the seeded rows (not sys/: timings)
        return [r for r in _rows(st) if not r[2].startswith("sys/")]

    assert training(other_store) == training(store)
    assert "3 run folder(s) held files this database never recorded" in r.output
    checkpoints = [p.name for p in folder.parent.glob("checkpoint*")]  # the other's, kept aside, not resumed
    assert len(checkpoints) == 1 and checkpoints[0].startswith("checkpoint.stale-")
    assert (folder.parent / checkpoints[0] / "step-20.pt").read_bytes() == b"the first database's"
    # the first database's rows, all of them (how many shards hold them depends on the sink's timer: not compared)
    aside = sorted(folder.parent.glob("attempt-1.stale-*"))
    assert len(aside) == 1
    assert sum(pq.read_metadata(p).num_rows for p in list_shards(aside[0] / "metrics")) == rows_on_disk


def test_one_runs_shards_go_in_in_the_order_given_and_each_files_rows_in_order(tmp_path):
    # the single-run ingest reads the files straight (no join): rows keep the shards' order and their own
    sink = ShardSink(tmp_path / "metrics", background=False)
    expected = []
    for f in range(4):
        for step in (30, 10, 20, 5):  # not sorted within a shard
            sink.log(step + 100 * (3 - f), **{"x": float(f)})  # nor across shards
            expected.append(step + 100 * (3 - f))
        sink.flush()
    sink.close()
    store = Store(tmp_path / "one.duckdb")
    with store.writer() as con:
        store.add_runs(con, [_run(0)])
        store.start_attempt(con, "r0", 1, {"started_at": time.time()})
        assert store.ingest_shards(con, "r0", 1, list_shards(tmp_path / "metrics")) == 16
        assert [r[0] for r in con.execute("SELECT step FROM metrics").fetchall()] == expected
        assert store.ingest_shards(con, "r0", 1, list_shards(tmp_path / "metrics")) == 0


def test_a_burst_with_retries_records_what_one_write_at_a_time_does(tmp_path):
    """Starts, ingests and ends of one transaction go in a few statements (Store.start_attempts, ingest_many,
    end_attempts); a retry's start in the same burst replaces its first attempt's rows, as it does one write at
    a time, and every column comes out the same."""
    folders = {(i, a): tmp_path / f"r{i}" / f"attempt-{a}" for i in range(3) for a in (1, 2)}
    for (i, a), folder in folders.items():
        _shards(folder, i * 10 + a, flushes=a)
    t = time.time()
    manifest = {"started_at": t, "host": "h", "device": "cpu", "git_commit": None, "git_dirty": True,
                "python": "3.11", "packages": {"rlbench": "0"}, "executor": "ray", "job_id": None}  # fmt: skip
    plan = [("start", 0, 1), ("start", 1, 1), ("ingest", 0, 1), ("end", 0, "failed"), ("start", 0, 2),
            ("ingest", 1, 1), ("ingest", 0, 2), ("end", 0, "finished"), ("end", 1, "finished"),
            ("start", 2, 1), ("op", 2, None), ("ingest", 2, 1), ("end", 2, "interrupted")]  # fmt: skip
    attempt = {0: 1, 1: 1, 2: 1}

    def outcome(status: str) -> dict:
        return {"exit_code": None if status == "finished" else 1, "error": None if status == "finished" else "x",
                "ended_at": t + 5, "duration_s": 2.5}  # fmt: skip

    def note(con):
        con.execute("UPDATE runs SET host = 'noted' WHERE run_id = 'r2'")

    one, burst = Store(tmp_path / "one.duckdb"), Store(tmp_path / "burst.duckdb")
    for store in (one, burst):
        with store.writer() as con:
            store.add_runs(con, [_run(i) for i in range(3)])
    with one.writer() as con:  # one write at a time, each in its own statement(s)
        for kind, i, x in plan:
            if kind == "start":
                attempt[i] = x
                one.start_attempt(con, f"r{i}", x, {**manifest, "job_id": f"j{i}{x}"})
            elif kind == "ingest":
                one.ingest_shards(con, f"r{i}", x, list_shards(folders[(i, x)] / "metrics"))
            elif kind == "end":
                one.end_attempt(con, f"r{i}", x, outcome(x))
            else:
                note(con)
    rec = Recorder(burst)
    rec.last_flush = time.monotonic()  # all in one transaction
    for kind, i, x in plan:
        if kind == "start":
            rec.start(f"r{i}", x, {**manifest, "job_id": f"j{i}{x}"})
        elif kind == "ingest":
            rec.ingest(Job(expand_stub(i), folders[(i, x)], x))
        elif kind == "end":
            rec.end(f"r{i}", x, outcome(x))
        else:
            rec.add(note)
    rec.close()
    assert rec.stats["flushes"] == 1 and rec.stats["ops"] == len(plan)
    for query in ("SELECT * FROM runs ORDER BY run_id", "SELECT * FROM metrics ORDER BY ALL",
                  "SELECT run_id, attempt, shard, rows FROM shards ORDER BY ALL"):  # fmt: skip
        with one.reader() as a, burst.reader() as b:
            assert a.execute(query).fetchall() == b.execute(query).fetchall(), query
    with burst.reader() as con:
        runs = {r["run_id"]: r for r in burst.runs(con, "s")}
        assert (
            runs["r0"]["attempts"] == 2
            and runs["r0"]["status"] == "finished"
            and runs["r0"]["job_id"] == "j02"
        )
        assert runs["r2"]["host"] == "noted" and runs["r2"]["status"] == "interrupted"
        assert con.execute("SELECT DISTINCT attempt FROM shards WHERE run_id = 'r0'").fetchall() == [(2,)]


def test_the_recorder_reads_only_shards_it_has_not_recorded(tmp_path):
    # a 2,048-seed pack is ingested every second: a tick whose runs wrote nothing new asks nothing of the database
    store = Store(tmp_path / "db.duckdb")
    with store.writer() as con:
        store.add_runs(con, [_run(i) for i in range(2)])
    jobs = []
    for i in range(2):
        folder = tmp_path / f"r{i}" / "attempt-1"
        _shards(folder, i, flushes=1)
        jobs.append(Job(expand_stub(i), folder, 1))
    asked: list[list[tuple]] = []
    ingest_many = store.ingest_many
    store.ingest_many = lambda con, items: asked.append(items) or ingest_many(con, items)  # type: ignore[method-assign]
    rec = Recorder(store)

    def ingest_both() -> None:
        rec.last_flush = time.monotonic()  # inside the batching interval: both wait for the flush
        for job in jobs:
            rec.ingest(job)

    ingest_both()
    rec.flush()
    assert [(r, a, [p.name for p in s]) for r, a, s in asked[0]] == [("r0", 1, ["00000000.parquet"]),
                                                                    ("r1", 1, ["00000000.parquet"])]  # fmt: skip
    ingest_both()  # nothing new: no shard is offered again
    rec.flush()
    assert asked[1] == []
    sink = ShardSink(jobs[1].folder / "metrics", background=False)  # run r1 writes its next shard
    sink.log(99, **{"eval/return": 7.0})
    sink.close()
    ingest_both()
    rec.close()
    assert [(r, [p.name for p in s]) for r, _, s in asked[2]] == [("r1", ["00000001.parquet"])]
    assert len(_rows(store)) == 2 * 10 + 1
