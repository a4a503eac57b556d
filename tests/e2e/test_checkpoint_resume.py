"""Checkpoints, as a user meets them: `rlbench run` killed with -9 mid-training resumes from the run's last
checkpoint on the next `rlbench run`, and the stored curve equals that of a run never interrupted."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import duckdb
import pytest
from e2e_cli import RLBENCH, rl

pytestmark = pytest.mark.slow


def _suite(tmp_path: Path, every: int | None = 2048) -> Path:
    p = tmp_path / "ckpt.yaml"
    ck = f", checkpoint_every: {every}" if every is not None else ""
    p.write_text(
        f"name: ckpt\nseeds: [7]\nbudget: {{steps: 40960, eval_every: 4096, eval_episodes: 2{ck}}}\n"
        "envs: [CartPole-v1]\nalgorithms: [ppo]\n"
    )
    return p


def _curve(db: Path) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(
            "SELECT step, name, value FROM metrics WHERE name NOT LIKE 'sys/%' ORDER BY name, step, value"
        ).fetchall()
    finally:
        con.close()


def _kill_after_checkpoint(suite: Path, db: Path, timeout: float = 180) -> int:
    """Start `rlbench run`, SIGKILL its whole process group once a checkpoint is on disk; the step of it."""
    proc = subprocess.Popen(
        [RLBENCH, "run", str(suite), "--db", str(db), "--workers", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    runs = db.parent / "runs" / "ckpt"
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            found = list(runs.glob("*/checkpoint/step-*.pt"))
            if found:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
                return int(found[0].stem.split("-")[1])
            assert proc.poll() is None, "the run ended before it saved a checkpoint"
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    raise AssertionError("no checkpoint before the deadline")


def test_kill_9_mid_training_resumes_and_ends_with_the_uninterrupted_curve(tmp_path):
    suite = _suite(tmp_path)
    straight_db = tmp_path / "straight" / "db.duckdb"
    rl("run", suite, "--db", straight_db, "--workers", "1")

    db = tmp_path / "killed" / "db.duckdb"
    step = _kill_after_checkpoint(suite, db)
    assert 0 < step < 40960
    out = rl("run", suite, "--db", db, "--workers", "1").stdout
    assert "resumed at step" in out, out
    runs = json.loads(rl("status", "ckpt", "--db", db, "--json").stdout)["runs"]
    assert [(r["status"], r["attempts"]) for r in runs] == [("finished", 2)]
    attempt2 = next((db.parent / "runs" / "ckpt").glob("*/attempt-2"))
    resumed_from = json.loads((attempt2 / "result.json").read_text())["resumed_from_step"]
    assert resumed_from >= step and resumed_from % 2048 == 0  # the kill may land just after a newer one
    assert f"resumed from the checkpoint at step {resumed_from}" in (attempt2 / "output.log").read_text()

    resumed, straight = _curve(db), _curve(straight_db)
    assert resumed == straight  # bitwise: every eval/* and train/* row
    keys = [(s, n) for s, n, _ in resumed if not n.startswith("train/episode_")]
    assert len(keys) == len(set(keys))  # no duplicate (step, name)
    evals = sorted(s for s, n, _ in resumed if n == "eval/return")
    assert evals == list(range(0, 40961, 4096))


def test_without_checkpoint_every_a_killed_run_starts_over(tmp_path):
    suite = _suite(tmp_path, every=None)
    db = tmp_path / "db.duckdb"
    proc = subprocess.Popen(
        [RLBENCH, "run", str(suite), "--db", str(db), "--workers", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    shards = db.parent / "runs" / "ckpt"
    deadline = time.monotonic() + 120
    while not list(shards.glob("*/attempt-1/metrics/*.parquet")) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    out = rl("run", suite, "--db", db, "--workers", "1").stdout
    assert "resumed" not in out
    attempt2 = next(shards.glob("*/attempt-2"))
    assert json.loads((attempt2 / "result.json").read_text())["resumed_from_step"] is None
    assert not list(shards.glob("*/checkpoint"))
    evals = sorted(s for s, n, _ in _curve(db) if n == "eval/return")
    assert evals == list(range(0, 40961, 4096))
