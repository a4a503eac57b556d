"""`resources.seeds_per_job` through the real `rlbench run`: seeds of ppo share a job, every seed is still its
own run (same run ids as unpacked, own rows, status, score); algorithms that cannot be packed run alone."""

import json

import duckdb
import pytest
from e2e_cli import rl

pytestmark = pytest.mark.slow


def _suite(tmp_path, per_job):
    p = tmp_path / f"pk{per_job}.yaml"
    p.write_text("name: pk\nseeds: 3\nbudget: {steps: 1024, eval_every: 512, eval_episodes: 2}\n"
                 "envs: [CartPole-v1]\nalgorithms: [{name: ppo, params: {num_envs: 2, num_steps: 64}}, random]\n"
                 f"resources: {{seeds_per_job: {per_job}}}\n")  # fmt: skip
    return p


def _rows(db):
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("""SELECT r.run_id, r.algo, r.seed, m.name, m.step FROM metrics m JOIN runs r
                              USING (run_id) WHERE m.name NOT LIKE 'sys/%' ORDER BY ALL""").fetchall()


def test_packed_seeds_are_separate_runs_with_the_same_ids_and_rows(tmp_path):
    packed, alone = tmp_path / "p" / "packed.duckdb", tmp_path / "a" / "alone.duckdb"  # own runs/ folders
    dry = rl("run", _suite(tmp_path, 3), "--dry-run").stdout
    assert "seeds_per_job 3: 4 jobs; note: random cannot be packed" in dry
    out = rl("run", _suite(tmp_path, 3), "--db", packed, "--workers", "1").stdout
    assert out.count("start  ppo") == 3 and "6 finished, 0 failed" in out
    rl("run", _suite(tmp_path, 1), "--db", alone, "--workers", "1")
    runs = json.loads(rl("status", "pk", "--db", packed, "--json").stdout)["runs"]
    assert len(runs) == 6 and {r["status"] for r in runs} == {"finished"}
    ppo_jobs = {r["job_id"] for r in runs if r["algo"] == "ppo"}
    assert len(ppo_jobs) == 1  # the three ppo seeds trained in one worker's job
    assert _rows(packed) == _rows(alone)  # same runs, same metric names at the same steps
    again = rl("run", _suite(tmp_path, 3), "--db", packed, "--json").stdout.strip().splitlines()[-1]
    assert json.loads(again)["skipped"] == 6
