"""`--executor slurm` against a real single-node Slurm (slurmctld + slurmd + slurmdbd, see slurm_engine.py),
through the real `rlbench` command: same metrics as local, skip-finished, faults with their cause, retries,
--only-failed, timeouts, --detach and re-attach, a coordinator killed with -9, cancel, requeue, bad input.

Every subprocess has a timeout, and every wait a deadline: nothing here can hang CI."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import duckdb
import pytest
from e2e_cli import RLBENCH

pytestmark = pytest.mark.slow

JOBS = textwrap.dedent(
    """
    import os, signal, time
    from pathlib import Path

    import numpy as np


    def _policy(obs):
        return np.zeros(len(obs), dtype=int)


    def _fixed():
        return Path(os.environ.get("RLBENCH_TEST_FIXED", "/nonexistent")).exists()


    def good(ctx):
        for step in range(0, ctx.steps + 1, 100):
            ctx.maybe_evaluate(step, _policy)
            ctx.sink.log(step, **{"train/progress": step / ctx.steps})
        ctx.finish(ctx.steps, _policy)


    def slow(ctx):  # about 6 s, a metric row every 0.5 s
        for i in range(12):
            ctx.sink.log(i, **{"train/tick": float(i)})
            if ctx.should_stop():
                return
            time.sleep(0.5)
        ctx.sink.log(12, **{"train/tick": 12.0})


    def gated(ctx):  # a tick every 0.2 s until the file RLBENCH_TEST_GO names exists (at most 90 s)
        go, i = Path(os.environ["RLBENCH_TEST_GO"]), 0
        while not go.exists() and i < 450 and not ctx.should_stop():
            ctx.sink.log(i, **{"train/tick": float(i)})
            time.sleep(0.2)
            i += 1
        ctx.sink.log(i, **{"train/tick": float(i)})


    def _start(ctx):
        ctx.sink.log(0, **{"train/progress": 0.0})
        time.sleep(2.5)  # longer than the 1 s flush interval: what was logged is on disk


    def raises(ctx):
        _start(ctx)
        if not _fixed():
            raise ValueError("diverged: loss is nan")
        good(ctx)


    def killed(ctx):
        _start(ctx)
        if not _fixed():
            os.kill(os.getpid(), signal.SIGKILL)
        good(ctx)


    def hangs_once(ctx):  # its first attempt overruns --timeout; the retry finishes
        _start(ctx)
        if ctx.run_dir.name == "attempt-1":
            time.sleep(3600)
        good(ctx)


    def sleeps(ctx):
        _start(ctx)
        while not ctx.should_stop():
            time.sleep(0.2)
    """
)


def _suite(tmp: Path, name: str, algos: list[str], seeds: int = 1, extra: str = "") -> Path:
    (tmp / "jobs.py").write_text(JOBS)
    lines = "\n".join(
        f"  - {{name: {a}, entrypoint: 'jobs:{a}'}}" if a != "random" else "  - random" for a in algos
    )
    path = tmp / f"{name}.yaml"
    path.write_text(
        f"name: {name}\nseeds: {seeds}\nbudget: {{steps: 300, eval_every: 100, eval_episodes: 1}}\n"
        f"envs: [CartPole-v1]\nalgorithms:\n{lines}\n{extra}"
    )
    return path


def _rl(tmp: Path, *args, check=True, timeout=180, env=None):
    """`rlbench ARGS` run in ``tmp`` (the jobs' working folder, where jobs.py is)."""
    e = {**os.environ, "MPLBACKEND": "Agg", "RLBENCH_TEST_FIXED": str(tmp / "fixed"), **(env or {})}
    r = subprocess.run([RLBENCH, *map(str, args)], capture_output=True, text=True, timeout=timeout, env=e,
                       cwd=tmp)  # fmt: skip
    if check and r.returncode != 0:
        raise AssertionError(f"rlbench {' '.join(map(str, args))} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def _runs(db: Path, suite: str) -> dict[str, dict]:
    with duckdb.connect(str(db), read_only=True) as con:
        cur = con.execute(
            "SELECT run_id, algo, seed, status, attempts, error, executor, job_id, host FROM runs WHERE suite = ?",
            [suite],
        )
        cols = [d[0] for d in cur.description]
        return {r[0]: dict(zip(cols, r)) for r in cur.fetchall()}


def _metric_rows(db: Path, suite: str, prefix: str = "") -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(
            """SELECT m.run_id, m.step, m.name, m.value FROM metrics m JOIN runs r USING (run_id)
               WHERE r.suite = ? AND m.name NOT LIKE 'sys/%' AND m.name LIKE ? || '%'
               ORDER BY 1, 3, 2""",
            [suite, prefix],
        ).fetchall()


def _status(tmp: Path, db: Path, suite: str) -> dict:
    return json.loads(_rl(tmp, "status", suite, "--db", db, "--json", timeout=90).stdout)


def _wait(what: str, cond, timeout: float = 90.0, every: float = 1.0, explain=None):
    """Poll ``cond`` until it is true; past ``timeout`` fail, with ``explain()`` (e.g. the status) if given."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(every)
    raise AssertionError(
        f"timed out after {timeout:.0f}s waiting for {what}" + (f":\n{explain()}" if explain else "")
    )


def _squeue(slurm, name: str) -> list[str]:  # noqa: F811
    r = slurm.cmd("squeue", "-h", "-r", "-n", f"rlbench-{name}", "-o", "%i|%T")
    return [x for x in r.stdout.split() if x]


JOB_ID = re.compile(r"^\d+(_\d+)?$")  # ARRAYID_TASK; a lone run is submitted as a plain job


def test_a_suite_on_slurm_matches_local_and_a_rerun_skips_it(slurm, tmp_path):  # noqa: F811
    suite = _suite(tmp_path, "same", ["good", "random"], seeds=2)
    local_db, slurm_db = tmp_path / "local" / "db.duckdb", tmp_path / "slurm" / "db.duckdb"  # own runs/ each
    _rl(tmp_path, "run", suite, "--db", local_db, "--workers", "2")
    r = _rl(tmp_path, "run", suite, "--db", slurm_db, "--executor", "slurm", "--json")
    out = json.loads(r.stdout)
    assert (out["finished"], out["failed"]) == (4, 0)
    assert _metric_rows(slurm_db, "same") == _metric_rows(local_db, "same")
    assert len(_metric_rows(slurm_db, "same")) > 8
    runs = _runs(slurm_db, "same")
    assert {r["executor"] for r in runs.values()} == {"slurm"}
    assert all(JOB_ID.match(r["job_id"]) and r["host"] for r in runs.values()), runs
    text = _rl(tmp_path, "status", "same", "--db", slurm_db).stdout
    assert "slurm" in text and all(r["job_id"] in text for r in runs.values())
    # each run wrote into its attempt folder next to the database, where the task said it ran
    for run_id in runs:
        place = json.loads(
            (tmp_path / "slurm" / "runs" / "same" / run_id / "attempt-1" / "placement.json").read_text()
        )
        assert place["job_id"] == runs[run_id]["job_id"] and place["restart_count"] == 0
    again = json.loads(_rl(tmp_path, "run", suite, "--db", slurm_db, "--executor", "slurm", "--json").stdout)
    assert (again["skipped"], again["finished"]) == (4, 0)
    assert _runs(slurm_db, "same") == runs  # nothing resubmitted: same job ids


def test_faults_retries_timeout_and_only_failed(slurm, tmp_path):  # noqa: F811
    suite = _suite(tmp_path, "faults", ["good", "raises", "killed", "hangs_once"])
    db = tmp_path / "db.duckdb"
    r = _rl(tmp_path, "run", suite, "--db", db, "--executor", "slurm", "--retries", "1", "--timeout", "8",
            "--json", check=False, timeout=240)  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert (out["finished"], out["failed"]) == (2, 2), out
    runs = {r["algo"]: r for r in _runs(db, "faults").values()}
    assert runs["good"]["status"] == "finished" and runs["good"]["attempts"] == 1
    assert (
        runs["hangs_once"]["status"] == "finished" and runs["hangs_once"]["attempts"] == 2
    )  # timeout, retry
    assert runs["raises"]["status"] == "failed" and runs["raises"]["attempts"] == 2
    assert "ValueError: diverged: loss is nan" in runs["raises"]["error"]
    assert runs["killed"]["status"] == "failed" and runs["killed"]["attempts"] == 2
    assert "killed by SIGKILL" in runs["killed"]["error"], runs["killed"]["error"]
    attempt1 = tmp_path / "runs" / "faults" / runs["hangs_once"]["run_id"] / "attempt-1"
    assert (attempt1 / "placement.json").exists()
    # what the failed runs logged before dying is in the store
    with duckdb.connect(str(db), read_only=True) as con:
        n = con.execute("SELECT count(*) FROM metrics WHERE run_id = ? AND name = 'train/progress'",
                        [runs["killed"]["run_id"]]).fetchall()[0][0]  # fmt: skip
    assert n >= 1
    (tmp_path / "fixed").write_text("")
    out = json.loads(_rl(tmp_path, "run", suite, "--db", db, "--executor", "slurm", "--only-failed",
                         "--json", timeout=180).stdout)  # fmt: skip
    assert (out["finished"], out["failed"], out["skipped"]) == (2, 0, 2)
    runs = {r["algo"]: r for r in _runs(db, "faults").values()}
    assert {r["status"] for r in runs.values()} == {"finished"}
    assert runs["raises"]["attempts"] == 3 and runs["good"]["attempts"] == 1


def test_detach_then_status_reattaches_and_a_killed_coordinator_loses_nothing(slurm, tmp_path):  # noqa: F811
    suite = _suite(tmp_path, "bg", ["slow"], seeds=2)
    db = tmp_path / "db.duckdb"
    t0 = time.monotonic()
    r = _rl(tmp_path, "run", suite, "--db", db, "--executor", "slurm", "--detach", "--gpus-per-task", "1")
    assert time.monotonic() - t0 < 30 and "queued or running in Slurm" in r.stdout, r.stdout
    runs = _runs(db, "bg")
    assert {x["status"] for x in runs.values()} == {"running"} and all(
        JOB_ID.match(x["job_id"]) for x in runs.values()
    )
    st = _status(tmp_path, db, "bg")
    assert {x["status"] for x in st["runs"]} <= {"queued", "running", "finished"}
    assert {x["job_id"] for x in st["runs"]} == {x["job_id"] for x in runs.values()}
    _wait(
        "status to ingest the detached runs",
        lambda: _status(tmp_path, db, "bg")["suites"]["bg"]["all_finished"],
    )
    rows = _metric_rows(db, "bg", "train/tick")
    assert len(rows) == 2 * 13 and len(set(rows)) == len(rows)  # every row, none twice
    # each task got its own (fake) GPU from Slurm's GRES
    places = [
        json.loads(p.read_text()) for p in (tmp_path / "runs" / "bg").glob("*/attempt-1/placement.json")
    ]
    assert len(places) == 2 and all(p["cuda_visible_devices"] for p in places), places

    # a coordinator killed with -9 while its jobs run; the next `rlbench run` re-attaches, resubmits nothing,
    # shows them running, and counts --timeout from their start, not its own (it cancelled them at once)
    suite2 = _suite(tmp_path, "k9", ["gated"], seeds=2)
    env = {**os.environ, "RLBENCH_TEST_GO": str(tmp_path / "go")}
    proc = subprocess.Popen([RLBENCH, "run", suite2, "--db", db, "--executor", "slurm"], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        _wait(
            "both k9 runs to start on the node",
            lambda: len(list((tmp_path / "runs" / "k9").glob("*/attempt-1/metrics/*.parquet"))) >= 2,
            60,
            0.5,
        )
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    before = _runs(db, "k9")
    assert {x["status"] for x in before.values()} == {"running"}
    again = subprocess.Popen([RLBENCH, "run", suite2, "--db", db, "--executor", "slurm", "--timeout", "600"],
                             cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(again.stdout), daemon=True)
    reader.start()
    try:
        _wait(
            "the re-attached run to follow the jobs",
            lambda: any(x.startswith("Slurm:") for x in lines),
            60,
            0.2,
        )
        time.sleep(3)  # three looks at Slurm while the jobs run
        (tmp_path / "go").touch()
        again.wait(timeout=120)
        reader.join(timeout=10)
    finally:
        again.kill()
    out = "".join(lines)
    assert again.returncode == 0 and "2 finished, 0 failed" in out and "timeout" not in out, out
    assert out.count("running on localhost gated CartPole-v1") == 2 and "(submitted earlier)" in out, out
    after = _runs(db, "k9")
    assert {x["status"] for x in after.values()} == {"finished"}
    assert {k: v["job_id"] for k, v in after.items()} == {k: v["job_id"] for k, v in before.items()}
    assert {v["attempts"] for v in after.values()} == {1}
    for run_id in after:  # every tick once, none missing
        ticks = [step for rid, step, _, _ in _metric_rows(db, "k9", "train/tick") if rid == run_id]
        assert ticks == list(range(len(ticks))) and len(ticks) > 3, ticks


def test_cancel_stops_queued_and_running_jobs(slurm, tmp_path):  # noqa: F811
    suite = _suite(tmp_path, "cx", ["sleeps"], seeds=2, extra="resources: {slurm: {array_parallelism: 1}}\n")
    db = tmp_path / "db.duckdb"
    _rl(tmp_path, "run", suite, "--db", db, "--executor", "slurm", "--detach")
    _wait(
        "one task to run",
        lambda: list((tmp_path / "runs" / "cx").glob("*/attempt-1/placement.json")),
        60,
        0.5,
    )
    r = _rl(tmp_path, "cancel", "cx", "--db", db, timeout=90)
    assert "cancelled 2 Slurm job(s)" in r.stdout, r.stdout
    runs = _runs(db, "cx")
    assert {x["status"] for x in runs.values()} == {"interrupted"}, runs
    assert all("cancel" in x["error"] for x in runs.values())
    _wait("the jobs to leave the queue", lambda: not [x for x in _squeue(slurm, "cx") if "RUNNING" in x
                                                      or "PENDING" in x], 30)  # fmt: skip
    assert "no runs queued or running" in _rl(tmp_path, "cancel", "cx", "--db", db).stdout

    # a job that ended since the store last looked is recorded as it ended, not called cancelled
    fin = _suite(tmp_path, "fin", ["good", "sleeps"])
    _rl(tmp_path, "run", fin, "--db", db, "--executor", "slurm", "--detach")
    _wait("the good job to complete in Slurm", lambda: "COMPLETED" in slurm.cmd(
        "squeue", "-h", "-r", "-t", "all", "-n", "rlbench-fin", "-o", "%i|%T").stdout, 60, 0.5)  # fmt: skip
    r = _rl(tmp_path, "cancel", "fin", "--db", db, timeout=90)
    assert "cancelled 1 Slurm job(s)" in r.stdout and "1 other job(s) had already ended" in r.stdout, r.stdout
    assert {x["algo"]: x["status"] for x in _runs(db, "fin").values()} == {"good": "finished",
                                                                           "sleeps": "interrupted"}  # fmt: skip

    # Ctrl-C on an attached run: its jobs are cancelled in Slurm and end interrupted
    suite2 = _suite(tmp_path, "ctrlc", ["sleeps"], seeds=2)
    env = {**os.environ, "RLBENCH_TEST_FIXED": str(tmp_path / "fixed")}
    proc = subprocess.Popen([RLBENCH, "run", suite2, "--db", db, "--executor", "slurm"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        _wait("both tasks to run", lambda: len(list((tmp_path / "runs" / "ctrlc").glob("*/attempt-1/metrics/*"))) >= 2,
              60, 0.3)  # fmt: skip
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, out
    runs = _runs(db, "ctrlc")
    assert {x["status"] for x in runs.values()} == {"interrupted"}, runs
    _wait("the jobs to leave the queue", lambda: not [x for x in _squeue(slurm, "ctrlc") if "RUNNING" in x
                                                      or "PENDING" in x], 30)  # fmt: skip


def test_a_requeued_task_comes_back_as_a_new_attempt(slurm, tmp_path):  # noqa: F811
    """Two suites at once, each with one task requeued while it runs: one followed by an attached
    `rlbench run`, the other submitted with --detach and re-attached by `rlbench status`."""
    db_a, db_d = tmp_path / "a" / "db.duckdb", tmp_path / "d" / "db.duckdb"
    suite_a, suite_d = _suite(tmp_path, "rqa", ["slow"]), _suite(tmp_path, "rqd", ["slow"])
    env = {**os.environ, "RLBENCH_TEST_FIXED": str(tmp_path / "fixed")}
    attached = subprocess.Popen([RLBENCH, "run", suite_a, "--db", db_a, "--executor", "slurm"], cwd=tmp_path,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        _rl(tmp_path, "run", suite_d, "--db", db_d, "--executor", "slurm", "--detach")
        folders = {db: db.parent / "runs" / name for db, name in ((db_a, "rqa"), (db_d, "rqd"))}
        for db, runs in folders.items():
            _wait(
                f"the task of {db.parent.name} to run",
                lambda runs=runs: list(runs.glob("*/attempt-1/placement.json")),
                60,
                0.3,
            )
        placed = [list(runs.glob("*/attempt-1/placement.json")) for runs in folders.values()]
        assert [len(p) for p in placed] == [1, 1], placed
        slurm.requeue(*(json.loads(p[0].read_text())["job_id"] for p in placed))
        # while the attached run holds the database, status only reads (and asks Slurm)
        st = _status(tmp_path, db_a, "rqa")
        assert st["runs"][0]["status"] in ("queued", "running") and JOB_ID.match(st["runs"][0]["job_id"]), st
        try:
            out, _ = attached.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            attached.kill()
            out, _ = attached.communicate(timeout=30)
            queue = slurm.cmd("squeue", "-h", "-r", "-t", "all", "-o", "%i|%T|%r").stdout
            raise AssertionError(f"the attached run did not end:\n{out}\nsqueue:\n{queue}") from None
    finally:
        attached.kill()
    assert attached.returncode == 0 and "requeued" in out, out
    _wait("the detached requeued task to finish", lambda: _status(tmp_path, db_d, "rqd")["suites"]["rqd"]["all_finished"],
          180, 2, lambda: json.dumps(_status(tmp_path, db_d, "rqd")["runs"], default=str)
          + slurm.cmd("squeue", "-h", "-r", "-t", "all", "-o", "%i|%T|%r").stdout)  # fmt: skip
    for db, name in ((db_a, "rqa"), (db_d, "rqd")):
        (run,) = _runs(db, name).values()
        assert (run["attempts"], run["status"]) == (2, "finished"), run
        folder = db.parent / "runs" / name / run["run_id"]
        first, second = (json.loads((folder / f"attempt-{k}" / "placement.json").read_text()) for k in (1, 2))
        assert first["job_id"] == second["job_id"] == run["job_id"] and second["restart_count"] == 1
        rows = _metric_rows(db, name, "train/tick")
        assert len(rows) == 13 and len(set(rows)) == 13  # the new attempt's rows, once


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_bad_input_is_one_line_exit_2_and_changes_nothing(slurm, tmp_path):  # noqa: F811
    suite = _suite(tmp_path, "bad", ["good"])
    db = tmp_path / "db.duckdb"
    _rl(tmp_path, "run", suite, "--db", db)  # a store with one finished local run
    _suite(tmp_path, "bad", ["good", "random"])  # one more run to do
    before = _sha(db)
    nosub = tmp_path / "nosubmitit" / "submitit"
    nosub.mkdir(parents=True)
    (nosub / "__init__.py").write_text("raise ImportError('No module named submitit')\n")
    pypath = os.pathsep.join([str(nosub.parent), os.environ.get("PYTHONPATH", "")])
    cases = [
        ({"PATH": str(Path(sys.executable).parent)}, [], "no 'sbatch' on PATH"),
        ({}, ["--gpus-per-task", "9"], "gpus_per_task"),
        ({}, ["--mem-gb", "5000"], "mem_gb"),
        ({}, ["--partition", "nosuch"], "no such partition"),
        ({"PYTHONPATH": pypath}, [], 'pip install "rlbench-cli[slurm]"'),
    ]
    for env, flags, words in cases:
        r = _rl(
            tmp_path,
            "run",
            suite,
            "--db",
            db,
            "--executor",
            "slurm",
            *flags,
            check=False,
            env=env,
            timeout=60,
        )
        assert r.returncode == 2, (flags, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0] and "Traceback" not in r.stderr, (flags, r.stderr)
    assert _sha(db) == before
    assert not _squeue(slurm, "bad")
    assert not list((tmp_path / "runs" / "bad").glob("*/*/placement.json"))  # no task ever started


def test_each_test_worker_looks_for_slurms_ports_in_a_range_of_its_own(monkeypatch):
    """Two pytest-xdist workers that start Slurm at the same instant must not both find the same ports free."""
    import socket

    from slurm_engine import _first_port, _free_ports

    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert _first_port() == 6917
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    assert _first_port() == 6957
    with socket.socket() as held:  # a port already held is skipped, with the three after it
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        held.listen()
        assert _free_ports(port) >= port + 4
