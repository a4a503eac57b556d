"""End to end, as a user would: the real ``rlbench`` command in a subprocess on the smoke suite."""

import json
import os
import subprocess
import time
from pathlib import Path

import duckdb
import pytest
from e2e_cli import RLBENCH, rl

ROOT = Path(__file__).parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    d = tmp_path_factory.mktemp("smoke")
    db = d / "rlbench.duckdb"
    t0 = time.monotonic()
    r = rl("run", ROOT / "suites/smoke.yaml", "--db", db)
    return {"db": db, "dir": d, "run": r, "seconds": time.monotonic() - t0}


def test_run_finishes_everything(smoke):
    status = json.loads(rl("status", "smoke", "--db", smoke["db"], "--json").stdout)
    s = status["suites"]["smoke"]
    assert s["all_finished"], status
    assert s["total"] == s["finished"] == 6
    assert all(r["attempts"] == 1 and r["exit_code"] == 0 for r in status["runs"])
    assert "done" in smoke["run"].stdout


def test_rerun_trains_nothing(smoke):
    t0 = time.monotonic()
    r = rl("run", ROOT / "suites/smoke.yaml", "--db", smoke["db"], "--json")
    out = json.loads(r.stdout)
    assert out["skipped"] == 6 and out["finished"] == 0
    assert time.monotonic() - t0 < 20
    status = json.loads(rl("status", "smoke", "--db", smoke["db"], "--json").stdout)
    assert all(r["attempts"] == 1 for r in status["runs"])


def test_database_contents(smoke):
    con = duckdb.connect(str(smoke["db"]), read_only=True)
    try:
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        assert {"suites", "runs", "metrics", "schema_version", "shards"} <= tables
        runs = con.execute("SELECT run_id, algo, env, seed, status, git_commit, python, packages, host, device, "
                           "started_at, ended_at FROM runs").fetchall()  # fmt: skip
        assert len(runs) == 6
        for run in runs:
            assert run[4] == "finished" and run[6] and run[8] and run[9] == "cpu" and run[10] and run[11]
            assert "torch" in json.loads(run[7])
        # every run evaluated at steps 0, 1000, 2000 exactly once (ingest is idempotent)
        rows = con.execute("""SELECT run_id, list(step ORDER BY step) FROM metrics WHERE name = 'eval/return'
                              GROUP BY run_id""").fetchall()  # fmt: skip
        assert len(rows) == 6
        for _, steps in rows:
            assert steps[0] == 0 and steps[-1] == 2000 and len(steps) == len(set(steps)) == 3
        names = {r[0] for r in con.execute("SELECT DISTINCT name FROM metrics").fetchall()}
        assert {
            "eval/return",
            "train/episode_return",
            "sys/sps_overall",
            "sys/rss_peak_mb",
            "sys/rss_mb",
            "sys/cpu_percent",
            "sys/steps_per_second",
        } <= names
        assert any(n.startswith("train/loss/") for n in names)
        random_final = con.execute("""SELECT avg(value) FROM metrics m JOIN runs r USING (run_id)
            WHERE r.algo = 'random' AND m.name = 'eval/return'""").fetchall()[0][0]  # fmt: skip
        assert 10 < random_final < 40
    finally:
        con.close()


def test_fetch_csv_and_json(smoke):
    cols = ["run_id", "suite", "algo", "env", "seed", "step", "name", "value"]
    csv = rl(
        "fetch", "--db", smoke["db"], "--suite", "smoke", "--metric", "eval/return", "--format", "csv"
    ).stdout
    header, *lines = csv.strip().splitlines()
    assert [c.strip('"') for c in header.split(",")][: len(cols)] == cols
    assert len(lines) == 18
    js = json.loads(rl("fetch", "--db", smoke["db"], "--suite", "smoke", "--algo", "ppo", "--seed", "1",
                       "--metric", "eval/return", "--format", "json").stdout)  # fmt: skip
    assert len(js) == 3 and all(r["algo"] == "ppo" and r["seed"] == 1 for r in js)
    out = smoke["dir"] / "all.parquet"
    rl("fetch", "--db", smoke["db"], "--format", "parquet", "--output", out)
    assert duckdb.sql(f"SELECT count(*) FROM read_parquet('{out}')").fetchall()[0][0] > 18


