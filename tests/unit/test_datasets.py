"""Offline datasets: level selection and normalisation arithmetic, collection, the HDF5 file (and d3rlpy
loading it as is), Minari in both directions, policy checkpoints of the behaviour learners, and the
builder's levels on a cached behaviour run (no training here; the e2e test trains)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlbench_cli import datagen
from rlbench_cli.datagen import behaviour, rollouts
from rlbench_cli.datagen import d4rl as B
from rlbench_cli.datasets import OfflineData, dataset_path, load_dataset, to_d3rlpy
from rlbench_cli.datasets.catalog import describe, list_datasets
from rlbench_cli.datasets.hdf5 import read_hdf5, write_hdf5
from rlbench_cli.datasets.minari_io import read_minari, write_minari
from rlbench_cli.errors import UnknownName, UsageError


@pytest.fixture(autouse=True)
def _one_thread() -> Any:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _load_d3rlpy(path: Path) -> Any:
    import d3rlpy

    with open(path, "rb") as f:
        return d3rlpy.dataset.ReplayBuffer.load(f, d3rlpy.dataset.InfiniteBuffer())


def _toy(discrete: bool, lengths: list[int], terminal: list[bool], cut_last: bool = False) -> OfflineData:
    """Episodes of the given lengths; each ends in a terminal or a timeout (the last maybe in neither)."""
    rng = np.random.default_rng(0)
    n = sum(lengths)
    obs = rng.uniform(-0.5, 0.5, (n, 3)).astype(np.float32)
    actions = rng.integers(0, 4, n) if discrete else rng.uniform(-1, 1, (n, 2)).astype(np.float32)
    terminals, timeouts = np.zeros(n, bool), np.zeros(n, bool)
    end = np.cumsum(lengths) - 1
    terminals[end[np.array(terminal)]] = True
    timeouts[end[~np.array(terminal)]] = True
    if cut_last:
        timeouts[-1] = terminals[-1] = False
    meta = {
        "env_id": "CartPole-v1",
        "discrete": discrete,
        "ref_random": 1.0,
        "ref_expert": 3.0,
        "behaviour": {"algo": "ppo", "params": {"a": [1, 2]}},
        "name": "toy",
    }
    if discrete:
        meta["n_actions"] = 5
    nxt = np.roll(obs, -1, axis=0)  # inside an episode, the next row's observation; a last one of its own:
    nxt[end] = rng.uniform(-0.5, 0.5, (len(end), 3))
    rewards = rng.standard_normal(n).astype(np.float32)
    return OfflineData(obs, actions, rewards, terminals, timeouts, meta, next_observations=nxt)


# -- arithmetic ------------------------------------------------------------------------------------------


def test_normalized_is_d4rls_scale() -> None:
    assert B.normalized(21.0, 21.0, 500.0) == 0.0
    assert B.normalized(500.0, 21.0, 500.0) == 1.0
    assert B.normalized(-780.0, -1200.0, -150.0) == pytest.approx(0.4)


def _cps(returns: list[float]) -> list[dict[str, Any]]:
    return [{"step": 1000 * i, "return": r} for i, r in enumerate(returns)]


@pytest.mark.parametrize(
    "returns, medium, in_range",
    [
        ([0, 30, 45, 38, 100], 3, True),  # 0.38 is nearest 0.4 inside [1/3, 1/2]
        ([0, 34, 47, 100], 1, True),
        ([0, 20, 36, 50, 100], 2, True),  # 0.36 and 0.50 are in the band; 0.20 is not
        ([0, 25, 60, 100], 1, False),  # nothing in the band: nearest overall, and said so
        ([0, 10, 90, 100], 1, False),
        ([100, 0, 30], 2, False),  # 0.30 is just outside the band
    ],
)
def test_select_medium(returns: list[float], medium: int, in_range: bool) -> None:
    assert B.select_medium(_cps(returns), 0.0, 100.0) == (medium, in_range)


def test_select_medium_on_negative_returns() -> None:
    # Pendulum-like: random -1200, expert -150; -851 is 0.33, -646 is 0.53, -780 is 0.40
    assert B.select_medium(_cps([-1500, -1000, -851, -780, -646, -200]), -1200, -150) == (3, True)


def test_select_expert_prefers_the_later_of_equal_bests() -> None:
    assert B.select_expert(_cps([10, 500, 300, 500, 200])) == 3


@pytest.mark.parametrize(
    "steps, medium, total, expected",
    [
        ([0, 1000, 2000, 3000], 2, 10, [5, 5]),
        ([0, 1000, 3000, 4000], 2, 9, [3, 6]),
        ([0, 512, 1024, 2048, 4096], 3, 100, [25, 25, 50]),
        ([0, 1000, 2000], 0, 7, [7]),  # medium is the first checkpoint: it alone
        ([0, 1, 2, 3], 3, 2, [1, 1, 0]),  # rounding by largest remainder, the earlier first
    ],
)
def test_replay_shares(steps: list[int], medium: int, total: int, expected: list[int]) -> None:
    shares = B.replay_shares(steps, medium, total)
    assert shares == expected and sum(shares) == total


def test_behaviour_defaults() -> None:
    assert behaviour.behaviour_defaults("CartPole-v1", True).algo == "ppo"
    assert behaviour.behaviour_defaults("Pendulum-v1", False).algo == "sac"
    hopper = behaviour.behaviour_defaults("Hopper-v5", False)
    assert (hopper.steps, hopper.size) == (1_000_000, 1_000_000)
    assert behaviour.behaviour_defaults("LunarLander-v3", True).algo == "ppo"
    assert behaviour.behaviour_defaults("Reacher-v5", False).algo == "sac"
    short = behaviour.behaviour_defaults("CartPole-v1", True, steps=4000)
    assert (
        short.steps == 4000
        and short.eval_every == 200
        and short.params == behaviour.ENV_DEFAULTS["CartPole-v1"].params
    )


# -- collection ------------------------------------------------------------------------------------------


def _balance(obs: np.ndarray) -> np.ndarray:
    """A linear CartPole controller that reaches 500 (push towards where the pole falls)."""
    return (obs @ np.array([0.0, 0.0, 1.0, 0.5]) > 0).astype(np.int64)


def test_collect_keeps_whole_episodes_in_order_and_marks_the_cut() -> None:
    rng = np.random.default_rng(0)
    c = rollouts.collect("CartPole-v1", {}, lambda obs: rng.integers(0, 2, len(obs)), 300, seed=5, n_envs=4)
    assert len(c.observations) == len(c.next_observations) == len(c.rewards) == 300
    assert c.actions.dtype == np.int64 and c.observations.dtype == np.float32
    assert not (c.terminals & c.timeouts).any()
    assert c.timeouts[-1] or c.terminals[-1]  # the last transition always ends an episode
    ends = np.flatnonzero(c.terminals | c.timeouts)
    starts = np.r_[0, ends[:-1] + 1]
    inner = np.ones(300, bool)
    inner[ends] = False
    # inside an episode, the next observation is the next row's observation
    np.testing.assert_array_equal(c.next_observations[:-1][inner[:-1]], c.observations[1:][inner[:-1]])
    # random CartPole episodes terminate (the pole falls); the one cut at 300 is a timeout, not a return
    assert c.terminals[ends[:-1]].all() and len(c.returns) in (len(ends), len(ends) - 1)
    assert c.returns == [float(e - s + 1) for s, e in zip(starts, ends)][: len(c.returns)]


def test_collect_marks_time_limits_as_timeouts() -> None:
    c = rollouts.collect("CartPole-v1", {}, _balance, 1000, seed=0, n_envs=2)
    assert c.timeouts.sum() == 2 and not c.terminals.any()  # two 500-step episodes, cut by the time limit
    assert c.returns == [500.0, 500.0]


def test_small_collections_are_whole_episodes_not_fragments() -> None:
    """Few transitions: one env, so the data is whole episodes plus one cut (not 8 parallel fragments)."""
    assert rollouts.collect_envs(250) == 1 and rollouts.collect_envs(100_000) == rollouts.COLLECT_ENVS
    rng = np.random.default_rng(0)
    c = rollouts.collect(
        "Pendulum-v1", {}, lambda obs: rng.uniform(-2, 2, (len(obs), 1)).astype(np.float32), 250, seed=0
    )
    assert np.flatnonzero(c.timeouts).tolist() == [199, 249] and len(c.returns) == 1
    assert c.actions.shape == (250, 1) and c.actions.dtype == np.float32


def test_episode_returns_are_seeded() -> None:
    seeds = [1, 2, 3]
    rng = np.random.default_rng(0)
    a = rollouts.episode_returns("CartPole-v1", {}, _balance, seeds)
    assert (a == 500).all()
    r1 = rollouts.episode_returns("CartPole-v1", {}, lambda o: rng.integers(0, 2, len(o)), seeds)
    rng = np.random.default_rng(0)
    assert (
        r1 == rollouts.episode_returns("CartPole-v1", {}, lambda o: rng.integers(0, 2, len(o)), seeds)
    ).all()


# -- the HDF5 file, d3rlpy -------------------------------------------------------------------------------


@pytest.mark.parametrize("discrete", [True, False])
def test_hdf5_round_trip_and_d3rlpy_loads_the_same_file(tmp_path: Path, discrete: bool) -> None:
    data = _toy(discrete, [5, 1, 7, 4], [True, False, True, False], cut_last=True)
    path = tmp_path / "toy.hdf5"
    write_hdf5(path, data)
    assert not list(tmp_path.glob("*.tmp"))
    back = read_hdf5(path)
    for k in ("observations", "actions", "rewards", "terminals", "timeouts", "next_observations"):
        np.testing.assert_array_equal(getattr(back, k), getattr(data, k))
    assert back.meta == data.meta and back.references == (1.0, 3.0)

    buf = _load_d3rlpy(path)
    ends = data.episode_ends()
    assert len(ends) == 4
    # d3rlpy drops the last step of an episode that did not terminate (it has no next observation), and so
    # an episode of one such step altogether (as it does with its own files)
    assert buf.transition_count == 5 + 0 + 7 + 3
    spans = [(s, e) for s, e in zip(np.r_[0, ends[:-1] + 1], ends + 1) if e - s > 1 or data.terminals[e - 1]]
    assert buf.size() == len(spans) == 3
    for ep, (s, e) in zip(buf.episodes, spans):
        np.testing.assert_array_equal(ep.observations, data.observations[s:e])
        np.testing.assert_array_equal(ep.rewards, data.rewards[s:e, None])
        actions = np.asarray(data.actions[s:e]).reshape(e - s, -1)
        np.testing.assert_array_equal(ep.actions.reshape(e - s, -1), actions)
        assert bool(ep.terminated) == bool(data.terminals[e - 1])
    assert buf.dataset_info.action_space.name == ("DISCRETE" if discrete else "CONTINUOUS")


def test_to_d3rlpy_counts_and_action_size() -> None:
    data = _toy(True, [5, 3, 4], [True, False, True])
    ds = to_d3rlpy(data)
    assert ds.size() == 3 and ds.transition_count == 5 + 2 + 4
    assert ds.dataset_info.action_size == 5  # from the metadata, not the largest action present (3)


def test_d4rl_file_without_metadata_or_timeouts_reads(tmp_path: Path) -> None:
    import h5py

    path = tmp_path / "d4rl.hdf5"
    with h5py.File(path, "w") as f:
        f["observations"] = np.zeros((6, 2), np.float32)
        f["actions"] = np.zeros((6, 1), np.float32)
        f["rewards"] = np.arange(6, dtype=np.float32)
        f["terminals"] = np.array([0, 0, 1, 0, 0, 0], bool)
    data = load_dataset("mine", str(path))
    assert data.meta == {} and data.next_observations is None
    assert data.episode_returns().tolist() == [3.0, 12.0]
    row = list_datasets(tmp_path)[0]
    assert (row["name"], row["transitions"], row["episodes"], row["mean_return"]) == ("d4rl", 6, 2, 7.5)


def test_load_dataset_names_the_missing_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLBENCH_DATASETS", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="rlbench datasets build CartPole-v1 --level medium-replay"):
        load_dataset("CartPole-v1-medium-replay")
    assert dataset_path("x", "minari:a/b-v0").parts[-2:] == ("a", "b-v0")


# -- Minari ----------------------------------------------------------------------------------------------


def test_minari_export_opens_in_minari_and_reads_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import minari

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    data = _toy(False, [5, 1, 7, 4], [True, False, True, False])
    data.meta["env_id"] = "Pendulum-v1"  # 3 observations, one action
    data.actions = data.actions[:, :1]
    folder = write_minari(data, "rlbench/toy-v0")
    ds = minari.load_dataset("rlbench/toy-v0")
    assert (ds.total_episodes, ds.total_steps) == (4, 17)
    ep = ds[2]
    assert ep.observations.shape == (8, 3) and ep.terminations[-1] and not ep.truncations.any()
    assert ds[1].truncations.tolist() == [True] and ds.spec.env_spec.id == "Pendulum-v1"
    assert (ds.storage.metadata["ref_min_score"], ds.storage.metadata["ref_max_score"]) == (1.0, 3.0)

    for back in (
        read_minari(folder),
        load_dataset("toy", "minari:rlbench/toy-v0"),
        load_dataset("t", str(folder)),
    ):
        for k in ("observations", "actions", "rewards", "terminals", "timeouts", "next_observations"):
            np.testing.assert_array_equal(getattr(back, k), getattr(data, k))
        assert back.references == (1.0, 3.0) and back.meta["behaviour"] == data.meta["behaviour"]
        assert back.meta["source"] == "minari" and back.env_id == "Pendulum-v1"
    with pytest.raises(ValueError, match="already exists"):
        write_minari(data, "rlbench/toy-v0")


def test_reads_a_minari_dataset_written_by_minari(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dataset made with Minari's own API (not rlbench's), whose last episode was cut short."""
    import minari
    from minari.data_collector import EpisodeBuffer

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    eps = []
    for i, (n, term) in enumerate([(3, True), (4, False)]):
        eps.append(
            EpisodeBuffer(
                id=i,
                observations=np.arange((n + 1) * 4, dtype=np.float32).reshape(n + 1, 4),
                actions=np.ones(n, np.int64),
                rewards=np.ones(n),
                terminations=[False] * (n - 1) + [term],
                truncations=[False] * n,
                infos={},
            )
        )
    minari.create_dataset_from_buffers(
        "theirs/cart-v0",
        eps,
        env="CartPole-v1",
        algorithm_name="x",
        author="a",
        author_email="b",
        code_permalink="c",
        description="d",
    )
    data = load_dataset("theirs", "minari:theirs/cart-v0")
    assert len(data) == 7 and data.discrete and data.actions.dtype == np.int64
    assert data.terminals.tolist() == [0, 0, 1, 0, 0, 0, 0] and data.timeouts.tolist() == [
        0,
        0,
        0,
        0,
        0,
        0,
        1,
    ]
    assert data.env_id == "CartPole-v1" and data.references is None and data.meta["n_actions"] == 2
    np.testing.assert_array_equal(
        data.next_observations[:3], np.arange(4, 16, dtype=np.float32).reshape(3, 4)
    )


