"""gymnax tasks and ppo_jax in a suite, refused like a user would see it (Typer's CliRunner): one line, exit 2,
nothing recorded. None of these imports JAX."""

import json
import sys

import pytest
from typer.testing import CliRunner

from rlbench_cli.cli.app import app

pytestmark = pytest.mark.fast
runner = CliRunner()


def _suite(tmp_path, envs, algos, seeds=2):
    p = tmp_path / "j.yaml"
    p.write_text(f"name: j\nseeds: {seeds}\nbudget: {{steps: 1024, eval_every: 512, eval_episodes: 2}}\n"
                 f"envs: [{envs}]\nalgorithms: [{algos}]\nresources: {{seeds_per_job: 2}}\n")  # fmt: skip
    return p


def _one_line(r):
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("rlbench: error: "), r.stderr
    assert "Traceback" not in r.output + r.stderr
    return lines[0]


@pytest.mark.parametrize(
    "envs, algos, needles",
    [
        ("gymnax/CartPol-v1", "ppo_jax", ["envs[0]", "unknown gymnax environment", "did you mean gymnax/CartPole-v1"]),
        ("gymnax/Nothing-v0", "ppo_jax", ["unknown gymnax environment", "gymnax has: gymnax/CartPole-v1"]),
        ("gymnax/CartPole-v1", "ppo", ["ppo cannot run on gymnax/CartPole-v1", "need a JAX algorithm (ppo_jax, pqn_jax)"]),
        ("CartPole-v1", "ppo_jax", ["ppo_jax trains on gymnax tasks only", "use gymnax/CartPole-v1"]),
        ("'gymnax/CartPole-v1', CartPole-v1", "{name: ppo_jax, envs: [CartPole-v1]}", ["ppo_jax trains on gymnax"]),
        ("{id: gymnax/Acrobot-v1, kwargs: {x: 1}}", "ppo_jax", ["envs[0].kwargs", "takes no kwargs"]),
        ("gymnax/CartPole-v1", "{name: ppo_jax, params: {fooo: 1}}", ["unknown ppo_jax param(s) 'fooo'", "num_envs"]),
        ("gymnax/CartPole-v1", "{name: ppo_jax, params: {target_kl: 0.1}}", ["does not take 'target_kl'", "use ppo"]),
        ("gymnax/CartPole-v1", "{name: ppo_jax, params: {num_minibatches: 3}}", ["multiple of num_minibatches"]),
        ("gymnax/Pendulum-v1", "pqn_jax", ["pqn_jax acts on discrete actions and gymnax/Pendulum-v1 has continuous"]),
        ("gymnax/CartPole-v1", "{name: pqn_jax, params: {lr: 0.1}}", ["unknown pqn_jax param(s) 'lr'", "q_lambda"]),
    ],
)  # fmt: skip
def test_bad_gymnax_suites_are_one_line_and_record_nothing(tmp_path, envs, algos, needles):
    suite = _suite(tmp_path, envs, algos)
    line = _one_line(runner.invoke(app, ["validate", str(suite)]))
    for needle in needles:
        assert needle in line, line
    if "params" in algos:
        return  # params are checked when the runs are about to launch (tests/e2e/test_jax_run.py)
    db = tmp_path / "r.duckdb"
    line = _one_line(runner.invoke(app, ["run", str(suite), "--db", str(db), "--dry-run"]))
    assert needles[0] in line and not db.exists()


def test_a_suite_with_both_simulators_gives_each_algorithm_its_own(tmp_path):
    suite = _suite(tmp_path, "CartPole-v1, gymnax/CartPole-v1", "ppo, ppo_jax", seeds=2)
    r = runner.invoke(app, ["run", str(suite), "--dry-run", "--json"])
    assert r.exit_code == 0, r.output
    grid = json.loads(r.output)
    assert {(g["algo"], g["env_id"]) for g in grid} == {
        ("ppo", "CartPole-v1"),
        ("ppo_jax", "gymnax/CartPole-v1"),
    }


@pytest.mark.parametrize("module", ["jax", "gymnax"])
def test_without_the_jax_extra_the_pip_command_is_named(tmp_path, monkeypatch, module):
    monkeypatch.setitem(sys.modules, module, None)  # what Python does for a package that is not installed
    line = _one_line(runner.invoke(app, ["validate", str(_suite(tmp_path, "gymnax/CartPole-v1", "ppo_jax"))]))
    assert f"need {module}" in line and 'pip install "rlbench-cli[jax]"' in line


@pytest.mark.parametrize(
    "budget, algos, field",
    [
        ("video_every: 1", "ppo_jax", "'budget.video_every'"),
        ("", "{name: ppo_jax, budget: {video_every: 2}}", "'algorithms[0].budget.video_every'"),
    ],
)
def test_videos_of_a_task_gymnax_cannot_draw_are_refused_by_field(tmp_path, budget, algos, field):
    """gymnax draws no frames: a video is drawn in the task's gymnasium version, which MinAtar has none of."""
    suite = _suite(tmp_path, "gymnax/Breakout-MinAtar, gymnax/CartPole-v1", algos)
    suite.write_text(
        suite.read_text().replace("eval_episodes: 2", f"eval_episodes: 2, {budget}".rstrip(", "))
    )
    line = _one_line(runner.invoke(app, ["run", str(suite), "--db", str(tmp_path / "r.duckdb"), "--dry-run"]))
    assert field in line and "gymnax/Breakout-MinAtar has no gymnasium version" in line, line
    assert "remove it" in line and not (tmp_path / "r.duckdb").exists()
    suite.write_text(
        suite.read_text().replace("gymnax/Breakout-MinAtar, ", "")
    )  # CartPole: drawn in gymnasium's
    assert runner.invoke(app, ["validate", str(suite)]).exit_code == 0
