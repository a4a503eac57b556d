"""Offline tasks in suites: `datasets:` entries, which algorithms run on them, and their runs' identity."""

import pytest

from rlbench_cli.errors import SuiteInvalid
from rlbench_cli.suite.grid import expand
from rlbench_cli.suite.loader import parse_suite

pytestmark = pytest.mark.fast


def suite(**over):
    base = {"name": "off", "seeds": 2, "datasets": ["CartPole-v1-medium", "Pendulum-v1-expert"],
            "algorithms": ["bc", "cql"]}  # fmt: skip
    base.update(over)
    return parse_suite(base, "off.yaml")


def test_generated_names_give_env_and_task():
    s = suite()
    assert [(d.name, d.env, d.generated) for d in s.datasets] == [
        ("CartPole-v1-medium", "CartPole-v1", True), ("Pendulum-v1-expert", "Pendulum-v1", True)
    ]  # fmt: skip
    specs = expand(s)
    assert len(specs) == 2 * 2 * 2
    one = specs[0]
    assert one.env == "CartPole-v1-medium" and one.env_id == "CartPole-v1" and one.offline
    assert one.dataset == "CartPole-v1-medium" and one.dataset_path is None


def test_medium_replay_and_medium_expert_names_parse():
    s = suite(datasets=["Hopper-v5-medium-replay", "Hopper-v5-medium-expert"])
    assert [d.env for d in s.datasets] == ["Hopper-v5", "Hopper-v5"]


def test_a_file_of_your_own_needs_env_and_keeps_its_path(tmp_path):
    s = suite(datasets=[{"name": "hopper-medium-v2", "path": "data/hopper_medium.hdf5", "env": "Hopper-v5"}])
    (spec,) = {x.dataset_path for x in expand(s)}
    assert spec == "data/hopper_medium.hdf5"
    with pytest.raises(SuiteInvalid, match="add env: <gymnasium id>"):
        suite(datasets=["data/hopper_medium.hdf5"])


def test_online_and_offline_algorithms_run_on_their_own_kind_of_task():
    s = suite(envs=["CartPole-v1"], algorithms=["bc", "ppo", {"name": "mine", "entrypoint": "pkg.mod:fn"}])
    cells = {(x.algo, x.env) for x in expand(s)}
    assert ("ppo", "CartPole-v1") in cells and ("ppo", "CartPole-v1-medium") not in cells
    assert ("bc", "CartPole-v1-medium") in cells and ("bc", "CartPole-v1") not in cells
    assert {("mine", "CartPole-v1"), ("mine", "CartPole-v1-medium"), ("mine", "Pendulum-v1-expert")} <= cells


def test_envs_filter_names_datasets():
    s = suite(algorithms=["bc", {"name": "cql", "envs": ["Pendulum-v1-expert"]}])
    assert {x.env for x in expand(s) if x.algo == "cql"} == {"Pendulum-v1-expert"}


def test_dataset_and_path_are_part_of_the_run_id():
    a = expand(suite(datasets=["CartPole-v1-medium"]))[0]
    b = expand(suite(datasets=["CartPole-v1-expert"]))[0]
    c = expand(suite(datasets=[{"name": "CartPole-v1-medium", "path": "x.hdf5"}]))[0]
    assert len({a.run_id, b.run_id, c.run_id}) == 3
    assert expand(suite(datasets=["CartPole-v1-medium"]))[0].run_id == a.run_id


@pytest.mark.parametrize(
    "over, needle",
    [
        ({"datasets": ["CartPole-v1-hard"]}, "neither <EnvId>-<level>"),
        ({"datasets": ["Nope-v0-medium"]}, "datasets[0].env': unknown gymnasium environment 'Nope-v0'"),
        ({"datasets": ["CartPole-v1-medium", "CartPole-v1-medium"]}, "is listed twice"),
        ({"datasets": [], "envs": []}, "field 'envs': a suite needs envs (online tasks) or datasets"),
        ({"algorithms": ["ppo"]}, "ppo is an online algorithm and the suite has no envs"),
        ({"datasets": None, "envs": ["CartPole-v1"]}, None),
    ],
)
def test_dataset_errors_are_one_line(over, needle):
    if needle is None:  # an offline algorithm without datasets
        with pytest.raises(SuiteInvalid, match="offline algorithm and the suite has no datasets"):
            suite(**{k: v for k, v in over.items() if v is not None} | {"datasets": []})
        return
    with pytest.raises(SuiteInvalid) as e:
        suite(**over)
    assert needle in str(e.value) and "\n" not in str(e.value)
