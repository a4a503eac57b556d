"""ppo_jax through the real `rlbench run`: four seeds of gymnax/CartPole-v1 packed in one job
(``seeds_per_job: 4``) are four runs, each with its own rows, status, evaluations on the suite's grid and kept
best and final policies, which ``rlbench enjoy`` plays (in gymnax, with the run's own evaluation returns; in
gymnasium for a video); with ``video_every`` each seed of a pack records its own episode videos, drawn in
gymnasium's CartPole; a param ppo_jax does not take is refused before anything is recorded; a compiled chunk
that stalls ends its job through the watchdog, naming the wedge, and the retry finishes it."""

import importlib.util
import json
import re
import subprocess

import duckdb
import numpy as np
import pytest
from e2e_cli import rl

if importlib.util.find_spec("gymnax") is None:  # found, not imported: the JAX work runs in other processes
    pytest.skip("needs the jax extra: pip install -e '.[jax]'", allow_module_level=True)
pytestmark = pytest.mark.slow

# the same program shape as tests/unit/test_ppo_jax.py (4 seeds, these params and budget): one compilation
PARAMS = "{num_envs: 4, num_steps: 32, num_minibatches: 2, update_epochs: 2}"


@pytest.fixture(autouse=True)
def _jax_cache(jax_cache):
    """The session's one JAX compilation cache (tests/conftest.py)."""


def _suite(tmp_path, params=PARAMS):
    p = tmp_path / "jx.yaml"
    # timeout + --retries: XLA's CPU runtime can wedge a job for ever (tests/unit/jax_isolated.py); the suite's
    # timeout kills it and the retry runs the pack again, as a user's suite would
    p.write_text("name: jx\nseeds: 4\nbudget: {steps: 1024, eval_every: 512, eval_episodes: 3, timeout: 150}\n"
                 f"envs: [gymnax/CartPole-v1]\nalgorithms: [{{name: ppo_jax, params: {params}}}]\n"
                 "resources: {seeds_per_job: 4}\n")  # fmt: skip
    return p


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    """The four-seed pack run once: (its folder, its database, what `rlbench run` printed)."""
    tmp = tmp_path_factory.mktemp("jx")
    db = tmp / "jx.duckdb"
    out = rl("run", _suite(tmp), "--db", db, "--workers", "1", "--retries", "1").stdout
    return tmp, db, out


def test_four_packed_seeds_are_four_runs_with_their_own_rows(packed):
    tmp_path, db, out = packed
    assert out.count("start  ppo_jax") in (4, 8) and "4 finished, 0 failed" in out  # 8: a wedged pack retried
    runs = json.loads(rl("status", "jx", "--db", db, "--json").stdout)["runs"]
    assert sorted(r["seed"] for r in runs) == [0, 1, 2, 3] and {r["status"] for r in runs} == {"finished"}
    assert len({r["run_id"] for r in runs}) == 4 and len({r["job_id"] for r in runs}) == 1  # one job
    with duckdb.connect(str(db), read_only=True) as con:
        evals = con.execute("""SELECT r.seed, list(m.step ORDER BY m.step) FROM metrics m JOIN runs r USING (run_id)
                               WHERE m.name = 'eval/return' GROUP BY r.seed ORDER BY r.seed""").fetchall()
        per_seed = con.execute("""SELECT r.seed, count(*), count(DISTINCT m.name), max(m.value)
                                  FROM metrics m JOIN runs r USING (run_id) WHERE m.name = 'train/loss/value'
                                  GROUP BY r.seed ORDER BY r.seed""").fetchall()
        pack = con.execute("SELECT DISTINCT value FROM metrics WHERE name = 'sys/pack_size'").fetchall()
    assert evals == [(s, [0, 512, 1024]) for s in range(4)]
    assert [n for _, n, _, _ in per_seed] == [8] * 4  # 1024 steps / 128 per iteration, a row each
    assert len({v for _, _, _, v in per_seed}) == 4  # each seed its own numbers
    assert pack == [(4.0,)]
    again = rl("run", _suite(tmp_path), "--db", db, "--json").stdout.strip().splitlines()[-1]
    assert json.loads(again)["skipped"] == 4