# -- policy checkpoints of the behaviour learners ---------------------------------------------------------


def _train_and_snapshot(
    tmp_path: Path, algo: str, env_id: str, steps: int, params: dict[str, Any]
) -> list[Any]:
    from rlbench_cli.algos import get_algorithm
    from rlbench_cli.algos.base import RunContext
    from rlbench_cli.sink import ShardSink
    from rlbench_cli.suite.grid import RunSpec

    budget = {"steps": steps, "eval_every": steps, "eval_episodes": 2, "timeout": None}
    spec = RunSpec(
        suite="t",
        algo=algo,
        algo_name=algo,
        params=params,
        env_id=env_id,
        env_kwargs={},
        seed=0,
        budget=budget,
    )
    snaps: list[Any] = []

    def keep(step: int, ret: float, policy: Any) -> None:
        path = tmp_path / f"{algo}-{step}.ckpt"
        policy.save(path)
        snaps.append(
            (path, policy, policy(np.zeros((1, *gym.make(env_id).observation_space.shape), np.float32)))
        )

    sink = ShardSink(tmp_path / "m", background=False)
    get_algorithm(algo)().train(RunContext(spec=spec, sink=sink, on_evaluate=keep))
    sink.close()
    return snaps


@pytest.mark.parametrize(
    "env_id, params",
    [
        ("CartPole-v1", {"num_envs": 2, "num_steps": 64}),
        ("Pendulum-v1", {"num_envs": 2, "num_steps": 64, "normalize_obs": True}),
    ],
)
def test_ppo_policy_saves_and_loads(tmp_path: Path, env_id: str, params: dict[str, Any]) -> None:
    from rlbench_cli.algos.ppo import load_policy

    snaps = _train_and_snapshot(tmp_path, "ppo", env_id, 256, params)
    assert len(snaps) == 2  # steps 0 and 256
    obs = np.random.default_rng(1).standard_normal((16, *gym.make(env_id).observation_space.shape)) * 0.1
    final = snaps[-1][1]
    loaded = load_policy(snaps[-1][0])
    np.testing.assert_array_equal(loaded(obs), final(obs))
    rng_a, rng_b = np.random.default_rng(3), np.random.default_rng(3)
    np.testing.assert_array_equal(loaded.sample(obs, rng_a), final.sample(obs, rng_b))
    first = load_policy(snaps[0][0])  # the step-0 snapshot is the step-0 policy, not the trained one
    np.testing.assert_array_equal(first(np.zeros((1, obs.shape[1]), np.float32)), snaps[0][2])
    space = gym.make(env_id).action_space
    samples = loaded.sample(np.repeat(obs[:1], 200, 0))
    assert all(space.contains(a.item() if a.ndim == 0 else a) for a in samples)
    assert len(np.unique(samples, axis=0)) > 1  # stochastic


