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

STEPS = 24576  # 48 ppo iterations of 512 steps, evaluated every 4096


def _suite(tmp_path: Path, every: int | None = 2048) -> Path:
    p = tmp_path / "ckpt.yaml"
    ck = f", checkpoint_every: {every}" if every is not None else ""
    p.write_text(
        f"name: ckpt\nseeds: [7]\nbudget: {{steps: {STEPS}, eval_every: 4096, eval_episodes: 2{ck}}}\n"
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


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> list[tuple]:
    """The curve of the suite run without interruption."""
    tmp = tmp_path_factory.mktemp("straight")
    rl("run", _suite(tmp), "--db", tmp / "db.duckdb", "--workers", "1")
    return _curve(tmp / "db.duckdb")


def test_kill_9_mid_training_resumes_and_ends_with_the_uninterrupted_curve(tmp_path, straight):
    suite = _suite(tmp_path)
    db = tmp_path / "killed" / "db.duckdb"
    step = _kill_after_checkpoint(suite, db)
    assert 0 < step < STEPS
    out = rl("run", suite, "--db", db, "--workers", "1").stdout
    assert "resumed at step" in out, out
    runs = json.loads(rl("status", "ckpt", "--db", db, "--json").stdout)["runs"]
    assert [(r["status"], r["attempts"]) for r in runs] == [("finished", 2)]
    attempt2 = next((db.parent / "runs" / "ckpt").glob("*/attempt-2"))
    resumed_from = json.loads((attempt2 / "result.json").read_text())["resumed_from_step"]
    assert resumed_from >= step and resumed_from % 2048 == 0  # the kill may land just after a newer one
    assert f"resumed from the checkpoint at step {resumed_from}" in (attempt2 / "output.log").read_text()

    resumed = _curve(db)
    assert resumed == straight  # bitwise: every eval/* and train/* row
    keys = [(s, n) for s, n, _ in resumed if not n.startswith("train/episode_")]
    assert len(keys) == len(set(keys))  # no duplicate (step, name)
    evals = sorted(s for s, n, _ in resumed if n == "eval/return")
    assert evals == list(range(0, STEPS + 1, 4096))


def _trained(runs: Path) -> bool:
    """Whether a flushed metric shard of the run's first attempt holds a training loss (an update is done)."""
    import pyarrow.parquet as pq

    for shard in runs.glob("*/attempt-1/metrics/*.parquet"):
        try:
            names = pq.read_table(shard, columns=["name"]).column("name").to_pylist()
        except Exception:  # noqa: BLE001 - a shard being written right now: look again
            continue
        if any(str(n).startswith("train/loss") for n in names):
            return True
    return False


def test_sigterm_checkpoints_where_it_stops_and_the_next_run_goes_on_from_there(tmp_path, straight):
    """SIGTERM (a scheduler cancelling or pre-empting `rlbench run`, or Ctrl-C) stops the run cleanly: it
    saves a checkpoint at the step it stopped and the next `rlbench run` goes on from that step."""
    suite = _suite(tmp_path, every=10**6)  # no periodic checkpoint within the budget: only the one on stop
    db = tmp_path / "db.duckdb"
    proc = subprocess.Popen(
        [RLBENCH, "run", str(suite), "--db", str(db), "--workers", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    runs = db.parent / "runs" / "ckpt"
    deadline = time.monotonic() + 180
    # training has started once a shard holds its first update's losses; a stop before that (the worker still
    # importing torch or building envs) has nothing to checkpoint, and the next run starts over
    while not _trained(runs) and time.monotonic() < deadline:
        assert proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)  # as training starts: the run must not reach its end before the stop
    proc.wait(timeout=60)
    (ck,) = runs.glob("*/checkpoint/step-*.pt")
    step = int(ck.stem.split("-")[1])
    out = rl("run", suite, "--db", db, "--workers", "1").stdout
    assert f"resumed at step {step}" in out, out
    assert _curve(db) == straight


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
    assert evals == list(range(0, STEPS + 1, 4096))
