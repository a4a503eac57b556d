"""The d3rlpy offline adapters (``bc``, ``cql``, ``discrete_cql``, ``iql``, ``td3_plus_bc``, ``awac``,
``bcq``, ``crr``, ``decision_transformer``): tiny real training runs on both action types, parameters,
batches equal to d3rlpy's own, batched Decision Transformer evaluation, learning checks, one run through
the runner.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from offline_helpers import (
    Metrics,
    cartpole_controller,
    offline_spec,
    pendulum_controller,
    read_metrics,
    rollouts,
    train,
)

pytest.importorskip("d3rlpy")

from rlbench_cli.algos import get_algorithm  # noqa: E402
from rlbench_cli.algos.d3rlpy_offline import (  # noqa: E402
    BC,
    BCQ,
    CQL,
    CRR,
    IQL,
    D3rlpyOffline,
    DecisionTransformer,
    DiscreteCQL,
    TD3PlusBC,
    TransformerPolicy,
    _TransitionArrays,
    to_mdp_dataset,
)
from rlbench_cli.algos.offline import TrajectoryWindows  # noqa: E402
from rlbench_cli.algos.registry import offline_names  # noqa: E402
from rlbench_cli.datasets.data import OfflineData  # noqa: E402

DT_TINY = {"context_size": 5, "num_layers": 1, "num_heads": 1}
TINY = {"hidden_units": [16], "batch_size": 16, "logging_steps": 10}


@pytest.fixture(autouse=True)
def one_torch_thread() -> Any:
    """Tiny networks: one thread is fastest, and several spin badly on a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``tmp_path``, also the cwd (in a subfolder that must stay empty: d3rlpy writes no logs or models)."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return tmp_path


@pytest.fixture(scope="module")
def cartpole() -> OfflineData:
    return rollouts("CartPole-v1", cartpole_controller, episodes=3, epsilon=0.3)


@pytest.fixture(scope="module")
def pendulum() -> OfflineData:
    return rollouts("Pendulum-v1", pendulum_controller, episodes=3, epsilon=0.3)


def _finite(values: list[tuple[int, float]]) -> bool:
    return bool(values) and all(math.isfinite(v) for _, v in values)


def _losses(m: Metrics) -> dict[str, list[tuple[int, float]]]:
    return {k: v for k, v in m.items() if k.startswith("train/loss/")}


# -- every algorithm, both action types -------------------------------------------------------------------

CASES = [
    *[(name, "CartPole-v1") for name in ("bc", "cql", "discrete_cql", "bcq", "decision_transformer")],
    *[
        (name, "Pendulum-v1")
        for name in ("bc", "cql", "iql", "td3_plus_bc", "awac", "bcq", "crr", "decision_transformer")
    ],
]


def test_every_offline_algorithm_is_covered() -> None:
    text = {"filtered_bc", "mc_returns", "ilql", "text_world_model"}  # tests/unit/test_text_algos.py
    assert {name for name, _ in CASES} | {"hf_decision_transformer"} | text == offline_names()


@pytest.mark.parametrize("name, env_id", CASES, ids=[f"{n}-{e.split('-')[0]}" for n, e in CASES])
def test_trains_evaluates_and_logs(
    in_tmp: Path, cartpole: OfflineData, pendulum: OfflineData, name: str, env_id: str
) -> None:
    data = cartpole if env_id == "CartPole-v1" else pendulum
    params = {**TINY, **(DT_TINY if name == "decision_transformer" else {})}
    ctx, m = train(get_algorithm(name)(), offline_spec(name, env_id, 20, params, every=10), data, in_tmp)
    assert [s for s, _ in m["eval/return"]] == [0, 10, 20]
    assert ctx.last_eval == m["eval/return"][-1][1]
    low, high = (1, 500) if env_id == "CartPole-v1" else (-2000, 0)
    assert all(low <= v <= high for _, v in m["eval/return"])
    losses = _losses(m)
    assert losses and all(_finite(v) and [s for s, _ in v] == [10, 20] for v in losses.values()), losses
    assert "eval/normalized_return" not in m  # the dataset has no reference returns
    assert m["sys/sps_overall"][0][0] == 20
    assert list((in_tmp / "cwd").iterdir()) == []