def test_sac_policy_saves_and_loads(tmp_path: Path) -> None:
    from rlbench_cli.algos.d3rlpy_online import load_policy

    tiny = {"hidden_units": [16, 16], "batch_size": 16, "update_start_step": 50, "logging_steps": 100}
    snaps = _train_and_snapshot(tmp_path, "sac", "Pendulum-v1", 100, tiny)
    obs = np.random.default_rng(0).standard_normal((8, 3)).astype(np.float32)
    loaded = load_policy(snaps[-1][0])
    np.testing.assert_allclose(loaded(obs), snaps[-1][1](obs), rtol=1e-6)
    samples = loaded.sample(np.repeat(obs[:1], 50, 0))
    assert samples.shape == (50, 1) and np.abs(samples).max() <= 2.0 and samples.std() > 0


# -- the builder, on a cached behaviour run (checkpoints are stand-in policies: no training) -------------


class _Stand:
    """A CartPole policy between uniform random (k = 0) and the linear controller (large k)."""

    def __init__(self, k: float):
        self.k = k

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return _balance(obs) if self.k else np.zeros(len(obs), np.int64)

    def sample(self, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        p = 1 / (1 + np.exp(-self.k * (obs @ np.array([0.0, 0.0, 1.0, 0.5]))))
        return (rng.random(len(obs)) < p).astype(np.int64)


@pytest.fixture
def cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A behaviour run of CartPole-v1 in the cache: five checkpoints whose eval returns climb to 500."""
    folder = behaviour.behaviour_folder(tmp_path, "CartPole-v1", {}, "ppo", 0)
    folder.mkdir(parents=True)
    ks = {"0": 0.0, "1000": 0.5, "2000": 5.0, "3000": 20.0, "4000": 1000.0}  # returns ~22, 27, 150, 325, 500
    returns = [22.0, 40.0, 210.0, 400.0, 500.0]
    cfg = behaviour.ENV_DEFAULTS["CartPole-v1"]
    index = {
        "env_id": "CartPole-v1",
        "env_kwargs": {},
        "algo": "ppo",
        "params": cfg.params,
        "steps": cfg.steps,
        "eval_every": 1000,
        "eval_episodes": 10,
        "seed": 0,
        "train_seconds": 1.0,
        "checkpoints": [
            {"step": int(s), "return": r, "file": f"checkpoints/{s}"} for s, r in zip(ks, returns)
        ],
    }
    (folder / "index.json").write_text(json.dumps(index))
    monkeypatch.setattr(B, "load_checkpoint", lambda algo, path, device="cpu": _Stand(ks[Path(path).name]))
    return tmp_path


def test_levels_from_a_cached_behaviour_run(cached: Path) -> None:
    said: list[str] = []
    out = {
        lv: B.build_dataset("CartPole-v1", lv, size=2000, root=cached, progress=said.append)
        for lv in ("random", "medium", "expert", "medium-expert")
    }
    out["medium-replay"] = B.build_dataset("CartPole-v1", "medium-replay", root=cached)
    assert not any("training" in s for s in said) and any("reusing" in s for s in said)
    data = {lv: read_hdf5(p) for lv, p in out.items()}
    refs = data["random"].references
    assert (
        refs is not None and 15 < refs[0] < 30 and refs[1] == 500.0
    )  # the expert checkpoint: 500 every time
    for lv, d in data.items():
        assert d.meta["ref_random"] == refs[0] and d.meta["ref_expert"] == refs[1], lv
        assert d.meta["level"] == lv and d.meta["behaviour"]["algo"] == "ppo"
        assert d.meta["size"] == len(d) and d.meta["episodes"] == len(d.episode_ends())
        assert d.timeouts[-1] or d.terminals[-1]
    assert [len(data[lv]) for lv in ("random", "medium", "expert", "medium-expert")] == [2000] * 4
    medium = data["medium"].meta["policy"]
    assert (medium["step"], medium["medium_in_range"]) == (2000, True)
    assert data["expert"].meta["policy"]["step"] == 4000
    assert data["medium-expert"].meta["policy"]["medium"]["step"] == 2000
    # medium-replay: the checkpoints before medium (steps 0 and 1000), 1000 transitions each by default
    replay = data["medium-replay"].meta["policy"]["checkpoints"]
    assert [c["step"] for c in replay] == [0, 1000] and len(data["medium-replay"]) == 2000
    mean = {lv: d.meta["mean_return"] for lv, d in data.items()}
    assert mean["random"] < mean["medium"] < mean["expert"]
    assert mean["medium"] < mean["medium-expert"] < mean["expert"]
    assert data["medium"].meta["normalized_mean_return"] == pytest.approx(
        100 * (mean["medium"] - refs[0]) / (refs[1] - refs[0])
    )
    # the expert's 100 reference episodes are stored once, with the behaviour run
    index = json.loads(
        (behaviour.behaviour_folder(cached, "CartPole-v1", {}, "ppo", 0) / "index.json").read_text()
    )
    assert index["references"]["random"] == refs[0] and index["references"]["expert_step"] == 4000
    # a second build keeps the file; d3rlpy loads what was built
    assert B.build_dataset("CartPole-v1", "medium", root=cached, size=10) == out["medium"]
    assert len(read_hdf5(out["medium"])) == 2000
    buf = _load_d3rlpy(out["medium"])
    assert buf.size() == data["medium"].meta["episodes"]
    rows = {r["name"]: r for r in list_datasets(cached)}
    assert set(rows) == {f"CartPole-v1-{lv}" for lv in out}
    assert rows["CartPole-v1-expert"]["normalized_mean_return"] == pytest.approx(
        data["expert"].meta["normalized_mean_return"]
    )
    shown = describe("CartPole-v1-medium", cached)
    assert shown["metadata"]["policy"]["step"] == 2000 and shown["arrays"]["actions"]["dtype"] == "int64"


def test_cached_behaviour_of_another_budget_needs_force(cached: Path) -> None:
    with pytest.raises(UsageError, match="trained for 50000 steps, not --behaviour-steps 4000: add --force"):
        B.build_dataset("CartPole-v1", "medium", root=cached, behaviour_steps=4000)


def test_build_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLBENCH_DATASETS", str(tmp_path))
    with pytest.raises(UsageError, match="--level 'hard': choose one of random, medium"):
        B.build_dataset("CartPole-v1", "hard")
    with pytest.raises(UnknownName, match="did you mean CartPole-v1"):
        B.build_dataset("CartPol-v1", "medium")
    with pytest.raises(UsageError, match="MountainCar-v0: no learned levels"):
        B.build_dataset("MountainCar-v0", "expert")
    with pytest.raises(UsageError, match="Taxi-v3: rlbench builds datasets for Box observations"):
        B.build_dataset("Taxi-v3", "random")
    assert not any(tmp_path.iterdir())


def test_random_level_needs_no_behaviour_where_none_learns(tmp_path: Path) -> None:
    path = B.build_dataset("MountainCar-v0", "random", size=500, root=tmp_path)
    d = read_hdf5(path)
    assert len(d) == 500 and d.references is None and d.meta["policy"] == {"kind": "uniform random"}
    assert "no expert reference" in d.meta["references_note"]
    assert not (tmp_path / "behaviour").exists()
    assert set(d.actions.tolist()) == {0, 1, 2}


def test_ensure_datasets(tmp_path: Path) -> None:
    from rlbench_cli.suite.models import DatasetSpec

    specs = [DatasetSpec(name="MountainCar-v0-random")]
    assert datagen.ensure_datasets(specs, root=tmp_path) == [tmp_path / "MountainCar-v0-random.hdf5"]
    mtime = (tmp_path / "MountainCar-v0-random.hdf5").stat().st_mtime_ns
    assert datagen.ensure_datasets(specs, root=tmp_path) == [tmp_path / "MountainCar-v0-random.hdf5"]
    assert (tmp_path / "MountainCar-v0-random.hdf5").stat().st_mtime_ns == mtime  # kept, not rebuilt
    with pytest.raises(UnknownName, match="dataset 'mine': no file or folder .*nope.hdf5; check its path"):
        datagen.ensure_datasets(
            [DatasetSpec(name="mine", path=str(tmp_path / "nope.hdf5"), env="CartPole-v1")]
        )
