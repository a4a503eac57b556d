"""Checkpoints on the cluster executors, as a user meets them: a tiny checkpointing ppo run stopped mid-training
on a real Ray head (Ctrl-C of `rlbench run`, its actor's process killed) or a real Slurm (scancel, requeue)
goes on from its last checkpoint, and the stored curve equals, bitwise, that of a local run never stopped.

Every subprocess has a timeout and every wait a deadline: nothing here can hang CI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import duckdb
import pytest
from e2e_cli import RLBENCH, once_per_session, rl

pytestmark = pytest.mark.slow

STEPS, EVAL_EVERY, CKPT_EVERY = 24576, 6144, 512
# 8 epochs an update, 24k steps: about 8 s of training on a quiet CPU (8k steps took 2.4 s on CI, where a Ray
# run ended between its first checkpoint reaching the coordinator and the Ctrl-C), so a stop lands mid-training
PPO = "{name: ppo, params: {num_envs: 2, num_steps: 64, update_epochs: 8, num_minibatches: 2}}"


def _suite(folder: Path, name: str = "ck", every: int = CKPT_EVERY) -> Path:
    """One torch thread wherever it runs: a local worker on two cores would use two, and a float reduction
    split over two threads differs in its last bits, which over 24k steps changes an action and the curve."""
    p = folder / f"{name}.yaml"
    p.write_text(
        f"name: {name}\nseeds: [3]\n"
        f"budget: {{steps: {STEPS}, eval_every: {EVAL_EVERY}, eval_episodes: 1, checkpoint_every: {every}}}\n"
        f"envs: [CartPole-v1]\nalgorithms: [{PPO}]\nresources: {{threads_per_job: 1}}\n"
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


def _runs(db: Path) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT run_id, status, attempts FROM runs ORDER BY run_id").fetchall()
    finally:
        con.close()


def _wait(what: str, cond, timeout: float = 120, proc: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"rlbench run ended before {what}: {proc.communicate()[0]}")
        time.sleep(0.05)
    raise AssertionError(f"no {what} within {timeout:g}s")


def _same_curve(got: list[tuple], want: list[tuple]) -> None:
    """``got`` has every (step, name) of ``want``; what the run scores (eval/*, train/episode_*) is bitwise
    equal. The training diagnostics (losses, approx_kl, explained variance: float32 reductions) may differ
    in their last bits between a local worker and a Ray actor even uninterrupted (the same seed gives the
    same returns), so they are compared to 1e-4 (1e-6 absolute: approx_kl is about 1e-6 here)."""
    assert [(s, n) for s, n, _ in got] == [(s, n) for s, n, _ in want]
    scored = [r for r in want if r[1].startswith(("eval/", "train/episode_"))]
    assert len(scored) > 10 and [r for r in got if r[1].startswith(("eval/", "train/episode_"))] == scored
    for (_, name, a), (_, _, b) in zip(got, want):
        assert a == pytest.approx(b, rel=1e-4, abs=1e-6), name


def _one_curve(curve: list[tuple]) -> None:
    """No step logged twice, none missing: the evaluations are exactly the grid."""
    keys = [(s, n) for s, n, _ in curve if not n.startswith("train/episode_")]
    assert len(keys) == len(set(keys))
    assert sorted(s for s, n, _ in curve if n == "eval/return") == list(range(0, STEPS + 1, EVAL_EVERY))


def _start(args: list, cwd: Path, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([RLBENCH, *map(str, args)], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            env={**os.environ, **(env or {})})  # fmt: skip


def _end(proc: subprocess.Popen, timeout: float = 90) -> str:
    try:
        return proc.communicate(timeout=timeout)[0]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def _straight(tmp: Path) -> list[tuple]:
    rl("run", _suite(tmp), "--db", tmp / "db.duckdb", "--workers", "1", timeout=300)
    curve = _curve(tmp / "db.duckdb")
    _one_curve(curve)
    return curve


@pytest.fixture(scope="module")
def straight(session_tmp) -> list[tuple]:
    """The curve of the suite run locally without interruption: once for the Ray and the Slurm tests."""
    return once_per_session(session_tmp, "resume-straight", _straight)


# -- Ray ---------------------------------------------------------------------------------------------------
def test_ray_ctrl_c_mid_training_resumes_from_the_checkpoint_on_the_next_run(tmp_path, ray_head, straight):  # noqa: F811
    """Ctrl-C of `rlbench run --executor ray`: the actor saves a checkpoint where it stops, the checkpoint
    travels to the coordinator's run folder (the actor's node keeps nothing), and the next run, on whatever
    actor, goes on from it."""
    suite, db = _suite(tmp_path), tmp_path / "db.duckdb"
    ray = ["--executor", "ray", "--address", ray_head.address]
    proc = _start(["run", suite, "--db", db, *ray], tmp_path)
    runs = tmp_path / "runs" / "ck"
    _wait("a first checkpoint on the coordinator's side", lambda: list(runs.glob("*/checkpoint/step-*.pt")),
          120, proc)  # fmt: skip
    proc.send_signal(signal.SIGINT)  # mid-training: it stops where it is and saves a checkpoint there
    out = _end(proc)
    assert proc.returncode == 130, out
    found = list(runs.glob("*/checkpoint/step-*.pt"))  # on the coordinator's side
    assert len(found) == 1, (out, sorted(str(p.relative_to(runs)) for p in runs.rglob("*")))
    ck = found[0]
    step = int(ck.stem.split("-")[1])
    assert CKPT_EVERY <= step < STEPS and _runs(db)[0][1:] == ("interrupted", 1)

    out = rl("run", suite, "--db", db, *ray, timeout=300).stdout
    assert f"resumed at step {step}" in out, out
    assert [r[1:] for r in _runs(db)] == [("finished", 2)]
    (attempt2,) = runs.glob("*/attempt-2")
    assert json.loads((attempt2 / "result.json").read_text())["resumed_from_step"] == step
    assert not list(runs.glob("*/checkpoint/*.pt"))  # a finished run's checkpoint has served
    curve = _curve(db)
    _one_curve(curve)
    _same_curve(curve, straight)


