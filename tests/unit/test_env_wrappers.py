"""Env wrappers from the suite: applied in order to training and evaluation envs, part of the task."""

import pytest

from rlbench_cli.envs import make_env
from rlbench_cli.errors import SuiteInvalid
from rlbench_cli.suite.grid import expand
from rlbench_cli.suite.loader import parse_suite

pytestmark = pytest.mark.fast


def suite(envs):
    return parse_suite({"name": "w", "seeds": 1, "envs": envs, "algorithms": ["random"]}, "w.yaml")


def test_wrappers_are_applied_in_order_and_name_the_task():
    s = suite([{"id": "Pendulum-v1", "wrappers": [{"name": "TimeLimit", "kwargs": {"max_episode_steps": 7}},
                                                  "ClipAction"]}, "Pendulum-v1"])  # fmt: skip
    wrapped, plain = expand(s)
    assert wrapped.env == "Pendulum-v1+TimeLimit+ClipAction" and plain.env == "Pendulum-v1"
    assert wrapped.run_id != plain.run_id
    env = make_env(wrapped.env_id, wrapped.env_kwargs, seed=0, wrappers=wrapped.env_wrappers)
    assert type(env).__name__ == "ClipAction" and type(env.env).__name__ == "TimeLimit"
    env.reset(seed=0)
    steps = 0
    while True:
        steps += 1
        if any(env.step(env.action_space.sample())[2:4]):
            break
    assert steps == 7


def test_no_wrappers_keeps_the_run_id_of_earlier_versions():
    (spec,) = expand(suite(["CartPole-v1"]))
    assert "env_wrappers" not in spec.identity()


def test_your_own_wrapper_class_by_module_path():
    (spec,) = expand(
        suite([{"id": "CartPole-v1", "wrappers": ["gymnasium.wrappers:RecordEpisodeStatistics"]}])
    )
    assert spec.env == "CartPole-v1+RecordEpisodeStatistics"
    env = make_env(spec.env_id, seed=0, wrappers=spec.env_wrappers)
    assert type(env).__name__ == "RecordEpisodeStatistics"


@pytest.mark.parametrize(
    "wrapper, needle",
    [
        (
            "ClipActions",
            "field 'envs[0].wrappers[0]': unknown wrapper 'ClipActions'; did you mean ClipAction",
        ),
        ("no_such_module:Thing", "cannot import wrapper 'no_such_module:Thing'"),
        ({"nme": "ClipAction"}, "field 'envs[0].wrappers[0].name': Field required; add it"),
    ],
)
def test_bad_wrappers_are_one_line_errors(wrapper, needle):
    with pytest.raises(SuiteInvalid) as e:
        suite([{"id": "Pendulum-v1", "wrappers": [wrapper]}])
    assert needle in str(e.value) and "\n" not in str(e.value)