def test_discrete_datasets_pick_the_discrete_variant(cartpole: OfflineData, pendulum: OfflineData) -> None:
    import d3rlpy

    expected = {
        BC: (d3rlpy.algos.BCConfig, d3rlpy.algos.DiscreteBCConfig),
        CQL: (d3rlpy.algos.CQLConfig, d3rlpy.algos.DiscreteCQLConfig),
        BCQ: (d3rlpy.algos.BCQConfig, d3rlpy.algos.DiscreteBCQConfig),
        DecisionTransformer: (
            d3rlpy.algos.DecisionTransformerConfig,
            d3rlpy.algos.DiscreteDecisionTransformerConfig,
        ),
    }
    for adapter, (continuous, discrete) in expected.items():
        for data, env_id, cls in ((pendulum, "Pendulum-v1", continuous), (cartpole, "CartPole-v1", discrete)):
            is_discrete = cls is discrete
            config = adapter().make_config(
                *adapter.split_params({}, is_discrete), is_discrete, gym.make(env_id), data
            )
            assert type(config) is cls, (adapter.name, env_id)
    # each variant has its own defaults: d3rlpy's
    assert CQL.config_params(False)["batch_size"] == 256 and CQL.config_params(True)["batch_size"] == 32
    assert BC.config_params(False)["policy_type"] == "deterministic" and "beta" in BC.config_params(True)
    assert DecisionTransformer.config_params(True)["position_encoding_type"] == "global"
    assert DecisionTransformer.config_params(False)["position_encoding_type"] == "simple"


@pytest.mark.parametrize(
    "adapter", [IQL(), TD3PlusBC(), CRR(), get_algorithm("awac")()], ids=lambda a: a.name
)
def test_continuous_only_algorithms_reject_discrete_datasets(
    in_tmp: Path, cartpole: OfflineData, adapter: D3rlpyOffline
) -> None:
    with pytest.raises(ValueError, match=rf"^{adapter.name} needs a continuous action space, but dataset "
                       r"'CartPole-v1-test' has a discrete one \(Discrete\(2\)\)$"):  # fmt: skip
        train(adapter, offline_spec(adapter.name, "CartPole-v1", 10, {}), cartpole, in_tmp)


def test_discrete_cql_rejects_continuous_datasets(in_tmp: Path, pendulum: OfflineData) -> None:
    with pytest.raises(ValueError, match=r"^discrete_cql needs a discrete action space.*Box") as e:
        train(DiscreteCQL(), offline_spec("discrete_cql", "Pendulum-v1", 10, {}), pendulum, in_tmp)
    assert "\n" not in str(e.value)


def test_dataset_that_does_not_fit_its_env_is_a_clear_error(in_tmp: Path, cartpole: OfflineData) -> None:
    with pytest.raises(ValueError, match=r"has discrete actions, but its env's action space is Box"):
        train(BC(), offline_spec("bc", "Pendulum-v1", 10, {}), cartpole, in_tmp)
    with pytest.raises(ValueError, match=r"observations of shape \(4,\), its env \(6,\)"):
        train(BC(), offline_spec("bc", "Acrobot-v1", 10, {}), cartpole, in_tmp)


# -- parameters -------------------------------------------------------------------------------------------


