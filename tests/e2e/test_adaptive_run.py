"""`rlbench run --adaptive` and `rlbench compare` through the real command: batches of seeds until AdaStop
has decided, stored decisions, resume after kill -9 with the same decisions, and bad input."""

import json
import os
import signal
import subprocess
import time

import pytest
from e2e_cli import RLBENCH, rl

pytestmark = pytest.mark.slow

ADAPTIVE = ["--adaptive", "--batch", "2", "--max-batches", "3", "--permutations", "500"]


def _suite(tmp_path, steps=300, algos=("random", "{name: random, label: same}")):
    p = tmp_path / "ada.yaml"
    p.write_text(f"name: ada\nbudget: {{steps: {steps}, eval_every: {steps}, eval_episodes: 2}}\n"
                 f"envs: [CartPole-v1]\nalgorithms: [{', '.join(algos)}]\n")  # fmt: skip
    return p


def test_equal_algorithms_run_every_batch_and_are_declared_equal(tmp_path):
    db = tmp_path / "db.duckdb"
    out = json.loads(
        rl("run", _suite(tmp_path), "--db", db, *ADAPTIVE, "--json").stdout.strip().splitlines()[-1]
    )
    assert out["runs"] == 12 and out["fixed_budget_runs"] == 12 and out["batches_run"] == 3
    (d,) = out["decisions"]
    assert (d["algo_a"], d["decision"], d["algo_b"], d["look"], d["runs_a"]) == (
        "random",
        "equal",
        "same",
        3,
        6,
    )
    status = json.loads(rl("status", "ada", "--db", db, "--json").stdout)
    assert status["suites"]["ada"] == {"total": 12, "finished": 12, "all_finished": True}
    assert sorted({r["seed"] for r in status["runs"]}) == [0, 1, 2, 3, 4, 5]
    shown = rl("compare", "ada", "--db", db).stdout
    assert "| CartPole-v1 | random | = equal | same | 3 | 6 | 6 |" in shown
    board = rl("leaderboard", "ada", "--db", db, "--reps", "1000").stdout
    assert "AdaStop decisions" in board and "| CartPole-v1 | random | = equal | same |" in board
    again = rl("run", _suite(tmp_path), "--db", db, *ADAPTIVE, "--json").stdout.strip().splitlines()[-1]
    assert json.loads(again)["batches_run"] == 0  # everything decided: nothing more to run
    # on the stored runs with other settings, compare re-tests what is there (e.g. imported runs)
    other = json.loads(
        rl("compare", "ada", "--db", db, "--batch", "3", "--max-batches", "2", "--json").stdout
    )
    assert other["settings"]["batch"] == 3 and other["decisions"][0]["decision"] == "equal"
    # paired by seed: the same algorithm under two labels scores the same on every seed, so nothing to test
    paired = json.loads(rl("compare", "ada", "--db", db, "--paired", "random", "--json").stdout)
    (c,) = paired["comparisons"]
    assert (c["group"], c["other"], c["pairs"], c["tied"]) == ("CartPole-v1", "same", 6, 6)
    assert c["mean_diff"] == 0.0
    assert (c["sign_p"], c["wilcoxon_p"], c["holm_p"], paired["paired"]["tested"]) == (None, None, None, 0)


def test_a_killed_adaptive_run_resumes_to_the_same_decisions(tmp_path):
    suite = _suite(tmp_path, steps=10_000)  # long enough that the kill after 5 runs finds some running
    whole = tmp_path / "whole.duckdb"
    rl("run", suite, "--db", whole, *ADAPTIVE, "--workers", "2")
    expected = json.loads(rl("compare", "ada", "--db", whole, "--json").stdout)["decisions"]
    db = tmp_path / "db.duckdb"
    proc = subprocess.Popen([RLBENCH, "run", str(suite), "--db", str(db), *ADAPTIVE, "--workers", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)  # fmt: skip
    try:
        done, deadline = 0, time.monotonic() + 240
        while done < 5 and time.monotonic() < deadline:  # the first look (4 runs) and into the second
            line = proc.stdout.readline()
            if not line:
                break
            done += line.strip().startswith("done")
        assert done >= 5, "the run ended before it could be killed mid-way"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    runs_whole = json.loads(rl("status", "ada", "--db", whole, "--json").stdout)["suites"]["ada"]["finished"]
    killed = json.loads(rl("status", "ada", "--db", db, "--json").stdout)["suites"]["ada"]
    assert 5 <= killed["finished"] < runs_whole, (killed, runs_whole)  # killed mid-way, not after the end
    changed = rl("run", suite, "--db", db, "--adaptive", "--batch", "3", "--max-batches", "3", check=False)
    assert (
        changed.returncode == 2 and "was run adaptively with other settings (batch 2 -> 3" in changed.stderr
    )
    rl("run", suite, "--db", db, *ADAPTIVE, "--workers", "2")
    assert json.loads(rl("compare", "ada", "--db", db, "--json").stdout)["decisions"] == expected


@pytest.mark.parametrize(
    "args, message",
    [
        (["--adaptive", "--alpha", "1.5"], "--alpha must be between 0 and 1"),
        (["--adaptive", "--batch", "1"], "--batch must be at least 2"),
    ],
)
def test_bad_adaptive_settings_are_one_line_and_change_nothing(tmp_path, args, message):
    db = tmp_path / "db.duckdb"
    r = rl("run", _suite(tmp_path), "--db", db, *args, check=False)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr
    assert not db.exists()


def test_adaptive_with_one_algorithm_is_refused(tmp_path):
    db = tmp_path / "db.duckdb"
    r = rl("run", _suite(tmp_path, algos=("random",)), "--db", db, "--adaptive", check=False)
    assert r.returncode == 2 and "--adaptive compares algorithms and the suite has 1" in r.stderr
    assert not db.exists()
