"""The coordinator's batched writes: many runs' shards in one statement, many runs' starts, ingests and ends in
one transaction on a connection kept open for a burst, a reader in another process never blocking the loop,
and a run whose start was never recorded (coordinator killed before its batch) recovered, not re-run."""

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from typer.testing import CliRunner

from rlbench_cli.cli.app import app
from rlbench_cli.coordinator import _Recorder, mark_started
from rlbench_cli.executors.base import Job
from rlbench_cli.grid import expand
from rlbench_cli.runner import attempt_dir, run_one
from rlbench_cli.sink import ShardSink, list_shards
from rlbench_cli.spec import load_suite
from rlbench_cli.store import Store


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
    rec = _Recorder(store)
    rec.last_flush = time.monotonic()  # inside the batching interval: the writes wait for the next tick
    for i, job in enumerate(jobs):
        rec.add(lambda con, i=i: store.start_attempt(con, f"r{i}", 1, {"started_at": time.time()}),
                lambda i=i: said.append(f"started r{i}"), run_id=f"r{i}")  # fmt: skip
        rec.ingest(job)
        rec.add(lambda con, i=i: store.end_attempt(con, f"r{i}", "finished", {"duration_s": 1.0}),
                lambda i=i: said.append(f"ended r{i}"))  # fmt: skip
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
        rec = _Recorder(store)
        rec.add(lambda con: store.start_attempt(con, "r0", 1, {"started_at": time.time()}), run_id="r0")
        assert rec.ops and rec.con is None  # the file is held: the write waits in the queue, nothing raised
        rec.close()  # the end waits for the reader, then records
        assert holder.poll() is not None
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

    # another database next to this one shares the runs folder: its runs are its own, nothing is adopted
    other = tmp_path / "other.duckdb"
    r = CliRunner().invoke(app, ["run", str(suite_file), "--db", str(other), "--workers", "1", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output.strip().splitlines()[-1])
    assert out["recovered"] == 0 and out["finished"] == 2


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