def test_params_split_between_config_and_run_settings() -> None:
    cfg, settings = CQL.split_params(
        {
            "critic_learning_rate": 1,
            "conservative_weight": 10,
            "hidden_units": [8],
            "replay_buffer": "d3rlpy",
        },
        False,
    )
    assert cfg == {"critic_learning_rate": 1.0, "conservative_weight": 10.0}
    assert isinstance(cfg["critic_learning_rate"], float)
    assert settings["hidden_units"] == [8] and settings["replay_buffer"] == "d3rlpy"
    assert settings["observation_scaler"] == "none" and settings["logging_steps"] == 1000  # defaults
    assert "target_return" not in settings  # transformer-only
    # d3rlpy's defaults, field by field
    assert IQL.config_params(False)["expectile"] == 0.7 and TD3PlusBC.config_params(False)["alpha"] == 2.5
    assert DiscreteCQL.config_params(True)["target_update_interval"] == 8000
    assert TD3PlusBC.run_params()["observation_scaler"] == "standard"  # as d3rlpy's reproduction
    dt_cfg, dt_settings = DecisionTransformer.split_params({"position_encoding_type": "global"}, False)
    from d3rlpy import PositionEncodingType

    assert dt_cfg["position_encoding_type"] is PositionEncodingType.GLOBAL
    assert dt_settings["reward_scale"] == 0.001 and dt_settings["target_return"] is None


def test_config_gets_scalers_encoders_and_timestep_range(pendulum: OfflineData) -> None:
    env = gym.make("Pendulum-v1")
    td3 = TD3PlusBC().make_config(
        *TD3PlusBC.split_params({"hidden_units": [8, 4]}, False), False, env, pendulum
    )
    assert td3.actor_encoder_factory.hidden_units == td3.critic_encoder_factory.hidden_units == [8, 4]
    assert np.allclose(td3.action_scaler.minimum, -2.0) and np.allclose(td3.action_scaler.maximum, 2.0)
    assert np.allclose(td3.observation_scaler.mean, pendulum.observations.mean(axis=0), atol=1e-5)
    iql = IQL().make_config(*IQL.split_params({"hidden_units": [8]}, False), False, env, pendulum)
    assert iql.observation_scaler is None and iql.value_encoder_factory.hidden_units == [8]
    dt = DecisionTransformer().make_config(*DecisionTransformer.split_params({}, False), False, env, pendulum)
    assert dt.max_timestep == 1000 and dt.reward_scaler.multiplier == 0.001  # d3rlpy's default is enough here
    # the reproductions' linear state embedding of width 128, not d3rlpy's default [256, 256] MLP
    enc = dt.encoder_factory
    assert enc.hidden_units == [128] and enc.exclude_last_activation
    dt256 = DecisionTransformer().make_config(
        *DecisionTransformer.split_params({"hidden_units": [256, 256]}, False), False, env, pendulum
    )
    assert (
        dt256.encoder_factory.hidden_units == [256, 256] and not dt256.encoder_factory.exclude_last_activation
    )
    settings = DecisionTransformer.split_params({}, False)[1]
    long_env = gym.make("Pendulum-v1", max_episode_steps=1500)  # the embedding must cover its timesteps
    assert DecisionTransformer().make_config({}, settings, False, long_env, pendulum).max_timestep == 1501
    with pytest.raises(
        ValueError, match=r"max_timestep \(100\) must exceed the longest episode \(200 steps\)"
    ):
        DecisionTransformer().make_config({"max_timestep": 100}, settings, False, env, pendulum)


def test_unknown_param_is_named() -> None:
    with pytest.raises(
        ValueError, match=r"for bc \(BCConfig\): bogus_key; valid:.*hidden_units.*policy_type"
    ):
        BC.split_params({"bogus_key": 1, "learning_rate": 1e-3}, False)
    with pytest.raises(ValueError, match=r"for bc \(DiscreteBCConfig\): policy_type; valid:.*beta"):
        BC.split_params({"policy_type": "stochastic"}, True)  # a continuous-only field of d3rlpy's BC
    with pytest.raises(ValueError, match="target_return"):  # Decision Transformer only
        CQL.split_params({"target_return": 1.0}, False)
    with pytest.raises(ValueError, match="encoder_factory"):  # factories are not settable from a suite
        CQL.split_params({"actor_encoder_factory": "vector"}, False)
    with pytest.raises(ValueError, match=r"replay_buffer must be one of array, d3rlpy; got 'fifo'"):
        BC.split_params({"replay_buffer": "fifo"}, False)
    with pytest.raises(ValueError, match=r"observation_scaler must be one of standard, none"):
        BC.split_params({"observation_scaler": "pixel"}, False)
    for adapter in (CQL, IQL, CRR, BCQ, DecisionTransformer):
        with pytest.raises(ValueError, match=rf"for {adapter.name} \(.*\): bogus_key; valid:") as e:
            adapter.split_params({"bogus_key": 1}, False)
        assert "\n" not in str(e.value)


