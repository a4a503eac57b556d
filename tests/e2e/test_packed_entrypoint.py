"""User code that trains several seeds at once (``@rlbench_cli.seeds_per_job``), through the real `rlbench run`.

The worked example examples/packed_entrypoint.py (a stacked REINFORCE policy, N seeds per call) runs with
``resources.seeds_per_job: 2``: `run --dry-run` names the entries whose seeds share jobs, both seeds train in
ONE job and are recorded as two runs with their own rows; a seed whose rewards turn NaN fails alone, with the
reason, and the seed packed with it trains exactly as it does without a failing neighbour.
"""

import json
import os
import subprocess
import textwrap
from pathlib import Path

import duckdb
import pytest
from e2e_cli import RLBENCH

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]  # the example is imported as examples.packed_entrypoint from here

POISONED = textwrap.dedent(
    """
    import gymnasium as gym

    import rlbench_cli
    from examples.packed_entrypoint import train as example


    class NanRewardAfter(gym.Wrapper):
        def __init__(self, env, after):
            super().__init__(env)
            self.after, self.n = after, 0

        def step(self, action):
            obs, reward, term, trunc, info = self.env.step(action)
            self.n += 1
            return obs, float("nan") if self.n > self.after else reward, term, trunc, info


    @rlbench_cli.seeds_per_job
    def train(ctxs):
        for ctx in ctxs:
            if ctx.seed == 1:  # seed 1's training env gives NaN rewards after 300 steps
                make = ctx.make_env
                ctx.make_env = lambda seed=None, make=make: NanRewardAfter(make(seed), 300)
        return example(ctxs)
    """
)


def rl(tmp_path: Path, *args: str | Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.run([RLBENCH, *map(str, args)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)  # fmt: skip


def test_dry_run_of_the_example_names_the_entries_that_pack(tmp_path):
    r = rl(tmp_path, "run", "examples/packed-entrypoint.yaml", "--dry-run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "seeds_per_job 2: 6 jobs; note: random cannot be packed" in r.stdout  # 4 seeds / 2 + 4 alone
    assert "seeds share jobs: reinforce-packed" in r.stdout


def test_each_seed_of_a_packed_entrypoint_is_its_own_run_and_fails_alone(tmp_path):
    (tmp_path / "poisoned.py").write_text(POISONED)
    suite = tmp_path / "pe.yaml"
    suite.write_text(
        "name: pe\nseeds: 2\nbudget: {steps: 1024, eval_every: 512, eval_episodes: 2}\nenvs: [CartPole-v1]\n"
        "algorithms:\n"
        "  - {name: example, entrypoint: 'examples.packed_entrypoint:train', params: {rollout: 256}}\n"
        "  - {name: poisoned, entrypoint: 'poisoned:train', params: {rollout: 256}}\n"
        "resources: {seeds_per_job: 2}\n"
    )
    db = tmp_path / "db.duckdb"
    r = rl(tmp_path, "run", suite, "--db", db, "--workers", "2")
    assert r.returncode == 1, r.stdout + r.stderr  # a run failed: exit 1, not a crash
    assert "3 finished, 1 failed" in r.stdout and "Traceback" not in r.stderr
    status = rl(tmp_path, "status", "pe", "--db", db, "--json")
    runs = {(x["algo"], x["seed"]): x for x in json.loads(status.stdout)["runs"]}
    assert {k: v["status"] for k, v in runs.items()} == {
        ("example", 0): "finished", ("example", 1): "finished",
        ("poisoned", 0): "finished", ("poisoned", 1): "failed",
    }  # fmt: skip
    assert "diverged: NaN loss at step" in runs["poisoned", 1]["error"]
    for algo in ("example", "poisoned"):  # the two seeds of an entry trained in one job
        assert runs[algo, 0]["job_id"] == runs[algo, 1]["job_id"]
        assert runs[algo, 0]["run_id"] != runs[algo, 1]["run_id"]
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("""SELECT r.algo, r.seed, m.step, m.value FROM metrics m JOIN runs r USING (run_id)
                              WHERE m.name = 'eval/return' ORDER BY ALL""").fetchall()
        episodes = dict(
            con.execute("""SELECT r.algo || r.seed, count(*) FROM metrics m JOIN runs r USING (run_id)
                                       WHERE m.name = 'train/episode_return' GROUP BY ALL""").fetchall()
        )
    evals = {}
    for algo, seed, step, value in rows:
        evals.setdefault((algo, seed), []).append((step, value))
    for key in (("example", 0), ("example", 1), ("poisoned", 0)):
        assert [s for s, _ in evals[key]] == [0, 512, 1024], key  # each run has its own evaluations
    assert [s for s, _ in evals["poisoned", 1]] == [0]  # failed before its first evaluation point
    assert min(episodes.values()) > 0 and len(episodes) == 4  # every run logged its own episodes
    # the seed packed with a failing one trains exactly as it does next to a healthy one
    assert evals["poisoned", 0] == evals["example", 0]
