"""End to end, as a user would: an offline suite on a D4RL-format file of the user's own, through the real
`rlbench run`, `status`, `leaderboard` and `plot`, normalised by the references the file records."""

import json

import gymnasium
import numpy as np
import pytest
from e2e_cli import rl

from rlbench_cli.datasets.data import OfflineData
from rlbench_cli.datasets.hdf5 import write_hdf5

pytestmark = pytest.mark.slow


def _cartpole_expert_file(path, episodes=8, seed=0):
    """A small expert dataset: a hand-written CartPole controller (push toward the pole's fall, ~500 return)."""
    env = gymnasium.make("CartPole-v1")
    rng = np.random.default_rng(seed)
    cols = {k: [] for k in ("observations", "actions", "rewards", "terminals", "timeouts")}
    for ep in range(episodes):
        obs, _ = env.reset(seed=seed + ep)
        while True:
            a = int(obs[2] + 0.5 * obs[3] > 0) if rng.random() > 0.05 else int(rng.integers(2))
            nxt, r, term, trunc, _ = env.step(a)
            for k, v in zip(cols, (obs, a, r, term, trunc)):
                cols[k].append(v)
            obs = nxt
            if term or trunc:
                break
    data = OfflineData(
        observations=np.asarray(cols["observations"], np.float32), actions=np.asarray(cols["actions"], np.int64),
        rewards=np.asarray(cols["rewards"], np.float32), terminals=np.asarray(cols["terminals"]),
        timeouts=np.asarray(cols["timeouts"]),
        meta={"env_id": "CartPole-v1", "discrete": True, "ref_random": 22.0, "ref_expert": 500.0},
    )  # fmt: skip
    write_hdf5(path, data)
    return data


def test_offline_suite_on_your_own_file_runs_scores_and_plots(tmp_path):
    data = _cartpole_expert_file(tmp_path / "mine.hdf5")
    assert data.episode_returns().mean() > 300
    suite = tmp_path / "off.yaml"
    suite.write_text(
        "name: offline-mine\nseeds: 2\nbudget: {steps: 300, eval_every: 150, eval_episodes: 3}\n"
        f"datasets: [{{name: cartpole-mine, path: {tmp_path / 'mine.hdf5'}, env: CartPole-v1}}]\n"
        "algorithms:\n  - {name: bc, params: {hidden_units: [32, 32]}}\n"
        "  - {name: hf_decision_transformer, params: {hidden_size: 32, n_layer: 1, context_length: 5}}\n"
    )
    db = tmp_path / "r.duckdb"
    rl("run", suite, "--db", db, "--workers", "2")
    status = json.loads(rl("status", "offline-mine", "--db", db, "--json").stdout)["suites"]["offline-mine"]
    assert status["all_finished"] and status["total"] == 4
    board = json.loads(rl("leaderboard", "offline-mine", "--db", db, "--per-task", "--format", "json").stdout)
    assert "each dataset's random and expert returns" in json.dumps(board["meta"])
    rows = {r["algo"]: r for r in board["rows"]}
    assert set(rows) == {"bc", "hf_decision_transformer"} and {r["task"] for r in rows.values()} == {
        "cartpole-mine"
    }
    assert rows["bc"]["mean"] > 300  # behaviour cloning of an expert learns CartPole in 300 steps
    assert rows["bc"]["norm_mean"] == pytest.approx(100 * (rows["bc"]["mean"] - 22.0) / (500.0 - 22.0))
    rl("plot", "offline-mine", "--db", db, "--out", tmp_path / "fig")
    assert (tmp_path / "fig" / "leaderboard.md").exists()
    fetched = json.loads(rl("fetch", "--suite", "offline-mine", "--metric", "eval/normalized_return", "--format", "json",
                            "--db", db).stdout)  # fmt: skip
    assert len(fetched) == 4 * 3  # every run logs it at steps 0, 150, 300


def test_enjoy_plays_a_saved_hf_decision_transformer(tmp_path):
    _cartpole_expert_file(tmp_path / "mine.hdf5", episodes=4)
    suite = tmp_path / "dt.yaml"
    suite.write_text(
        "name: dt\nseeds: 1\nbudget: {steps: 40, eval_every: 20, eval_episodes: 2}\n"
        f"datasets: [{{name: cartpole-mine, path: {tmp_path / 'mine.hdf5'}, env: CartPole-v1}}]\n"
        "algorithms:\n  - {name: hf_decision_transformer, params: {hidden_size: 16, n_layer: 1, "
        "context_length: 4, batch_size: 16}}\n"
    )
    db = tmp_path / "r.duckdb"
    rl("run", suite, "--db", db)
    (run,) = json.loads(rl("status", "dt", "--db", db, "--json").stdout)["runs"]
    r = rl("enjoy", run["run_id"], "--which", "final", "--episodes", 2, "--db", db)
    returns = [float(line.split()[-1]) for line in r.stdout.splitlines() if line.startswith("episode ")]
    last = json.loads(
        rl("fetch", "--suite", "dt", "--metric", "eval/return", "--format", "json", "--db", db).stdout
    )
    final = max(last, key=lambda row: row["step"])
    assert len(returns) == 2 and sum(returns) / 2 == pytest.approx(final["value"], rel=1e-12)  # replayed
    assert f"final policy (step {final['step']})" in r.stdout
    assert "best policy (step " in rl("enjoy", run["run_id"], "--db", db).stdout