def test_unknown_param_fails_the_run(in_tmp: Path, cartpole: OfflineData) -> None:
    with pytest.raises(ValueError, match="lerning_rate"):
        train(BC(), offline_spec("bc", "CartPole-v1", 10, {"lerning_rate": 1e-3}), cartpole, in_tmp)


# -- batches: the same as d3rlpy's ------------------------------------------------------------------------


def _mixed_episodes() -> OfflineData:
    """Episodes ending in terminals and in timeouts, a step with both flags, and a last step with neither."""
    rng = np.random.default_rng(0)
    n = 60
    terminals, timeouts = np.zeros(n, bool), np.zeros(n, bool)
    terminals[[4, 20, 33]] = True
    timeouts[[11, 20, 45, 50]] = True  # 20: both flags (the terminal wins); 50: a one-step cut-off episode
    return OfflineData(
        observations=rng.normal(size=(n, 3)).astype(np.float32),
        actions=rng.uniform(-1, 1, size=(n, 2)).astype(np.float32),
        rewards=rng.normal(size=n).astype(np.float32),
        terminals=terminals,
        timeouts=timeouts,
        meta={"discrete": False},
    )


def _rows(*arrays: np.ndarray) -> list[tuple[float, ...]]:
    flat = [np.asarray(a, np.float32).reshape(len(a), -1) for a in arrays]
    return sorted(tuple(r) for r in np.concatenate(flat, axis=1).tolist())


def test_array_transitions_match_d3rlpy() -> None:
    from d3rlpy.dataset import BasicTransitionPicker

    data = _mixed_episodes()
    mdp = to_mdp_dataset(data, discrete=False, action_size=2)
    assert sum(ep.size() for ep in mdp.episodes) == len(
        data
    )  # nothing dropped, the trailing episode included
    picker = BasicTransitionPicker()
    ts = [picker(ep, i) for ep in mdp.episodes for i in range(ep.transition_count)]
    ours = _TransitionArrays(data, data.actions)
    assert len(ours._pool) == mdp.transition_count == len(ts)
    np.random.seed(0)
    batch = ours.sample(4000)  # every transition, many times over
    fields = ("observation", "action", "reward", "next_observation", "next_action", "terminal")
    expected = _rows(*(np.stack([getattr(t, k) for t in ts]) for k in fields))
    got = _rows(*(getattr(batch, k) for k in ("observations", "actions", "rewards", "next_observations",
                                               "next_actions", "terminals")))  # fmt: skip
    assert sorted(set(got)) == sorted(set(expected))


def test_windows_match_d3rlpy_slicer() -> None:
    from d3rlpy.dataset import BasicTrajectorySlicer

    data = _mixed_episodes()
    mdp = to_mdp_dataset(data, discrete=False, action_size=2)
    windows = TrajectoryWindows(data, data.actions, all_ends=False)
    slicer = BasicTrajectorySlicer()
    offset, ends = 0, []
    for ep in mdp.episodes:
        for i in range(ep.transition_count):
            ends.append(offset + i)
            want = slicer(ep, i, 7)
            got = windows.windows(np.array([offset + i]), 7)
            assert np.allclose(got.observations[0], want.observations)
            assert np.allclose(got.actions[0], want.actions)
            assert np.allclose(got.rewards[0], want.rewards)
            assert np.allclose(got.returns_to_go[0], want.returns_to_go, atol=1e-5)
            assert np.array_equal(got.terminals[0], want.terminals)
            assert np.array_equal(got.masks[0], want.masks)
            assert np.array_equal(
                (got.timesteps[0] + 1) * got.masks[0], want.timesteps
            )  # d3rlpy counts from 1
        offset += ep.size()
    assert np.array_equal(windows.ends, ends)  # d3rlpy's transitions: the same steps end a window
    assert len(TrajectoryWindows(data, data.actions).ends) == len(data)