@pytest.mark.parametrize("args", [["fetch", "--suite", "smoke", "--format", "csv"], ["status", "smoke"]])
def test_a_reader_that_stops_reading_ends_the_command_quietly(smoke, args):
    """`rlbench fetch ... | head`: once the reader has gone, the command stops with SIGPIPE's exit status and
    says nothing (it said "error: [Errno 32] Broken pipe; check the path and its permissions")."""
    proc = subprocess.Popen([RLBENCH, *args, "--db", str(smoke["db"])], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    proc.stdout.close()  # before the command, still importing, writes anything
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141 and err == "", err


def test_a_run_whose_reader_goes_away_runs_to_the_end(tmp_path):
    """`rlbench run ... | head`: the run goes on without printing (it died at its first line, leaving a run
    'running'); every run finishes and is recorded."""
    suite = tmp_path / "quiet.yaml"
    suite.write_text("name: quiet\nseeds: 3\nbudget: {steps: 300, eval_every: 100, eval_episodes: 1}\n"
                     "envs: [CartPole-v1]\nalgorithms: [random]\n")  # fmt: skip
    db = tmp_path / "db.duckdb"
    proc = subprocess.Popen([RLBENCH, "run", str(suite), "--db", str(db), "--workers", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=180) == 0 and err == "", err
    status = json.loads(rl("status", "quiet", "--db", db, "--json").stdout)
    assert status["suites"]["quiet"]["finished"] == 3, status


def test_plot_writes_real_figures_and_leaderboard(smoke):
    from PIL import Image

    out = smoke["dir"] / "figs"
    r = rl("plot", "smoke", "--db", smoke["db"], "--reps", "2000", "--out", out)
    assert "IQM" in r.stdout or "iqm" in r.stdout
    pngs = sorted(out.glob("*.png"))
    names = {p.stem for p in pngs}
    assert {"aggregates", "performance_profile", "probability_of_improvement", "sample_efficiency",
            "learning_curves"} <= names  # fmt: skip
    for p in pngs:
        with Image.open(p) as im:
            assert im.width > 300 and im.height > 200
            assert len(set(im.convert("L").getdata())) > 10  # not a blank canvas
    md = (out / "leaderboard.md").read_text()
    assert "final" in md and "ppo" in md and "random" in md
    csv = (out / "leaderboard.csv").read_text().splitlines()
    assert len(csv) == 4  # header + 3 algorithms
    r = rl("plot", "smoke", "--db", smoke["db"], "--reps", "2000", "--out", out / "svg", "--format", "svg")
    assert (out / "svg" / "aggregates.svg").read_text().lstrip().startswith("<?xml")
    # smoke varies no setting within an algorithm: --x says so in one line, naming the keys that vary
    r = rl("plot", "smoke", "--db", smoke["db"], "--x", "params.num_envs", "--out", out / "x", check=False)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines() == [
        "rlbench: error: --x 'params.num_envs': every run of suite 'smoke' has the value 4, so there is nothing to "
        "plot against; the keys that vary there: none (its runs differ by algorithm, task and seed only)"
    ]


def executor_args(executor: str, request: pytest.FixtureRequest) -> list[str]:
    """The `rlbench run` flags that pick ``executor`` (for ray: the session's head)."""
    if executor == "local":
        return []
    return ["--executor", "ray", "--address", request.getfixturevalue("ray_head").address]


@pytest.mark.parametrize("executor", ["local", "ray"])
def test_failing_runs_are_isolated_and_rerun_with_only_failed(tmp_path, executor, request):
    suite = tmp_path / "flaky.yaml"
    suite.write_text(
        "name: flaky\nseeds: 1\nbudget: {steps: 300, eval_every: 300, eval_episodes: 1}\n"
        "envs: [CartPole-v1, {id: CartPole-v1, kwargs: {no_such_kwarg: 1}}]\nalgorithms: [random]\n"
    )
    db = tmp_path / "db.duckdb"
    flags = executor_args(executor, request)
    r = rl("run", suite, "--db", db, "--retries", "1", *flags, check=False)
    assert r.returncode == 1
    assert "FAILED" in r.stdout and "no_such_kwarg" in r.stdout
    status = json.loads(rl("status", "flaky", "--db", db, "--json").stdout)
    by_env = {x["env"]: x for x in status["runs"]}
    assert by_env["CartPole-v1"]["status"] == "finished"
    bad = by_env["CartPole-v1[no_such_kwarg=1]"]
    assert bad["status"] == "failed" and bad["attempts"] == 2 and "no_such_kwarg" in bad["error"]
    r = rl("run", suite, "--db", db, "--only-failed", "--json", *flags, check=False)
    out = json.loads(r.stdout)
    assert out["skipped"] == 1 and out["failed"] == 1
    status = json.loads(rl("status", "flaky", "--db", db, "--json").stdout)
    assert {x["env"]: x["attempts"] for x in status["runs"]} == {
        "CartPole-v1": 1,
        "CartPole-v1[no_such_kwarg=1]": 3,
    }


@pytest.mark.parametrize("executor", ["local", "ray"])
def test_ctrl_c_stops_workers_and_marks_runs_interrupted(tmp_path, executor, request):
    import signal

    suite = tmp_path / "long.yaml"
    suite.write_text(
        "name: long\nseeds: 3\nbudget: {steps: 2000000, eval_every: 100000, eval_episodes: 1}\n"
        "envs: [CartPole-v1]\nalgorithms: [ppo]\n"
    )
    db = tmp_path / "db.duckdb"
    proc = subprocess.Popen(
        [RLBENCH, "run", str(suite), "--db", str(db), "--workers", "2", *executor_args(executor, request)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, like a terminal's foreground job
    )
    started = 0
    deadline = time.monotonic() + 120
    while started < 2 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        started += line.strip().startswith("start ")
    assert started == 2, "runs did not start"
    deadline = time.monotonic() + 60  # let them train until their first evaluations reached the store
    while time.monotonic() < deadline:
        r = rl(
            "fetch", "--db", db, "--suite", "long", "--metric", "eval/return", "--format", "csv", check=False
        )
        if r.returncode == 0 and len(r.stdout.strip().splitlines()) >= 3:  # header + a row per running run
            break
        time.sleep(0.5)
    t0 = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: SIGINT to the whole foreground group
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 15
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    # what it leaves and how to go on; stopped runs are not counted as failed
    assert out.count("INTERRUPTED ppo CartPole-v1") == 2 and "failed 1" not in out, out
    assert "long: stopped after " in out, out
    assert ": 0 finished, 2 interrupted, 0 failed, 1 not started;" in out, out
    assert "run the same command again to go on" in out, out
    gone = False
    for _ in range(50):  # no orphan workers left in the group (an exited child may stay a zombie briefly)
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            gone = True
            break
        time.sleep(0.2)
    assert gone, subprocess.run(
        ["ps", "-o", "pid,stat,cmd", "-g", str(proc.pid)], capture_output=True, text=True
    ).stdout
    if executor == "ray":  # the actors live under the Ray head, not in the group: none may be left
        assert request.getfixturevalue("ray_head").wait_all_free(), "actors outlived the interrupted run"
    status = json.loads(rl("status", "long", "--db", db, "--json").stdout)
    states = sorted(r["status"] for r in status["runs"])
    assert states == ["interrupted", "interrupted", "pending"], states
    con = duckdb.connect(str(db), read_only=True)
    try:  # what the interrupted runs logged before the stop was kept
        n = con.execute("SELECT count(*) FROM metrics WHERE name = 'eval/return'").fetchall()[0][0]
        assert n >= 2
    finally:
        con.close()