def test_a_param_it_does_not_take_is_refused_before_anything_is_recorded(tmp_path):
    db = tmp_path / "bad.duckdb"
    r = rl("run", _suite(tmp_path, "{clip_coeff: 0.1}"), "--db", db, check=False)
    assert r.returncode == 2 and "unknown ppo_jax param(s) 'clip_coeff'" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not db.exists()


def test_the_suites_timeout_ends_a_compiled_pack(tmp_path):
    """A pack still compiling or training when the suite's timeout strikes is killed; each seed is failed
    with the cause, and the command returns (JAX's CPU threads once hung in block_until_ready)."""
    p = tmp_path / "slow.yaml"
    p.write_text("name: slow\nseeds: 2\nbudget: {steps: 5000000, eval_every: 2500000, timeout: 3}\n"
                 "envs: [gymnax/CartPole-v1]\nalgorithms: [ppo_jax]\nresources: {seeds_per_job: 2}\n")  # fmt: skip
    db = tmp_path / "slow.duckdb"
    r = rl("run", p, "--db", db, check=False, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr
    runs = json.loads(rl("status", "slow", "--db", db, "--json").stdout)["runs"]
    assert [x["status"] for x in runs] == ["failed", "failed"]
    assert all(x["error"].startswith("timeout: killed after 3s") for x in runs), runs


def _enjoy(*args):
    """`rlbench enjoy ARGS`, once more if XLA's CPU runtime wedged the first (JAX plays the episodes)."""
    try:
        return rl("enjoy", *args, timeout=150)
    except subprocess.TimeoutExpired:
        return rl("enjoy", *args, timeout=150)


def test_every_seed_keeps_its_policies_and_enjoy_replays_its_last_evaluation(packed):
    _, db, _ = packed
    with duckdb.connect(str(db), read_only=True) as con:
        kinds = con.execute("""SELECT r.seed, list(DISTINCT a.kind ORDER BY a.kind) FROM artifacts a
                               JOIN runs r USING (run_id) GROUP BY r.seed ORDER BY r.seed""").fetchall()
        run_id, last = con.execute("""SELECT r.run_id, m.value FROM metrics m JOIN runs r USING (run_id)
                                      WHERE r.seed = 2 AND m.name = 'eval/return' AND m.step = 1024""").fetchone()
    assert kinds == [(s, ["policy_best", "policy_final"]) for s in range(4)]
    out = _enjoy(run_id, "--which", "final", "--episodes", "3", "--db", db).stdout
    returns = [float(x) for x in re.findall(r"episode seed=\d+  return (\S+)", out)]
    assert len(returns) == 3  # the run's 3 evaluation episodes, played again from the saved policy
    assert sum(returns) / 3 == pytest.approx(last, rel=1e-5), out
    best = _enjoy(run_id, "--episodes", "2", "--db", db).stdout
    assert len(re.findall(r"episode seed=", best)) == 2 and "best policy" in best


def test_enjoy_draws_a_gymnax_policy_in_gymnasium(packed):
    tmp_path, db, _ = packed
    with duckdb.connect(str(db), read_only=True) as con:
        (run_id,) = con.execute("SELECT run_id FROM runs WHERE seed = 0").fetchone()
    video = tmp_path / "cartpole.mp4"
    out = rl("enjoy", run_id, "--which", "final", "--video", video, "--db", db, timeout=150).stdout
    assert "played in gymnasium's CartPole-v1" in out and video.stat().st_size > 0


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    """Two seeds packed in one job with ``video_every: 1``: (its folder, its database)."""
    tmp = tmp_path_factory.mktemp("jxv")
    suite = _suite(tmp)
    suite.write_text(suite.read_text().replace("name: jx", "name: jxv").replace("seeds: 4", "seeds: 2")
                     .replace("seeds_per_job: 4", "seeds_per_job: 2").replace("timeout: 150", "timeout: 150, "
                                                                               "video_every: 1"))  # fmt: skip
    db = tmp / "jxv.duckdb"
    assert "2 finished, 0 failed" in rl("run", suite, "--db", db, "--workers", "1", "--retries", "1").stdout
    return tmp, db


def test_every_seed_of_a_pack_records_its_own_episode_videos(videos):
    """Each seed's policy at each evaluation plays the seed's first evaluation episode in gymnasium's CartPole
    (gymnax draws no frames): its own MP4s, listed in the store and carried by `rlbench fetch` into a bundle;
    the last one is what `rlbench enjoy --video` draws of the final policy."""
    import hashlib

    import imageio.v3 as iio
    import pyarrow.parquet as pq

    tmp, db = videos
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("""SELECT r.seed, r.run_id, a.step, a.path, a.bytes, a.sha256 FROM artifacts a
                              JOIN runs r USING (run_id) WHERE a.kind = 'video' ORDER BY ALL""").fetchall()
    assert [(seed, step) for seed, _, step, *_ in rows] == [(s, p) for s in (0, 1) for p in (0, 512, 1024)]
    assert len({run_id for _, run_id, *_ in rows}) == 2
    for _, run_id, _, path, size, digest in rows:
        f = tmp / "runs" / "jxv" / run_id / path
        assert f.stat().st_size == size and hashlib.sha256(f.read_bytes()).hexdigest() == digest
        frames = iio.imread(f)
        assert frames.ndim == 4 and frames.shape[1:] == (400, 600, 3) and len(frames) > 1
    seed, run_id, _, path, *_ = rows[-1]  # seed 1 at its last evaluation: the final policy
    enjoyed = tmp / "enjoyed.mp4"
    out = rl("enjoy", run_id, "--which", "final", "--episodes", "1", "--video", enjoyed, "--db", db).stdout
    assert "played in gymnasium's CartPole-v1" in out
    assert np.array_equal(iio.imread(enjoyed), iio.imread(tmp / "runs" / "jxv" / run_id / path))
    rl("fetch", "--suite", "jxv", "--format", "bundle", "--with-videos", "-o", tmp / "bundle", "--db", db)
    carried = [
        r for r in pq.read_table(tmp / "bundle" / "artifacts.parquet").to_pylist() if r["kind"] == "video"
    ]
    assert sorted((r["run_id"], r["step"]) for r in carried) == sorted((rid, st) for _, rid, st, *_ in rows)
    assert all((tmp / "bundle" / r["file"]).is_file() for r in carried)


def test_a_wedged_pack_ends_by_its_watchdog_and_the_retry_finishes_it(tmp_path):
    """The second chunk of the first attempt stalls (the test hook: a real sleep, once): the watchdog ends
    the job naming the wedge well before the suite's timeout, the worker is replaced, and --retries runs the
    pack again to the end."""
    import os

    db = tmp_path / "jx.duckdb"
    env = {**os.environ, "RLBENCH_JAX_WATCHDOG": "1", "RLBENCH_JAX_TEST_STALL": f"2:3600:{tmp_path / 'stalled-once'}",
           "RLBENCH_JAX_WATCHDOG_FLOOR_S": "5", "RLBENCH_JAX_WATCHDOG_TIMES": "3"}  # fmt: skip
    suite = _suite(tmp_path)
    suite.write_text(suite.read_text().replace("timeout: 150", "timeout: 600"))
    out = rl("run", suite, "--db", db, "--workers", "1", "--retries", "1", env=env, timeout=900).stdout
    assert "4 finished, 0 failed" in out, out
    runs = json.loads(rl("status", "jx", "--db", db, "--json").stdout)["runs"]
    assert {r["attempts"] for r in runs} == {2}
    for r in runs:
        first = json.loads((tmp_path / "runs" / "jx" / r["run_id"] / "attempt-1" / "result.json").read_text())
        assert first["status"] == "failed" and first["error"].startswith("XlaWedged: XLA's runtime wedged"), (
            first
        )
