"""Faults inside jobs: an exception, a segfault, a SIGKILL (what the OOM killer sends), a hang past the
timeout. Each is recorded with its cause and retried as asked; the rest of the grid completes."""

import json
import os
import shutil
import signal
import subprocess
import textwrap
import time

import duckdb
import pytest
from e2e_cli import rl

RLBENCH = shutil.which("rlbench")
pytestmark = pytest.mark.slow

# What each executor can tell about a worker that died: the local pool sees the signal; Ray sees the report a
# fatal signal leaves in the run's output, and for a SIGKILL (no report) only that the actor's process died.
CAUSES = {
    "local": {
        "segfault": "worker killed by SIGSEGV",
        "oom_killed": "worker killed by SIGKILL (out of memory",
        "segfault_exit_code": -11,
    },
    "ray": {
        "segfault": "worker killed by SIGSEGV (segmentation fault in native code)",
        "oom_killed": "worker died: the Ray actor's process exited without a fatal-signal report (killed with SIGKILL",
        "segfault_exit_code": -11,
    },
}


def executor_args(executor: str, request: pytest.FixtureRequest) -> list[str]:
    """The `rlbench run` flags that pick ``executor`` (for ray: the session's head)."""
    if executor == "local":
        return []
    return ["--executor", "ray", "--address", request.getfixturevalue("ray_head").address]


FAULTY = textwrap.dedent(
    """
    import ctypes, os, signal, time

    import numpy as np


    def _policy(obs):
        return np.zeros(len(obs), dtype=int)


    def good(ctx):
        for step in range(0, ctx.steps + 1, 100):
            ctx.maybe_evaluate(step, _policy)
            ctx.sink.log(step, **{"train/progress": step / ctx.steps})
        ctx.finish(ctx.steps, _policy)


    def _start(ctx):
        print(f"job {ctx.spec.algo} started", flush=True)
        ctx.maybe_evaluate(0, _policy)
        ctx.sink.log(0, **{"train/progress": 0.0})
        time.sleep(3)  # past the 1 s flush and Ray's 1 s pull after it: what was logged is on disk


    def raises(ctx):
        _start(ctx)
        raise ValueError("diverged: loss is nan")


    def segfault(ctx):
        _start(ctx)
        ctx_ = ctypes.string_at(0)  # reads address 0: SIGSEGV in native code


    def oom_killed(ctx):
        _start(ctx)
        os.kill(os.getpid(), signal.SIGKILL)


    def hangs(ctx):
        _start(ctx)
        time.sleep(3600)
    """
)