@pytest.mark.parametrize("name", ["bc", "decision_transformer"])
def test_d3rlpy_replay_buffer_trains(in_tmp: Path, cartpole: OfflineData, name: str) -> None:
    params = {**TINY, "replay_buffer": "d3rlpy", **(DT_TINY if name == "decision_transformer" else {})}
    _, m = train(get_algorithm(name)(), offline_spec(name, "CartPole-v1", 10, params), cartpole, in_tmp)
    assert [s for s, _ in m["eval/return"]] == [0, 10] and all(_finite(v) for v in _losses(m).values())


# -- Decision Transformer evaluation ----------------------------------------------------------------------


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_transformer_policy_matches_d3rlpy_wrapper_per_episode(
    cartpole: OfflineData, pendulum: OfflineData, env_id: str
) -> None:
    """Three episodes in lock-step through one batched policy take the actions d3rlpy's
    ``StatefulTransformerWrapper`` takes for each episode alone."""
    from d3rlpy.algos import GreedyTransformerActionSampler, IdentityTransformerActionSampler

    data, discrete = (cartpole, True) if env_id == "CartPole-v1" else (pendulum, False)
    env = gym.make(env_id)
    adapter = DecisionTransformer()
    cfg, settings = adapter.split_params({**DT_TINY, "hidden_units": [16], "context_size": 4}, discrete)
    algo = adapter.make_config(cfg, settings, discrete, env, data).create(device="cpu")
    algo.build_with_env(env)
    sampler = GreedyTransformerActionSampler() if discrete else IdentityTransformerActionSampler()
    policy = TransformerPolicy(algo, target_return=100.0, discrete=discrete)
    envs = [gym.make(env_id) for _ in range(3)]
    wrappers = [algo.as_stateful_wrapper(target_return=100.0, action_sampler=sampler) for _ in envs]
    obs = [e.reset(seed=i)[0] for i, e in enumerate(envs)]
    rewards = np.zeros(3)
    policy.reset(3)
    alive, compared = [0, 1, 2], 0
    for t in range(10):
        if not alive:
            break
        idx = np.array(alive)
        batched = policy.act(np.stack([obs[i] for i in alive]), rewards[idx], idx)
        still = []
        for j, i in enumerate(alive):
            alone = wrappers[i].predict(obs[i], float(rewards[i]))
            assert np.allclose(batched[j], alone, atol=1e-5), (t, i, batched[j], alone)
            compared += 1
            obs[i], rewards[i], term, trunc, _ = envs[i].step(batched[j].item() if discrete else batched[j])
            if not (term or trunc or (i == 0 and t == 3)):  # episode 0 leaves early: the others go on
                still.append(i)
        alive = still
    assert compared >= 12


def test_target_return_defaults_to_the_expert_reference(cartpole: OfflineData) -> None:
    from rlbench_cli.algos.offline import default_target_return

    assert default_target_return(cartpole) == cartpole.episode_returns().max()
    with_refs = dataclasses.replace(cartpole, meta={**cartpole.meta, "ref_expert": 321.0})
    assert default_target_return(with_refs) == 321.0
    policy = DecisionTransformer().make_policy(None, {"target_return": 42}, cartpole, True)
    assert isinstance(policy, TransformerPolicy) and policy._target == 42.0


# -- run control ------------------------------------------------------------------------------------------


