"""The d3rlpy online adapters (``dqn``, ``double_dqn``, ``sac``, ``td3``, ``ddpg``): tiny real training runs,
parameter handling, the buffer.
"""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("d3rlpy")

from rlbench_cli.algos.base import RunContext  # noqa: E402
from rlbench_cli.algos.d3rlpy_online import (  # noqa: E402
    DDPG,
    DQN,
    SAC,
    TD3,
    D3rlpyOnline,
    DoubleDQN,
    _ArrayReplayBuffer,
)
from rlbench_cli.sink import ShardSink, list_shards  # noqa: E402
from rlbench_cli.suite.grid import RunSpec  # noqa: E402

TINY = {"hidden_units": [32, 32], "batch_size": 32, "update_start_step": 100, "logging_steps": 100}


def _spec(
    algo: str, env_id: str, steps: int, params: dict[str, Any], seed: int = 0, every: int = 500
) -> RunSpec:
    return RunSpec(
        suite="t",
        algo=algo,
        algo_name=algo,
        params=params,
        env_id=env_id,
        env_kwargs={},
        seed=seed,
        budget={"steps": steps, "eval_every": every, "eval_episodes": 2, "timeout": None},
    )


def _train(
    adapter: D3rlpyOnline, spec: RunSpec, tmp_path: Path, stop: threading.Event | None = None
) -> tuple[RunContext, dict[str, list[tuple[int, float]]]]:
    """Train in ``tmp_path`` (also the cwd, to catch stray files) and return the metrics by name."""
    shards = tmp_path / "shards"
    sink = ShardSink(shards, background=False)
    ctx = RunContext(spec=spec, sink=sink, stop_event=stop)
    try:
        adapter.train(ctx)
    finally:
        sink.close()
    table = pa.concat_tables([pq.read_table(p) for p in list_shards(shards)]).to_pydict()
    metrics: dict[str, list[tuple[int, float]]] = {}
    for step, name, value in zip(table["step"], table["name"], table["value"], strict=True):
        metrics.setdefault(name, []).append((step, value))
    return ctx, {k: sorted(v) for k, v in metrics.items()}


