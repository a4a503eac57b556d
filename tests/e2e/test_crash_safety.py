"""Crash safety, as a user would meet it: kill -9 of `rlbench run`, readers during a run, a second writer."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import duckdb
import pytest
from e2e_cli import RLBENCH, rl, slow_algorithm

pytestmark = pytest.mark.slow


def _suite(tmp_path: Path, steps: int = 60000, seeds: int = 4) -> Path:
    p = tmp_path / "crash.yaml"
    p.write_text(
        f"name: crash\nseeds: {seeds}\nbudget: {{steps: {steps}, eval_every: 10000, eval_episodes: 2}}\n"
        "envs: [CartPole-v1]\nalgorithms: [random]\n"
    )
    return p


def _start(suite: Path, db: Path, *extra: str, cwd: Path | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [RLBENCH, "run", str(suite), "--db", str(db), "--workers", "2", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        cwd=cwd,
    )


def _slow_suite(tmp_path: Path) -> Path:
    """Suite ``crash``: 2 seeds of a run that logs an evaluation every 0.1 s, 400 of them (40 s or more), and
    sleeps in between: the database is written all along while the run spends almost no CPU."""
    entrypoint = slow_algorithm(tmp_path, 0.1)
    p = tmp_path / "crash.yaml"
    p.write_text(
        "name: crash\nseeds: 2\nbudget: {steps: 4000000, eval_every: 10000, eval_episodes: 1}\n"
        f"envs: [CartPole-v1]\nalgorithms: [{{name: slow, entrypoint: '{entrypoint}'}}]\n"
    )
    return p


def _wait_for(proc: subprocess.Popen, prefix: str, count: int, timeout: float = 120) -> list[str]:
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while len(seen) < count and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.strip().startswith(prefix):
            seen.append(line.strip())
    assert len(seen) >= count, f"saw {seen} before the deadline"
    return seen


def _group_gone(pgid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


def test_kill_9_of_the_coordinator_loses_nothing_finished(tmp_path):
    suite, db = _suite(tmp_path), tmp_path / "db.duckdb"
    proc = _start(suite, db)
    done = _wait_for(proc, "done", 2)
    time.sleep(1.5)  # the next runs are in flight and have flushed some metrics
    os.kill(proc.pid, signal.SIGKILL)  # the coordinator only; its workers must not outlive it
    proc.wait(timeout=10)
    assert _group_gone(proc.pid), "workers survived the coordinator"

    before = json.loads(rl("status", "crash", "--db", db, "--json").stdout)["runs"]
    finished_before = {r["run_id"] for r in before if r["status"] == "finished"}
    assert len(finished_before) >= len(done)

    out = json.loads(rl("run", suite, "--db", db, "--json").stdout)
    assert out["failed"] == 0 and out["skipped"] + out["finished"] + out["recovered"] >= 4
    after = json.loads(rl("status", "crash", "--db", db, "--json").stdout)["runs"]
    assert all(r["status"] == "finished" for r in after)
    for r in after:  # no finished run was run again
        if r["run_id"] in finished_before:
            assert r["attempts"] == 1, r

    con = duckdb.connect(str(db), read_only=True)
    try:
        total, distinct = con.execute(
            "SELECT count(*), count(DISTINCT (run_id, step, name, wall_time)) FROM metrics"
        ).fetchall()[0]
        assert total == distinct, "a metric row was ingested twice"
        evals = con.execute(
            "SELECT run_id, count(*) FROM metrics WHERE name = 'eval/return' GROUP BY run_id"
        ).fetchall()
        assert len(evals) == 4 and all(n == 7 for _, n in evals), evals  # steps 0, 10k, ..., 60k
        for table in ("suites", "runs", "metrics", "shards", "schema_version"):
            con.execute(f"SELECT * FROM {table}").fetchall()  # every table reads back whole
    finally:
        con.close()


def test_readers_work_while_a_run_writes_and_a_second_writer_is_refused(tmp_path):
    db = tmp_path / "db.duckdb"
    done = tmp_path / "done.yaml"  # a finished suite in the same file, to plot while another one runs
    done.write_text(
        "name: done\nseeds: 2\nbudget: {steps: 500, eval_every: 250, eval_episodes: 1}\n"
        "envs: [CartPole-v1]\nalgorithms: [random]\n"
    )
    rl("run", done, "--db", db)
    suite = _slow_suite(tmp_path)
    proc = _start(suite, db, cwd=tmp_path)
    try:
        _wait_for(proc, "start", 2)
        figs = tmp_path / "figs"
        rl("plot", "done", "--db", db, "--reps", "1000", "--out", figs)
        assert (figs / "aggregates.png").stat().st_size > 0
        assert "random" in rl("leaderboard", "done", "--db", db, "--reps", "1000").stdout
        r = rl("run", suite, "--db", db, check=False, cwd=tmp_path)
        assert r.returncode == 2
        assert "another 'rlbench run'" in r.stderr and "Traceback" not in r.stderr
        reads = 0
        deadline = time.monotonic() + 6
        while reads < 2 or time.monotonic() < deadline:  # every read succeeds while the run writes
            json.loads(rl("status", "crash", "--db", db, "--json").stdout)
            args = ["fetch", "--db", db, "--suite", "crash", "--metric", "eval/return", "--format", "csv"]
            r = rl(*args, check=False)
            # before the first evaluation is loaded there is nothing to fetch: exit 2 saying so, never a lock error
            assert r.returncode == 0 or (r.returncode == 2 and "no metric rows match" in r.stderr), r.stderr
            reads += 1
        assert proc.poll() is None, "the run ended before the reads; make its runs longer"
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, (proc.returncode, err)


def test_sigterm_to_the_coordinator_stops_its_workers_and_marks_runs_interrupted(tmp_path):
    suite, db = _suite(tmp_path, steps=2_000_000, seeds=3), tmp_path / "db.duckdb"
    proc = _start(suite, db)
    _wait_for(proc, "start", 2)
    time.sleep(1.5)
    t0 = time.monotonic()
    os.kill(proc.pid, signal.SIGTERM)  # as a batch scheduler or `kill` would: the coordinator alone
    _, err = proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 15
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert _group_gone(proc.pid), "workers outlived a terminated coordinator"
    runs = json.loads(rl("status", "crash", "--db", db, "--json").stdout)["runs"]
    assert sorted(r["status"] for r in runs) == ["interrupted", "interrupted", "pending"]


def test_a_stopped_json_run_prints_what_became_of_each_run(tmp_path):
    """`rlbench run --json` stopped by Ctrl-C prints one JSON object, as a finished one does, that says so and
    counts its runs as `status` then shows them."""
    suite, db = _suite(tmp_path, steps=2_000_000, seeds=3), tmp_path / "db.duckdb"
    proc = _start(suite, db, "--json")
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            r = rl("status", "crash", "--db", db, "--json", check=False)
            states = [x["status"] for x in json.loads(r.stdout)["runs"]] if r.returncode == 0 else []
            if states.count("running") == 2:
                break
            time.sleep(0.3)
        else:
            raise AssertionError("the runs did not start")
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    assert proc.returncode == 130 and "Traceback" not in err, err
    (line,) = out.strip().splitlines()  # JSON only: no progress lines
    said = json.loads(line)
    assert said["suite"] == "crash" and said["db"] == str(db) and said["stopped"] is True, said
    assert {k: said[k] for k in ("total", "skipped", "finished", "failed", "interrupted", "cut_short",
                                 "not_started")} == {"total": 3, "skipped": 0, "finished": 0, "failed": 0,
                                                     "interrupted": 2, "cut_short": 0, "not_started": 1}  # fmt: skip
    runs = json.loads(rl("status", "crash", "--db", db, "--json").stdout)["runs"]
    assert sorted(r["status"] for r in runs) == ["interrupted", "interrupted", "pending"]


def test_status_watch_follows_a_running_suite_to_its_end_and_the_runlock_is_removed(tmp_path):
    db = tmp_path / "db.duckdb"
    proc = _start(_suite(tmp_path, steps=150_000, seeds=2), db)
    try:
        _wait_for(proc, "start", 2)
        watch = rl("status", "crash", "--db", db, "--watch", "--interval", "0.3", timeout=300).stdout
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    tables = [t for t in watch.split("crash: ") if t]
    assert "running" in tables[0] and "local" in tables[0]  # seen while running, with its executor
    assert tables[-1].startswith("2 runs: 2 finished")  # and followed to the end
    runs = json.loads(rl("status", "crash", "--db", db, "--json").stdout)["runs"]
    assert {r["executor"] for r in runs} == {"local"} and all(r["job_id"] for r in runs)
    assert all(r["sys"]["sys/steps_per_second"] > 0 and r["sys"]["sys/rss_mb"] > 0 for r in runs)
    assert not db.with_name("db.duckdb.crash.runlock").exists()
