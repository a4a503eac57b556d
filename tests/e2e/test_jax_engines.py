"""ppo_jax packs on Ray and Slurm, through the real `rlbench run`: the seeds of one cell share one Ray actor
call / one Slurm array task, compiled and vmapped together, and each seed is still its own run (own run id,
folder, rows, status, kept policies) with the per-seed results of the same pack run locally.

Every subprocess has a timeout and the suite a budget timeout with --retries 1: XLA's CPU runtime can wedge
a job (tests/unit/jax_isolated.py)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import duckdb
import pytest
from e2e_cli import once_per_session, rl
from test_engine_packing import _rows

if importlib.util.find_spec("gymnax") is None:  # found, not imported: the JAX work runs in other processes
    pytest.skip("needs the jax extra: pip install -e '.[jax]'", allow_module_level=True)
pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _jax_cache(jax_cache):
    """The session's one JAX compilation cache (tests/conftest.py)."""


def _suite(folder: Path) -> Path:
    """Three seeds, two per job: one pack of two seeds and one seed alone."""
    p = folder / "pj.yaml"
    p.write_text("name: pj\nseeds: 3\nbudget: {steps: 1024, eval_every: 512, eval_episodes: 3, timeout: 300}\n"
                 "envs: [gymnax/CartPole-v1]\nalgorithms: [{name: ppo_jax, params: {num_envs: 4, num_steps: 32, "
                 "num_minibatches: 2, update_epochs: 2}}]\nresources: {seeds_per_job: 2}\n")  # fmt: skip
    return p


def _run(folder: Path, *args: str) -> Path:
    db = folder / "db.duckdb"
    out = rl("run", _suite(folder), "--db", db, "--retries", "1", *args, timeout=900).stdout
    assert "3 finished, 0 failed" in out, out
    return db


@pytest.fixture(scope="module")
def local(session_tmp) -> dict[tuple, float]:
    """The local pack, once for the Ray and the Slurm tests (each on their engine's worker)."""
    return once_per_session(session_tmp, "jax-engines-local", lambda tmp: _rows(_run(tmp, "--workers", "1")))


def _check(db: Path, local: dict[tuple, float], executor: str) -> None:
    with duckdb.connect(str(db), read_only=True) as con:
        runs = con.execute("SELECT run_id, seed, status, executor, job_id FROM runs ORDER BY seed").fetchall()
        kept = con.execute("""SELECT r.seed, count(DISTINCT a.kind) FROM artifacts a JOIN runs r USING (run_id)
                              WHERE a.kind LIKE 'policy_%' GROUP BY r.seed ORDER BY r.seed""").fetchall()
    assert [(seed, status, ex) for _, seed, status, ex, _ in runs] == [
        (s, "finished", executor) for s in range(3)
    ]
    assert kept == [(0, 2), (1, 2), (2, 2)]  # each seed's best and final policy
    jobs = [job for *_, job in runs]
    assert jobs[0] == jobs[1] and (executor == "ray" or jobs[1] != jobs[2])  # ray: a job id names the actor
    results = {}
    for run_id, *_ in runs:  # each seed its own folder, result and shards (a retried attempt is the last one)
        folder = sorted((db.parent / "runs" / "pj" / run_id).glob("attempt-*"))[-1]
        results[run_id] = json.loads((folder / "result.json").read_text())
        assert results[run_id]["status"] == "finished" and list((folder / "metrics").glob("*.parquet"))
    assert results[runs[0][0]]["pack"] == [runs[0][0], runs[1][0]] and "pack" not in results[runs[2][0]]
    got = _rows(db)
    assert got.keys() == local.keys()  # same run ids, names and steps: nothing missing, nothing twice
    evals = [k for k in local if k[2].startswith("eval/")]
    assert len(evals) == 3 * 3 * 4 and [got[k] for k in evals] == [
        local[k] for k in evals
    ]  # the same pack: bitwise
    for k, v in local.items():
        assert got[k] == pytest.approx(v, rel=1e-5, abs=1e-6), k


def test_a_ppo_jax_pack_on_ray_gives_every_seed_its_own_run(tmp_path, ray_head, local):
    _check(_run(tmp_path, "--executor", "ray", "--address", ray_head.address), local, "ray")


def test_a_ppo_jax_pack_on_slurm_gives_every_seed_its_own_run(tmp_path, slurm, local):
    _check(_run(tmp_path, "--executor", "slurm"), local, "slurm")
