"""NeoRL-2 realism wrappers: Delay is exact, Disturbance is seeded, SafetyCost reaches eval/cost and
eval/violations through the shared evaluation, and bad kwargs are one-line errors naming wrapper and key."""

import sys
from pathlib import Path

import numpy as np
import pytest

from rlbench_cli.algos.base import RunContext
from rlbench_cli.envs import make_env
from rlbench_cli.envs.wrappers import Delay, Disturbance, SafetyCost, check_kwargs
from rlbench_cli.errors import SuiteInvalid
from rlbench_cli.sink import ShardSink
from rlbench_cli.suite.grid import expand
from rlbench_cli.suite.loader import parse_suite

pytestmark = pytest.mark.fast

sys.path.insert(0, str(Path(__file__).parent))
from offline_helpers import read_metrics  # noqa: E402


def suite(wrappers):
    envs = [{"id": "Pendulum-v1", "wrappers": wrappers}]
    return parse_suite({"name": "w", "seeds": 1, "envs": envs, "algorithms": ["random"]}, "w.yaml")


def _rollout(env, actions, seed=3):
    obs = [env.reset(seed=seed)[0]]
    for a in actions:
        obs.append(env.step(a)[0])
    return np.asarray(obs)


ACTIONS = [np.array([a], np.float32) for a in np.linspace(-2, 2, 12)]


def test_observation_delay_is_exact():
    raw = _rollout(make_env("Pendulum-v1"), ACTIONS)
    delayed = _rollout(Delay(make_env("Pendulum-v1"), obs_steps=3), ACTIONS)
    np.testing.assert_array_equal(delayed[3:], raw[:-3])  # what it sees at t is what was true at t - 3
    np.testing.assert_array_equal(delayed[:3], np.repeat(raw[:1], 3, axis=0))  # the first one until then


def test_action_delay_applies_the_action_chosen_k_steps_ago():
    zero = np.zeros(1, np.float32)
    raw = _rollout(make_env("Pendulum-v1"), [zero, zero, *ACTIONS[:-2]])
    delayed = _rollout(Delay(make_env("Pendulum-v1"), action_steps=2), ACTIONS)
    np.testing.assert_array_equal(delayed, raw)
    cart = Delay(make_env("CartPole-v1"), action_steps=1)  # discrete: a no-op of 0 first
    plain = make_env("CartPole-v1")
    np.testing.assert_array_equal(_rollout(cart, [1, 1, 0]), _rollout(plain, [0, 1, 1]))


def test_disturbance_is_seeded_correlated_and_changes_the_dynamics():
    def run(seed, **kw):
        return _rollout(Disturbance(make_env("Pendulum-v1"), **kw), ACTIONS, seed=seed)

    a, b = run(3, action_scale=0.5, correlation=0.9), run(3, action_scale=0.5, correlation=0.9)
    np.testing.assert_array_equal(a, b)  # same reset seed, same disturbance
    plain = _rollout(make_env("Pendulum-v1"), ACTIONS)
    assert not np.allclose(a, plain)
    noisy = run(3, obs_scale=0.1)
    np.testing.assert_array_equal(noisy[0] - plain[0] != 0, [True, True, True])  # sensor noise on every value
    env = Disturbance(make_env("Pendulum-v1"), action_scale=1.0, correlation=0.99)
    env.reset(seed=0)
    d = []
    for _ in range(200):
        env.step(np.zeros(1, np.float32))
        d.append(float(env._d[0]))
    assert np.corrcoef(d[:-1], d[1:])[0, 1] > 0.8  # wind-like: the push persists from step to step


