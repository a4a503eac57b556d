"""Wrappers on an offline task (``datasets[].wrappers``): the env its runs are evaluated and fine-tuned in is
wrapped, a dataset rlbench generates is collected in the wrapped env (its own file), the task is named
``<dataset>+<Wrapper>``; and training episodes report their safety cost (``train/episode_cost``)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from rlbench_cli import datagen
from rlbench_cli.algos.base import RunContext
from rlbench_cli.algos.d3rlpy_online import _EpisodeStats
from rlbench_cli.datagen import d4rl as B
from rlbench_cli.datasets import dataset_path, load_dataset
from rlbench_cli.datasets.hdf5 import read_hdf5
from rlbench_cli.envs import make_env
from rlbench_cli.errors import SuiteInvalid, UsageError
from rlbench_cli.sink import ShardSink
from rlbench_cli.suite.grid import RunSpec, expand
from rlbench_cli.suite.loader import parse_suite
from rlbench_cli.suite.models import DatasetSpec

sys.path.insert(0, str(Path(__file__).parent))
from offline_helpers import read_metrics  # noqa: E402

DELAY = {"name": "Delay", "kwargs": {"obs_steps": 3}}
COST = {"name": "SafetyCost", "kwargs": {"index": 2, "low": -1.0, "high": 1.0, "limit": 5}}


def suite(datasets, algorithms=("iql",)):
    return parse_suite(
        {"name": "w", "seeds": 1, "datasets": datasets, "algorithms": list(algorithms)}, "w.yaml"
    )


def test_dataset_wrappers_name_the_task_and_reach_the_runs_env():
    plain_ds = "Pendulum-v1-conservative"
    s = suite([plain_ds, {"name": plain_ds, "wrappers": [DELAY, COST]}])
    plain, wrapped = expand(s)
    assert plain.env == plain_ds and "env_wrappers" not in plain.identity()  # earlier run ids are kept
    assert wrapped.env == "Pendulum-v1-conservative+Delay+SafetyCost"
    assert wrapped.dataset == plain_ds and wrapped.env_wrappers == [DELAY, COST]
    assert plain.run_id != wrapped.run_id
    assert RunSpec.from_dict(wrapped.to_dict()) == wrapped
    env = RunContext(spec=wrapped, sink=None).make_env()  # type: ignore[arg-type]
    assert type(env).__name__ == "SafetyCost" and type(env.env).__name__ == "Delay"
    _, _, _, _, info = env.step(np.array([2.0], np.float32))
    assert "cost" in info


def test_a_wrapped_generated_dataset_has_its_own_file_and_a_users_file_is_read_as_it_is(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("RLBENCH_DATASETS", str(tmp_path))
    assert (
        dataset_path("Pendulum-v1-medium", None, [DELAY, COST])
        == tmp_path / "Pendulum-v1-medium+Delay+SafetyCost.hdf5"
    )
    assert dataset_path("Pendulum-v1-medium") == tmp_path / "Pendulum-v1-medium.hdf5"
    assert dataset_path("mine", "my.hdf5", [DELAY]).name == "my.hdf5"
    with pytest.raises(FileNotFoundError, match=r"Pendulum-v1-medium\+Delay.hdf5; rlbench run builds it"):
        load_dataset("Pendulum-v1-medium", wrappers=[{"name": "Delay", "kwargs": {"obs_steps": 1}}])


def test_generated_data_is_collected_in_the_wrapped_env(tmp_path):
    path = B.build_dataset("MountainCar-v0", "random", size=600, root=tmp_path, wrappers=[DELAY])
    assert path == tmp_path / "MountainCar-v0-random+Delay.hdf5"
    (spec,) = suite([{"name": "MountainCar-v0-random", "wrappers": [DELAY]}], ["bc"]).datasets
    assert datagen.ensure_datasets([spec], root=tmp_path) == [path]  # a suite's wrapped dataset: that file
    from rlbench_cli.datasets.catalog import summarize

    assert summarize(path)["name"] == "MountainCar-v0-random+Delay"  # as `rlbench datasets list` shows it
    d = read_hdf5(path)
    assert d.meta["env_wrappers"] == [DELAY] and d.meta["env_id"] == "MountainCar-v0"
    obs = d.observations
    # the agent sees the first observation until the 3-step delay has passed: 4 equal rows, then it moves
    np.testing.assert_array_equal(obs[1:4], np.repeat(obs[:1], 3, axis=0))
    assert not np.array_equal(obs[4], obs[0])
    # the same transitions by hand, in the wrapped env
    env = make_env("MountainCar-v0", wrappers=[DELAY])
    first = env.reset(seed=B._collect_seed(0, "random"))[0]
    np.testing.assert_array_equal(obs[0], first)
    for t in range(10):
        o = env.step(int(d.actions[t]))[0]
        np.testing.assert_array_equal(d.next_observations[t], o)
    plain_path = B.build_dataset("MountainCar-v0", "random", size=600, root=tmp_path)
    assert datagen.ensure_datasets([DatasetSpec(name="MountainCar-v0-random")], root=tmp_path) == [plain_path]
    assert (
        plain_path == tmp_path / "MountainCar-v0-random.hdf5"
        and "env_wrappers" not in read_hdf5(plain_path).meta
    )
    assert not np.array_equal(read_hdf5(plain_path).observations[:5], obs[:5])
    other = [{"name": "Delay", "kwargs": {"obs_steps": 2}}]
    with pytest.raises(
        UsageError, match=r"MountainCar-v0-random\+Delay.hdf5 was collected with env wrappers"
    ):
        B.build_dataset("MountainCar-v0", "random", root=tmp_path, wrappers=other)


@pytest.mark.parametrize(
    "dataset, message",
    [
        ({"name": "Pendulum-v1-medium", "wrappers": ["NoSuchWrapper"]},
         "w.yaml: field 'datasets[0].wrappers[0]': unknown wrapper 'NoSuchWrapper'"),
        ({"name": "Pendulum-v1-medium", "wrappers": [{"name": "Delay", "kwargs": {"obs_step": 1}}]},
         "w.yaml: field 'datasets[0].wrappers[0].kwargs': wrapper Delay: unknown key 'obs_step'"),
        ({"name": "MazeFO-v0-mixed", "wrappers": [DELAY]},
         "w.yaml: field 'datasets[0].wrappers': a text env's dataset takes no wrappers"),
    ],
)  # fmt: skip
def test_bad_dataset_wrappers_are_one_line_errors(dataset, message):
    with pytest.raises(SuiteInvalid) as e:
        suite([dataset], ["bc"])
    assert message in str(e.value) and "\n" not in str(e.value)


def test_the_same_dataset_with_the_same_wrappers_twice_is_refused():
    with pytest.raises(SuiteInvalid, match=r"dataset 'Pendulum-v1-medium\+Delay' is listed twice"):
        suite([{"name": "Pendulum-v1-medium", "wrappers": [DELAY]}] * 2)


def _spec(env_id, wrappers, algo="random", steps=250):
    return RunSpec(suite="t", algo=algo, algo_name=algo, params={}, env_id=env_id, env_kwargs={}, seed=0,
                   budget={"steps": steps, "eval_every": steps, "eval_episodes": 1, "timeout": None},
                   env_wrappers=wrappers)  # fmt: skip


def test_training_episodes_log_their_safety_cost(tmp_path):
    spec = _spec("Pendulum-v1", [COST])
    sink = ShardSink(tmp_path / "m", background=False)
    ctx = RunContext(spec=spec, sink=sink)
    env = _EpisodeStats(ctx.make_env(), ctx)
    env.reset(seed=4)
    costs = 0.0
    for _ in range(200):
        *_, term, trunc, info = env.step(np.array([2.0], np.float32))
        costs += info["cost"]
    assert trunc
    plain = _EpisodeStats(make_env("Pendulum-v1"), ctx)  # no cost signal: no cost metric
    plain.reset(seed=4)
    for _ in range(200):
        plain.step(np.array([2.0], np.float32))
    sink.close()
    m = read_metrics(tmp_path / "m")
    assert m["train/episode_cost"] == [(200, pytest.approx(costs))] and costs > 5
    assert len(m["train/episode_return"]) == 2


@pytest.mark.parametrize("algo", ["random", "ppo"])
def test_online_algorithms_log_training_episode_costs(tmp_path, algo):
    from rlbench_cli.algos import get_algorithm

    spec = _spec("Pendulum-v1", [COST], algo, steps=512)
    if algo == "ppo":
        spec = RunSpec(**{**spec.__dict__, "params": {"num_envs": 2, "num_steps": 128}})
    sink = ShardSink(tmp_path / "m", background=False)
    get_algorithm(algo)().train(RunContext(spec=spec, sink=sink))
    sink.close()
    m = read_metrics(tmp_path / "m")
    returns, costs = m["train/episode_return"], m["train/episode_cost"]
    assert [s for s, _ in costs] == [s for s, _ in returns] and len(costs) >= 2
    assert all(0 <= c <= 200 for _, c in costs)


def test_a_wrapped_tasks_references_normalise_it_under_its_own_name(tmp_path, monkeypatch):
    from offline_helpers import pendulum_controller, rollouts

    from rlbench_cli.coordinator import prepare_datasets
    from rlbench_cli.datasets.hdf5 import write_hdf5

    monkeypatch.setenv("RLBENCH_DATASETS", str(tmp_path / "datasets"))
    data = rollouts(
        "Pendulum-v1", pendulum_controller, 1, 0.2, meta={"ref_random": -1200.0, "ref_expert": -140.0}
    )
    write_hdf5(tmp_path / "pend.hdf5", data)
    own = {"name": "pend", "path": str(tmp_path / "pend.hdf5"), "env": "Pendulum-v1"}
    refs = prepare_datasets(suite([own, {**own, "wrappers": [DELAY]}]))
    assert refs == {"pend": [-1200.0, -140.0], "pend+Delay": [-1200.0, -140.0]}
    assert {s.env for s in expand(suite([own, {**own, "wrappers": [DELAY]}]))} == set(refs)


@pytest.mark.parametrize(
    ("gpus_per_job", "gpus", "device"), [(0.25, 1, "cuda"), (0.0, 1, "cpu"), (0.5, 0, "cpu")]
)
def test_missing_datasets_are_built_on_a_gpu_only_when_the_suite_runs_on_one(
    tmp_path, monkeypatch, gpus_per_job, gpus, device
):
    import rlbench_cli.datagen as datagen
    import rlbench_cli.executors.base as executors_base
    from rlbench_cli.coordinator import prepare_datasets

    monkeypatch.setenv("RLBENCH_DATASETS", str(tmp_path / "datasets"))
    monkeypatch.setattr(executors_base, "detect_gpus", lambda: gpus)
    seen = []

    class Built(Exception):  # the stand-in records the device and stops there
        pass

    def ensure_datasets(specs, progress, **kw):
        seen.append(kw["device"])
        raise Built

    monkeypatch.setattr(datagen, "ensure_datasets", ensure_datasets)
    s = parse_suite({"name": "w", "seeds": 1, "datasets": ["Pendulum-v1-medium"], "algorithms": ["iql"],
                     "resources": {"gpus_per_job": gpus_per_job}}, "w.yaml")  # fmt: skip
    with pytest.raises(Built):
        prepare_datasets(s)
    assert seen == [device]