@pytest.fixture(autouse=True)
def one_torch_thread() -> Any:
    """Tiny networks: one thread is fastest, and several spin badly on a busy machine."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return tmp_path


def _finite(values: list[tuple[int, float]]) -> bool:
    return bool(values) and all(math.isfinite(v) for _, v in values)


def test_dqn_cartpole_trains_evaluates_and_logs(in_tmp: Path) -> None:
    ctx, m = _train(DQN(), _spec("dqn", "CartPole-v1", 1000, TINY), in_tmp)
    assert [s for s, _ in m["eval/return"]] == [0, 500, 1000]
    assert ctx.last_eval == m["eval/return"][-1][1]
    # CartPole pays 1 per step: every logged training episode's return equals its length
    returns, lengths = m["train/episode_return"], m["train/episode_length"]
    assert len(returns) >= 5 and _finite(returns)
    assert [r for _, r in returns] == [float(n) for _, n in lengths]
    assert sum(n for _, n in lengths) <= 1000 and returns[-1][0] <= 1000
    # the episode is logged at the step it ends: consecutive end steps differ by the episode length
    ends = [s for s, _ in lengths]
    assert all(b - a == n for a, b, (_, n) in zip(ends[:-1], ends[1:], lengths[1:], strict=True))
    losses = m["train/loss/loss"]
    assert _finite(losses) and len(losses) >= 5 and all(100 < s <= 1000 for s, _ in losses)
    assert not any(k.startswith("train/loss/time_") or "rollout" in k for k in m)
    assert list((in_tmp / "cwd").iterdir()) == []  # d3rlpy wrote no logs or models


def test_sac_pendulum_trains_evaluates_and_logs(in_tmp: Path) -> None:
    ctx, m = _train(SAC(), _spec("sac", "Pendulum-v1", 300, TINY, every=300), in_tmp)
    assert [s for s, _ in m["eval/return"]] == [0, 300]
    assert all(-2000 < v <= 0 for _, v in m["eval/return"])
    assert m["train/episode_return"][0][0] == 200 and _finite(m["train/episode_return"])
    for name in ("train/loss/critic_loss", "train/loss/actor_loss"):
        assert _finite(m[name]), name
    assert list((in_tmp / "cwd").iterdir()) == []


def test_double_dqn_cartpole_trains_evaluates_and_logs(in_tmp: Path) -> None:
    ctx, m = _train(DoubleDQN(), _spec("double_dqn", "CartPole-v1", 600, TINY, every=300), in_tmp)
    assert [s for s, _ in m["eval/return"]] == [0, 300, 600]
    assert ctx.last_eval == m["eval/return"][-1][1]
    assert all(1 <= v <= 500 for _, v in m["eval/return"])
    assert _finite(m["train/episode_return"])
    losses = m["train/loss/loss"]
    assert _finite(losses) and all(100 < s <= 600 for s, _ in losses)
    assert list((in_tmp / "cwd").iterdir()) == []


@pytest.mark.parametrize("adapter", [TD3(), DDPG()], ids=lambda a: a.name)
def test_td3_ddpg_pendulum_train_evaluate_and_log(in_tmp: Path, adapter: D3rlpyOnline) -> None:
    ctx, m = _train(adapter, _spec(adapter.name, "Pendulum-v1", 300, TINY, every=300), in_tmp)
    assert [s for s, _ in m["eval/return"]] == [0, 300]
    assert ctx.last_eval == m["eval/return"][-1][1]
    assert all(-2000 < v <= 0 for _, v in m["eval/return"])
    assert m["train/episode_return"][0][0] == 200 and _finite(m["train/episode_return"])
    for name in ("train/loss/critic_loss", "train/loss/actor_loss"):
        assert _finite(m[name]), name
    assert list((in_tmp / "cwd").iterdir()) == []


def test_noise_exploration_params() -> None:
    cfg, settings = TD3.split_params({"explore_noise": 0.3, "target_smoothing_sigma": 0.1})
    assert cfg == {"target_smoothing_sigma": 0.1} and settings["explore_noise"] == 0.3
    assert DDPG.run_params()["explore_noise"] == 0.1  # d3rlpy NormalNoise's default std
    explorer = TD3().make_explorer(settings, 1000)
    assert explorer is not None and explorer._std == 0.3 and explorer._mean == 0.0
    # the library's defaults, field by field
    assert TD3.config_params()["update_actor_interval"] == 2 and TD3.config_params()["n_critics"] == 2
    assert DDPG.config_params()["tau"] == 0.005 and DDPG.config_params()["n_critics"] == 1
    assert DoubleDQN.config_params()["learning_rate"] == 6.25e-05
    td3 = TD3().make_config(*TD3.split_params({"hidden_units": [8]}))
    assert td3.actor_encoder_factory.hidden_units == td3.critic_encoder_factory.hidden_units == [8]


def test_sac_actions_cover_the_env_action_range() -> None:
    env = gymnasium.make("Pendulum-v1")
    algo = SAC().make_config({}, SAC.run_params()).create(device="cpu")
    from d3rlpy.algos.utility import build_scalers_with_env

    build_scalers_with_env(algo, env)
    algo.build_with_env(env)
    obs = np.random.default_rng(0).normal(size=(256, 3)).astype(np.float32)
    actions = algo.predict(obs)
    assert actions.shape == (256, 1) and np.all(np.abs(actions) <= 2.0)
    # the min-max scaler maps the policy's tanh range onto [-2, 2]
    assert algo.config.action_scaler is not None and np.allclose(algo.config.action_scaler.maximum, 2.0)


def test_same_seed_same_results(in_tmp: Path) -> None:
    params = {**TINY, "update_start_step": 50}
    runs = []
    for i in range(2):
        d = in_tmp / f"r{i}"
        d.mkdir()
        _, m = _train(DQN(), _spec("dqn", "CartPole-v1", 600, params, seed=3, every=300), d)
        runs.append(m)
    for name in ("eval/return", "train/episode_return", "train/loss/loss"):
        assert runs[0][name] == runs[1][name], name


def test_stop_event_ends_training_early(in_tmp: Path) -> None:
    stop = threading.Event()
    stop.set()  # seen after the first step (the loop checks every step)
    params = {"update_start_step": 10**6, "hidden_units": [16]}
    ctx, m = _train(DQN(), _spec("dqn", "CartPole-v1", 5000, params, every=2000), in_tmp, stop=stop)
    assert [s for s, _ in m["eval/return"]] == [0, 1]
    assert "train/episode_return" not in m


def test_params_split_between_config_and_run_settings() -> None:
    cfg, settings = DQN.split_params(
        {"learning_rate": 1, "gamma": 0.9, "update_interval": 4, "explore_end": 0.02}
    )
    assert cfg == {"learning_rate": 1.0, "gamma": 0.9} and isinstance(cfg["learning_rate"], float)
    assert settings["update_interval"] == 4 and settings["explore_end"] == 0.02
    assert settings["explore_start"] == 1.0 and settings["n_updates"] == 1  # defaults filled in
    config = DQN().make_config(cfg, {**settings, "hidden_units": [8, 4]})
    assert config.learning_rate == 1.0 and config.encoder_factory.hidden_units == [8, 4]
    sac = SAC().make_config(*SAC.split_params({"critic_learning_rate": 1e-3, "hidden_units": [8]}))
    assert sac.critic_learning_rate == 1e-3
    assert sac.actor_encoder_factory.hidden_units == sac.critic_encoder_factory.hidden_units == [8]


def test_unknown_param_is_named() -> None:
    with pytest.raises(ValueError, match=r"bogus_key.*valid:.*learning_rate"):
        DQN.split_params({"bogus_key": 1, "learning_rate": 1e-3})
    with pytest.raises(ValueError, match="explore_end"):  # DQN's exploration keys are not SAC's
        SAC.split_params({"explore_end": 0.1})
    with pytest.raises(ValueError, match="encoder_factory"):  # factories are not settable from a suite
        DQN.split_params({"encoder_factory": "vector"})
    for adapter in (DoubleDQN, TD3, DDPG):
        with pytest.raises(ValueError, match=rf"for {adapter.name}: bogus_key; valid:") as e:
            adapter.split_params({"bogus_key": 1})
        assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="explore_noise"):  # noise is for td3/ddpg, epsilon for double_dqn
        DoubleDQN.split_params({"explore_noise": 0.2})
    with pytest.raises(ValueError, match="explore_end"):
        TD3.split_params({"explore_end": 0.1})


def test_unknown_param_fails_the_run(in_tmp: Path) -> None:
    with pytest.raises(ValueError, match="lerning_rate"):
        _train(DQN(), _spec("dqn", "CartPole-v1", 100, {"lerning_rate": 1e-3}), in_tmp)


@pytest.mark.parametrize(
    "adapter, env_id, needs",
    [
        (DQN(), "Pendulum-v1", "discrete"),
        (DoubleDQN(), "Pendulum-v1", "discrete"),
        (SAC(), "CartPole-v1", "continuous"),
        (TD3(), "CartPole-v1", "continuous"),
        (DDPG(), "Acrobot-v1", "continuous"),
    ],
    ids=lambda v: getattr(v, "name", str(v)),
)
def test_action_space_mismatch_is_a_clear_error(
    in_tmp: Path, adapter: D3rlpyOnline, env_id: str, needs: str
) -> None:
    with pytest.raises(ValueError, match=rf"{adapter.name} needs a {needs} action space.*{env_id}") as e:
        _train(adapter, _spec(adapter.name, env_id, 100, {}), in_tmp)
    assert "\n" not in str(e.value)


def _episodes(rng: np.random.Generator, n: int) -> list[tuple[list[tuple[np.ndarray, int, float]], bool]]:
    """Random episodes of (obs, action, reward) steps, each ending terminated or truncated.

    At least 2 steps: d3rlpy's writer ignores ``clip_episode`` on a 1-step episode and runs it into the next.
    """
    out = []
    for _ in range(n):
        length = int(rng.integers(2, 7))
        steps = [
            (rng.normal(size=4).astype(np.float32), int(rng.integers(2)), float(rng.normal()))
            for _ in range(length)
        ]
        out.append((steps, bool(rng.integers(2))))
    return out


def _rows(obs: Any, act: Any, rew: Any, next_obs: Any, term: Any) -> list[tuple[float, ...]]:
    return sorted(
        tuple(
            np.concatenate([np.ravel(o), np.ravel(a), np.ravel(r), np.ravel(no), np.ravel(t)])
            .astype(np.float32)
            .tolist()
        )
        for o, a, r, no, t in zip(obs, act, rew, next_obs, term, strict=True)
    )


def test_array_buffer_matches_d3rlpy_transitions() -> None:
    from d3rlpy.dataset import BasicTransitionPicker, create_fifo_replay_buffer

    env = gymnasium.make("CartPole-v1")
    ours = _ArrayReplayBuffer.for_env(1000, env)
    theirs = create_fifo_replay_buffer(1000, env=env)
    for steps, terminated in _episodes(np.random.default_rng(0), 40):
        for o, a, r in steps:
            ours.append(o, a, r)
            theirs.append(o, a, r)
        ours.clip_episode(terminated)
        theirs.clip_episode(terminated)
    assert ours.transition_count == theirs.transition_count > 0
    picker = BasicTransitionPicker()
    ts = [picker(ep, i) for ep in theirs.episodes for i in range(ep.transition_count)]
    expected = _rows(
        [t.observation for t in ts],
        [t.action for t in ts],
        [t.reward for t in ts],
        [t.next_observation for t in ts],
        [t.terminal for t in ts],
    )
    n = ours.transition_count
    got = _rows(ours._obs[:n], ours._act[:n], ours._rew[:n], ours._next_obs[:n], ours._term[:n])
    assert got == expected
    batch = ours.sample_transition_batch(16)
    assert batch.observations.shape == (16, 4) and batch.actions.shape == (16, 1)
    assert batch.rewards.shape == batch.terminals.shape == batch.intervals.shape == (16, 1)


def test_array_buffer_is_fifo() -> None:
    buf = _ArrayReplayBuffer(limit=3, observation_shape=(1,), action_shape=(1,))
    for i in range(6):
        buf.append(np.array([i]), 0, float(i))
    buf.clip_episode(True)
    assert buf.transition_count == 3
    assert sorted(buf._rew[:, 0].tolist()) == [3.0, 4.0, 5.0]  # the oldest transitions were overwritten
    assert buf._term[:, 0].sum() == 1.0
