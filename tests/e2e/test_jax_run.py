"""ppo_jax through the real `rlbench run`: four seeds of gymnax/CartPole-v1 packed in one job
(``seeds_per_job: 4``) are four runs, each with its own rows, status and evaluations on the suite's grid; a
param ppo_jax does not take is refused before anything is recorded."""

import importlib.util
import json

import duckdb
import pytest
from e2e_cli import rl

if importlib.util.find_spec("gymnax") is None:  # found, not imported: the JAX work runs in other processes
    pytest.skip("needs the jax extra: pip install -e '.[jax]'", allow_module_level=True)
pytestmark = pytest.mark.slow

# the same program shape as tests/unit/test_ppo_jax.py (4 seeds, these params and budget): one compilation
PARAMS = "{num_envs: 4, num_steps: 32, num_minibatches: 2, update_epochs: 2}"


@pytest.fixture(autouse=True)
def _jax_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("RLBENCH_JAX_CACHE", str(tmp_path_factory.getbasetemp() / "jax-cache"))


def _suite(tmp_path, params=PARAMS):
    p = tmp_path / "jx.yaml"
    # timeout + --retries: XLA's CPU runtime can wedge a job for ever (tests/unit/jax_isolated.py); the suite's
    # timeout kills it and the retry runs the pack again, as a user's suite would
    p.write_text("name: jx\nseeds: 4\nbudget: {steps: 1024, eval_every: 512, eval_episodes: 3, timeout: 150}\n"
                 f"envs: [gymnax/CartPole-v1]\nalgorithms: [{{name: ppo_jax, params: {params}}}]\n"
                 "resources: {seeds_per_job: 4}\n")  # fmt: skip
    return p


def test_four_packed_seeds_are_four_runs_with_their_own_rows(tmp_path):
    db = tmp_path / "jx.duckdb"
    out = rl("run", _suite(tmp_path), "--db", db, "--workers", "1", "--retries", "1").stdout
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