def test_stop_event_ends_training_early(in_tmp: Path, cartpole: OfflineData) -> None:
    stop = threading.Event()
    stop.set()  # seen after the first update
    ctx, m = train(
        BC(), offline_spec("bc", "CartPole-v1", 1000, TINY, every=500), cartpole, in_tmp, stop=stop
    )
    assert [s for s, _ in m["eval/return"]] == [0, 1]
    assert [s for s, _ in m["train/loss/loss"]] == [1]


def test_same_seed_same_results(in_tmp: Path, pendulum: OfflineData) -> None:
    runs = [
        train(CQL(), offline_spec("cql", "Pendulum-v1", 20, TINY, every=10, seed=3), pendulum, in_tmp)[1]
        for _ in range(2)
    ]
    for name in ("eval/return", "train/loss/critic_loss", "train/loss/actor_loss"):
        assert runs[0][name] == runs[1][name], name


# -- learning ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cartpole_expert() -> OfflineData:
    """Ten episodes of the hand-written controller with 20% random actions: about 440 per episode."""
    return rollouts("CartPole-v1", cartpole_controller, episodes=10, epsilon=0.2)


def test_bc_learns_cartpole(in_tmp: Path, cartpole_expert: OfflineData) -> None:
    spec = offline_spec("bc", "CartPole-v1", 300, {"hidden_units": [64, 64]}, episodes=5)
    _, m = train(BC(), spec, cartpole_expert, in_tmp)
    (_, untrained), (_, trained) = m["eval/return"]
    assert untrained < 50 and trained >= 450, m["eval/return"]


def test_decision_transformer_learns_cartpole(in_tmp: Path, cartpole_expert: OfflineData) -> None:
    params = {"hidden_units": [64], "context_size": 10, "num_layers": 1, "num_heads": 1, "batch_size": 32}
    spec = offline_spec("decision_transformer", "CartPole-v1", 200, params, episodes=5)
    _, m = train(DecisionTransformer(), spec, cartpole_expert, in_tmp)
    (_, untrained), (_, trained) = m["eval/return"]
    assert untrained < 50 and trained >= 450, m["eval/return"]


def test_bc_learns_pendulum(in_tmp: Path) -> None:
    data = rollouts("Pendulum-v1", pendulum_controller, episodes=10, epsilon=0.2)  # about -200 per episode
    spec = offline_spec("bc", "Pendulum-v1", 1000, {"hidden_units": [64, 64]}, episodes=5)
    _, m = train(BC(), spec, data, in_tmp)
    (_, untrained), (_, trained) = m["eval/return"]
    assert untrained < -1000 and trained > -800, m["eval/return"]


# -- through the runner -----------------------------------------------------------------------------------


def test_runner_trains_from_an_hdf5_file_and_normalises(tmp_path: Path, cartpole: OfflineData) -> None:
    from rlbench_cli.datasets.hdf5 import write_hdf5
    from rlbench_cli.runner import run_one
    from rlbench_cli.suite.grid import RunSpec

    path = tmp_path / "cartpole-mine.hdf5"
    write_hdf5(
        path, dataclasses.replace(cartpole, meta={**cartpole.meta, "ref_random": 20.0, "ref_expert": 500.0})
    )
    spec = RunSpec(
        suite="t", algo="bc", algo_name="bc", params=TINY, env_id="CartPole-v1", env_kwargs={}, seed=0,
        budget={"steps": 20, "eval_every": 10, "eval_episodes": 2, "timeout": None},
        dataset="cartpole-mine", dataset_path=str(path),
    )  # fmt: skip
    folder = tmp_path / "run"
    result = run_one(spec, folder)
    assert result["status"] == "finished", result.get("error")
    m = read_metrics(folder / "metrics")
    assert [s for s, _ in m["eval/return"]] == [0, 10, 20]
    for (_, ret), (_, norm) in zip(m["eval/return"], m["eval/normalized_return"], strict=True):
        assert norm == pytest.approx(100 * (ret - 20) / 480)
    assert _finite(m["train/loss/loss"])