@pytest.mark.parametrize("executor", ["local", "ray"])
def test_every_kind_of_job_fault_is_recorded_and_the_grid_completes(tmp_path, executor, request):
    (tmp_path / "faulty.py").write_text(FAULTY)
    algos = "\n".join(
        f"  - {{name: {n}, entrypoint: 'faulty:{n}'}}"
        for n in ("hangs", "good", "raises", "segfault", "oom_killed")  # the 2 x 15 s hang beside the rest
    )
    (tmp_path / "faults.yaml").write_text(
        "name: faults\nseeds: 1\nbudget: {steps: 300, eval_every: 100, eval_episodes: 1}\n"
        f"envs: [CartPole-v1]\nalgorithms:\n{algos}\n"
    )
    db = tmp_path / "db.duckdb"
    r = subprocess.run(
        [
            RLBENCH,
            "run",
            "faults.yaml",
            "--db",
            str(db),
            "--retries",
            "1",
            "--timeout",
            "15",  # well past the faulty jobs' 3 s: on a busy machine a job's start took over 5 s
            "--workers",
            "2",
            *executor_args(executor, request),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,  # the hanging job is killed after 15 s: a run that never ends would be the bug
    )
    assert r.returncode == 1, r.stdout + r.stderr  # runs failed: exit 1, not a crash of rlbench
    assert "Traceback" not in r.stderr
    status = json.loads(
        subprocess.run(
            [RLBENCH, "status", "faults", "--db", str(db), "--json"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    runs = {x["algo"]: x for x in status["runs"]}
    assert runs["good"]["status"] == "finished" and runs["good"]["attempts"] == 1
    expected = {
        "raises": "ValueError: diverged: loss is nan",
        "segfault": CAUSES[executor]["segfault"],
        "oom_killed": CAUSES[executor]["oom_killed"],
        "hangs": "timeout: killed after 15s",
    }
    for algo, cause in expected.items():
        run = runs[algo]
        assert run["status"] == "failed", run
        assert run["attempts"] == 2, run  # retried once, as asked
        assert cause in run["error"], run["error"]
    assert (
        runs["raises"]["exit_code"] == 1
        and runs["segfault"]["exit_code"] == CAUSES[executor]["segfault_exit_code"]
    )
    # what a failed run logged before it died is kept (its last attempt)
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = dict(
            con.execute(
                "SELECT r.algo, count(*) FROM metrics m JOIN runs r USING (run_id) "
                "WHERE m.name = 'train/progress' GROUP BY r.algo"
            ).fetchall()
        )
    finally:
        con.close()
    assert rows["good"] == 4
    for algo in expected:
        assert rows.get(algo, 0) >= 1, (algo, rows)
    assert "FAILED" in r.stdout and "retrying" in r.stdout
    # every failed attempt keeps its output.log, whatever ended it and wherever it ran
    for algo in expected:
        logs = sorted((tmp_path / "runs" / "faults" / runs[algo]["run_id"]).glob("attempt-*/output.log"))
        assert len(logs) == 2, (algo, logs)
        for log in logs:
            assert f"job {algo} started" in log.read_text(errors="replace"), (algo, log)


STUBBORN = textwrap.dedent(
    """
    import time


    def ignores_stop(ctx):
        print(f"job {ctx.spec.algo} seed {ctx.spec.seed}: in native code, deaf to the stop request", flush=True)
        ctx.sink.log(0, **{"train/progress": 0.0})
        while True:  # never looks at the stop request: Ctrl-C must kill it after the grace period
            time.sleep(0.1)
    """
)


def ctrl_c_once_jobs_logged(
    tmp_path, suite: str, executor: str, request: pytest.FixtureRequest
) -> list[dict]:
    """``rlbench run`` of two seeds of ``suite`` (in tmp_path), Ctrl-C once both jobs logged a row of
    ``train/progress``; checks the run stops in time with exit 130 and returns ``status --json``'s runs."""
    db = tmp_path / "db.duckdb"
    proc = subprocess.Popen(
        [RLBENCH, "run", f"{suite}.yaml", "--db", str(db), "--workers", "2", *executor_args(executor, request)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # its own process group, like a terminal's foreground job
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # both jobs are in their loops once their rows are in the store
            r = rl("fetch", "--db", db, "--suite", suite, "--metric", "train/progress", "--format", "csv",
                   check=False)  # fmt: skip
            if r.returncode == 0 and len(r.stdout.strip().splitlines()) >= 3:  # header + a row a job
                break
            time.sleep(0.5)
        else:
            raise AssertionError("the jobs did not start")
        t0 = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: SIGINT to the whole foreground group
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    assert time.monotonic() - t0 < 30, "Ctrl-C took too long"
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    if executor == "ray":  # the stopped or killed actors hold nothing on the head
        assert request.getfixturevalue("ray_head").wait_all_free(), "an actor outlived the interrupted run"
    runs = json.loads(rl("status", suite, "--db", db, "--json").stdout)["runs"]
    assert sorted(r["seed"] for r in runs) == [0, 1]
    return runs


@pytest.mark.parametrize("executor", ["local", "ray"])
def test_ctrl_c_kills_a_job_deaf_to_the_stop_request_and_keeps_its_output(tmp_path, executor, request):
    """Jobs that never look at the stop request are killed a few seconds after Ctrl-C; their runs are marked
    interrupted and their attempts keep what they printed, wherever they ran (a Ray actor's log is on its
    node)."""
    (tmp_path / "stubborn.py").write_text(STUBBORN)
    (tmp_path / "deaf.yaml").write_text(
        "name: deaf\nseeds: 2\nbudget: {steps: 300, eval_every: 300, eval_episodes: 1}\n"
        "envs: [CartPole-v1]\nalgorithms:\n  - {name: deaf, entrypoint: 'stubborn:ignores_stop'}\n"
    )
    for run in ctrl_c_once_jobs_logged(tmp_path, "deaf", executor, request):
        assert run["status"] == "interrupted" and "killed after" in run["error"], run
        (log,) = (tmp_path / "runs" / "deaf" / run["run_id"]).glob("attempt-*/output.log")
        said = f"job deaf seed {run['seed']}: in native code, deaf to the stop request"
        assert said in log.read_text(errors="replace"), (run, log.read_text(errors="replace"))


FRAGILE = textwrap.dedent(
    """
    import os
    import signal
    import time


    def dies_while_stopping(ctx):
        ctx.sink.log(0, **{"train/progress": 0.0})
        while not ctx.should_stop():
            time.sleep(0.05)
        ctx.sink.log(1, **{"train/progress": 1.0})  # after the coordinator's last pull of this job's shards
        ctx.sink.flush()
        print(f"seed {ctx.spec.seed}: asked to stop, dying while saving", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # the worker process dies: what it wrote stays where it ran
    """
)


@pytest.mark.parametrize("executor", ["local", "ray"])
def test_a_job_that_dies_while_stopping_keeps_what_it_wrote_last(tmp_path, executor, request):
    """A job asked to stop by Ctrl-C whose worker dies on the way out (a crash while saving) is interrupted
    and keeps the rows it flushed and the lines it printed just before, also on Ray, where they are on the
    dead actor's node (fetched from there as for a crash mid-run)."""
    (tmp_path / "fragile.py").write_text(FRAGILE)
    (tmp_path / "fragile.yaml").write_text(
        "name: fragile\nseeds: 2\nbudget: {steps: 300, eval_every: 300, eval_episodes: 1}\n"
        "envs: [CartPole-v1]\nalgorithms:\n  - {name: fragile, entrypoint: 'fragile:dies_while_stopping'}\n"
    )
    runs = ctrl_c_once_jobs_logged(tmp_path, "fragile", executor, request)
    assert [r["status"] for r in runs] == ["interrupted", "interrupted"], runs
    con = duckdb.connect(str(tmp_path / "db.duckdb"), read_only=True)
    try:
        steps = dict(con.execute("SELECT run_id, list(step ORDER BY step) FROM metrics "
                                 "WHERE name = 'train/progress' GROUP BY run_id").fetchall())  # fmt: skip
    finally:
        con.close()
    assert steps == {r["run_id"]: [0, 1] for r in runs}, steps  # the rows flushed just before dying are kept
    for run in runs:
        (log,) = (tmp_path / "runs" / "fragile" / run["run_id"]).glob("attempt-*/output.log")
        said = f"seed {run['seed']}: asked to stop, dying while saving"
        assert said in log.read_text(errors="replace"), (run, log.read_text(errors="replace"))
