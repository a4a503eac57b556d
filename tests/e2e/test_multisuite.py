"""Several suites on one store at the same time, as a user would meet it: two `rlbench run` of different
suites on one database both complete, taking turns at the file, with every metric row of every run there once; the
same suite twice is refused; kill -9 of one coordinator leaves the other's runs untouched, and running its
suite again recovers and completes it."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from e2e_cli import RLBENCH, rl

from rlbench_cli.runner import attempt_dir

pytestmark = pytest.mark.slow

EVAL_EVERY = 100_000
PAUSE_S = 0.8  # a run's seconds per evaluation: runs last by the clock, not by CPU (the machine may be busy)
# a run that logs its evaluations through the JSON-lines client (into the run's shards as any run's metrics)
SLOW = """\
import sys, time
from rlbench_cli import client
steps, seed = int(sys.argv[1]), int(sys.argv[2])
for step in range(0, steps + 1, EVAL_EVERY):
    client.log(step, **{"eval/return": 10.0 + seed, "train/progress": step / steps})
    time.sleep(PAUSE_S)
"""


def _suite(tmp_path: Path, name: str, seeds: int, steps: int) -> Path:
    (tmp_path / "slow.py").write_text(f"EVAL_EVERY = {EVAL_EVERY}\nPAUSE_S = {PAUSE_S}\n{SLOW}")
    p = tmp_path / f"{name}.yaml"
    p.write_text(
        f"name: {name}\nseeds: {seeds}\n"
        f"budget: {{steps: {steps}, eval_every: {EVAL_EVERY}, eval_episodes: 1}}\n"
        "envs: [CartPole-v1]\n"
        f"algorithms: [{{name: slow, command: '{sys.executable} {tmp_path}/slow.py {{steps}} {{seed}}'}}]\n"
    )
    return p


def _start(suite: Path, db: Path) -> subprocess.Popen:
    return subprocess.Popen([RLBENCH, "run", str(suite), "--db", str(db), "--workers", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip


def _wait_for(proc: subprocess.Popen, prefix: str, count: int = 1, timeout: float = 180) -> None:
    seen, deadline = 0, time.monotonic() + timeout
    while seen < count and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen += line.strip().startswith(prefix)
    assert seen >= count, f"saw {seen} lines starting {prefix!r} before the deadline"


def _finish(proc: subprocess.Popen, timeout: float = 300) -> str:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out + err
    return out


def _stop(*procs: subprocess.Popen) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def _runs(db: Path, suite: str) -> list[dict]:
    return json.loads(rl("status", suite, "--db", db, "--json").stdout)["runs"]


def _check_rows(db: Path, suites: dict[str, int]) -> None:
    """Every run of ``suites`` ({name: steps}) finished with each metric row of its last attempt's shards in
    the store once: no row lost, none doubled."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        total, distinct = con.execute(
            "SELECT count(*), count(DISTINCT (run_id, step, name, wall_time)) FROM metrics"
        ).fetchone()
        assert total == distinct, "a metric row was ingested twice"
        for suite, steps in suites.items():
            runs = con.execute(
                "SELECT run_id, status, attempts FROM runs WHERE suite = ?", [suite]
            ).fetchall()
            assert runs and all(status == "finished" for _, status, _ in runs), runs
            for run_id, _, attempts in runs:
                folder = attempt_dir(db.parent / "runs", suite, run_id, attempts) / "metrics"
                shards = sorted(str(p) for p in folder.glob("*.parquet"))
                in_shards = con.execute("SELECT count(*) FROM read_parquet(?)", [shards]).fetchone()[0]
                stored, evals = con.execute(
                    "SELECT count(*), count(*) FILTER (name = 'eval/return') FROM metrics WHERE run_id = ?",
                    [run_id],
                ).fetchone()
                assert stored == in_shards > 0, (suite, run_id, stored, in_shards)
                assert evals == steps // EVAL_EVERY + 1, (suite, run_id, evals)  # steps 0, 100k, ..., steps
    finally:
        con.close()


def _spans(db: Path, suite: str) -> tuple[float, float]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(
            "SELECT epoch(min(started_at)), epoch(max(ended_at)) FROM runs WHERE suite = ?", [suite]
        ).fetchone()
    finally:
        con.close()