def test_ray_actor_killed_mid_training_resumes_from_the_last_checkpoint_it_sent(tmp_path, ray_head, straight):  # noqa: F811
    """The actor's process SIGKILLed after its first checkpoint reached the coordinator: the attempt fails
    with the cause and the retry (--retries 1) resumes from the latest checkpoint the coordinator holds."""
    suite, db = _suite(tmp_path, "ckk"), tmp_path / "db.duckdb"
    proc = _start(["run", suite, "--db", db, "--executor", "ray", "--address", ray_head.address, "--retries", "1"],
                  tmp_path)  # fmt: skip
    runs = tmp_path / "runs" / "ckk"
    (ck,) = _wait("a checkpoint on the coordinator's side", lambda: list(runs.glob("*/checkpoint/step-*.pt")),
                  120, proc)  # fmt: skip
    run_id = ck.parent.parent.name
    # the actor runs in <tmp>/rlbench-ray/<its pid>/<suite>/<run id>/ on its node (this machine)
    (where,) = _wait("the actor's folder", lambda: list(Path("/tmp/rlbench-ray").glob(f"*/ckk/{run_id}")), 30)
    os.kill(int(where.parent.parent.name), signal.SIGKILL)
    out = _end(proc, 600)  # a fresh actor and the retry: 325 s on a loaded 2-core machine
    assert proc.returncode == 0, out
    assert "worker died" in out and "resumed at step" in out, out
    assert [r[1:] for r in _runs(db)] == [("finished", 2)]
    (attempt2,) = runs.glob("*/attempt-2")
    assert json.loads((attempt2 / "result.json").read_text())["resumed_from_step"] >= CKPT_EVERY
    curve = _curve(db)
    _one_curve(curve)
    _same_curve(curve, straight)