def test_safety_cost_reaches_eval_cost_and_violations(tmp_path):
    (spec,) = expand(
        suite([{"name": "SafetyCost", "kwargs": {"index": 2, "low": -1.0, "high": 1.0, "limit": 5}}])
    )
    assert spec.env == "Pendulum-v1+SafetyCost"
    env = make_env(spec.env_id, seed=0, wrappers=spec.env_wrappers)
    _, _, _, _, info = env.step(np.array([2.0], np.float32))
    assert set(info) >= {"cost", "cost_limit"} and info["cost_limit"] == 5.0
    spec = type(spec)(**{**spec.__dict__, "budget": {**spec.budget, "eval_episodes": 4}})
    sink = ShardSink(tmp_path / "m", background=False)
    ctx = RunContext(spec=spec, sink=sink)
    episodes = []

    def policy(obs):  # full torque: the angular velocity leaves [-1, 1] for many steps
        return np.full((len(obs), 1), 2.0, np.float32)

    ctx.evaluate(0, policy)
    sink.close()
    m = read_metrics(tmp_path / "m")
    # the same episodes by hand: cost = steps with |theta_dot| > 1, a violation when above 5
    for s in range(4):
        from rlbench_cli.algos.base import eval_seeds

        e = make_env(spec.env_id, wrappers=spec.env_wrappers)
        e.reset(seed=eval_seeds(spec.seed, 4)[s])
        total, done = 0.0, False
        while not done:
            _, _, term, trunc, info = e.step(np.array([2.0], np.float32))
            total += info["cost"]
            done = term or trunc
        episodes.append(total)
    assert m["eval/cost"] == [(0, pytest.approx(np.mean(episodes)))]
    assert m["eval/violations"] == [(0, pytest.approx(np.mean(np.array(episodes) > 5)))]
    assert np.mean(episodes) > 5  # the test exercises real costs


def test_no_cost_signal_no_cost_metrics(tmp_path):
    (spec,) = expand(suite([{"name": "Delay", "kwargs": {"obs_steps": 1}}]))
    sink = ShardSink(tmp_path / "m", background=False)
    RunContext(spec=spec, sink=sink).evaluate(0, lambda obs: np.zeros((len(obs), 1), np.float32))
    sink.close()
    assert "eval/cost" not in read_metrics(tmp_path / "m")


@pytest.mark.parametrize(
    "wrapper, message",
    [
        ({"name": "Delay", "kwargs": {"obs_step": 2}}, "wrapper Delay: unknown key 'obs_step'; valid: obs_steps, action_steps"),
        ({"name": "Delay", "kwargs": {"obs_steps": -1}}, "wrapper Delay: key 'obs_steps' must be an integer >= 0"),
        ("Delay", "wrapper Delay: key 'obs_steps' or 'action_steps' must be at least 1"),
        ({"name": "Disturbance", "kwargs": {"correlation": 1.5, "action_scale": 0.1}}, "key 'correlation' must be below 1"),
        ({"name": "SafetyCost", "kwargs": {"low": 0}}, "wrapper SafetyCost: key 'index' is missing"),
        ({"name": "SafetyCost", "kwargs": {"index": 0, "low": 2, "high": 1}}, "key 'low' (2) must not exceed 'high' (1)"),
        ({"name": "TimeLimit", "kwargs": {"max_steps": 5}}, "wrapper TimeLimit: unknown key 'max_steps'; valid: max_episode_steps"),
    ],
)  # fmt: skip
def test_bad_wrapper_kwargs_are_one_line_errors_naming_wrapper_and_key(wrapper, message):
    with pytest.raises(SuiteInvalid) as e:
        suite([wrapper])
    text = str(e.value)
    assert text.startswith("w.yaml: field 'envs[0].wrappers[0].kwargs': ") and message in text
    assert "\n" not in text


def test_safety_cost_index_out_of_range_is_a_clear_error():
    with pytest.raises(
        ValueError, match=r"key 'index' is 7, but the observations have shape \(3,\); use 0..2"
    ):
        SafetyCost(make_env("Pendulum-v1"), index=7, high=1.0)
    assert check_kwargs(SafetyCost, {"index": 0, "high": 1.0}) is None