def test_two_suites_run_at_once_on_one_store_and_the_same_suite_twice_is_refused(tmp_path):
    db = tmp_path / "db.duckdb"
    alpha, beta = _suite(tmp_path, "alpha", 2, 600_000), _suite(tmp_path, "beta", 2, 400_000)
    a, b = _start(alpha, db), _start(beta, db)
    try:
        _wait_for(a, "start")
        _wait_for(b, "start")
        again = rl("run", alpha, "--db", db, check=False)  # the same suite twice: refused, nothing touched
        assert again.returncode == 2 and again.stderr.count("\n") == 1 and "Traceback" not in again.stderr
        assert (
            f"another 'rlbench run' (pid {a.pid}) is writing to this database (suite 'alpha'); "
            "wait for it to finish, or pass another --db" in again.stderr
        ), again.stderr
        assert a.poll() is None and b.poll() is None, "a suite ended before the reads; make its runs longer"
        for _ in range(
            3
        ):  # readers get in between the two coordinators' write windows (they retry, never fail)
            assert {r["status"] for r in _runs(db, "beta")} <= {"running", "pending", "finished"}
            args = ["fetch", "--db", db, "--suite", "alpha", "--metric", "eval/return", "--format", "csv"]
            r = rl(*args, check=False)
            assert r.returncode == 0 or (r.returncode == 2 and "no metric rows match" in r.stderr), r.stderr
        out_a, out_b = _finish(a), _finish(b)
    finally:
        _stop(a, b)
    assert "alpha: 2 finished, 0 failed" in out_a and "beta: 2 finished, 0 failed" in out_b
    (a0, a1), (b0, b1) = _spans(db, "alpha"), _spans(db, "beta")
    assert a0 < b1 and b0 < a1, "the two suites did not run at the same time"
    assert all(r["attempts"] == 1 for s in ("alpha", "beta") for r in _runs(db, s))
    _check_rows(db, {"alpha": 600_000, "beta": 400_000})
    assert not list(tmp_path.glob("db.duckdb.*.runlock"))  # both run locks removed on exit


def test_kill_9_of_one_coordinator_leaves_the_others_runs_untouched_and_its_suite_resumes(tmp_path):
    db = tmp_path / "db.duckdb"
    alpha, beta = _suite(tmp_path, "alpha", 3, 500_000), _suite(tmp_path, "beta", 3, 600_000)
    a, b = _start(alpha, db), _start(beta, db)
    again = None
    try:
        _wait_for(b, "start")
        _wait_for(a, "done")
        time.sleep(1.0)  # alpha's next run is in flight and has flushed some metrics
        os.kill(a.pid, signal.SIGKILL)  # the coordinator only; its workers go with it
        a.wait(timeout=10)
        assert b.poll() is None, "beta ended before alpha was killed; make its runs longer"

        again = _start(alpha, db)  # recovers alpha's runs while beta's coordinator is alive and writing
        _wait_for(again, "start")  # past the plan: recovery is done
        beta_now = _runs(db, "beta")
        assert b.poll() is None, "beta ended before alpha's recovery; make its runs longer"
        assert "running" in {r["status"] for r in beta_now}
        assert all(r["status"] in ("running", "pending", "finished") for r in beta_now), beta_now  # untouched
        out_again, out_b = _finish(again), _finish(b)
    finally:
        _stop(a, b, *([again] if again else []))
    assert "alpha: " in out_again and "0 failed" in out_again, out_again
    assert "beta: 3 finished, 0 failed, 0 skipped" in out_b, out_b
    beta_runs = _runs(db, "beta")
    assert all(r["attempts"] == 1 and r["error"] is None for r in beta_runs), beta_runs
    alpha_runs = _runs(db, "alpha")
    assert sorted(r["attempts"] for r in alpha_runs)[0] == 1  # finished before the kill: not run again
    assert max(r["attempts"] for r in alpha_runs) == 2  # in flight at the kill: a second attempt
    _check_rows(db, {"alpha": 500_000, "beta": 600_000})