# -- Slurm -------------------------------------------------------------------------------------------------
def _job_id(runs: Path, attempt: int = 1) -> str:
    (placed,) = runs.glob(f"*/attempt-{attempt}/placement.json")
    return json.loads(placed.read_text())["job_id"]


def test_slurm_scancel_mid_training_resumes_from_the_checkpoint_on_the_next_run(tmp_path, slurm, straight):  # noqa: F811
    """`scancel` of the array task (a user, or the cluster's admin) mid-training: the task saves a checkpoint
    where it stops; the next `rlbench run --executor slurm` goes on from it."""
    suite, db = _suite(tmp_path, "cks"), tmp_path / "db.duckdb"
    proc = _start(["run", suite, "--db", db, "--executor", "slurm"], tmp_path)
    runs = tmp_path / "runs" / "cks"
    _wait("a first checkpoint", lambda: list(runs.glob("*/checkpoint/step-*.pt")), 120, proc)
    r = slurm.cmd("scancel", _job_id(runs))
    assert r.returncode == 0, r.stderr
    out = _end(proc, 120)
    assert proc.returncode == 1 and "cancelled in Slurm" in out, out
    (ck,) = runs.glob("*/checkpoint/step-*.pt")
    step = int(ck.stem.split("-")[1])
    assert CKPT_EVERY <= step < STEPS

    out = rl("run", suite, "--db", db, "--executor", "slurm", timeout=300).stdout
    assert f"resumed at step {step}" in out, out
    assert [r[1:] for r in _runs(db)] == [("finished", 2)]
    (attempt2,) = runs.glob("*/attempt-2")
    assert json.loads((attempt2 / "result.json").read_text())["resumed_from_step"] == step
    curve = _curve(db)
    _one_curve(curve)
    _same_curve(curve, straight)


@pytest.mark.parametrize("how", ["requeue", "time-limit"])
def test_slurm_requeued_task_resumes_from_its_checkpoint_instead_of_starting_over(
    tmp_path, slurm, straight, how
):  # noqa: F811
    """A task requeued mid-training (pre-empted, node failure, `scontrol requeue`; or warned of its time limit
    by SIGUSR2, when submitit requeues it) comes back as the next attempt and goes on from the run's last
    checkpoint; the attached `rlbench run` ends with it finished. On the time-limit warning the task stopped
    where it was and saved a checkpoint there (submitit's own handler exited mid-training: a failed run)."""
    suite, db = _suite(tmp_path, "ckq"), tmp_path / "db.duckdb"
    proc = _start(["run", suite, "--db", db, "--executor", "slurm"], tmp_path)
    runs = tmp_path / "runs" / "ckq"
    _wait("a first checkpoint", lambda: list(runs.glob("*/checkpoint/step-*.pt")), 120, proc)
    (slurm.requeue if how == "requeue" else slurm.warn_time_limit)(_job_id(runs))
    out = _end(proc, 300)
    assert proc.returncode == 0 and "requeued" in out and "FAILED" not in out, out
    if how == "time-limit":
        (attempt1,) = runs.glob("*/attempt-1")
        assert json.loads((attempt1 / "result.json").read_text())["status"] == "interrupted"
        assert "time-limit warning" in (attempt1 / "output.log").read_text()
    assert [r[1:] for r in _runs(db)] == [("finished", 2)]
    assert _job_id(runs, 2) == _job_id(runs, 1)  # the same Slurm task, run again
    (attempt2,) = runs.glob("*/attempt-2")
    assert json.loads((attempt2 / "result.json").read_text())["resumed_from_step"] >= CKPT_EVERY
    assert "resumed from the checkpoint at step" in (attempt2 / "output.log").read_text()
    curve = _curve(db)
    _one_curve(curve)
    _same_curve(curve, straight)
