"""Shared by the offline adapters' tests: small datasets played by hand-written controllers, and a training
run that returns its metrics by name."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rlbench_cli.algos.base import RunContext
from rlbench_cli.datasets.data import OfflineData
from rlbench_cli.sink import ShardSink, list_shards
from rlbench_cli.suite.grid import RunSpec

Metrics = dict[str, list[tuple[int, float]]]


def cartpole_controller(obs: np.ndarray) -> int:
    """Push towards the side the pole falls to: about 500 (the maximum) on CartPole-v1."""
    return int(obs[2] + 0.5 * obs[3] > 0)


def pendulum_controller(obs: np.ndarray) -> np.ndarray:
    """Pump energy until the pole is near the top, then hold it with a PD law: about -140 on Pendulum-v1
    (random actions: about -1200)."""
    cos, sin, vel = (float(v) for v in obs)
    if cos > 0.8:
        u = -(10.0 * np.arctan2(sin, cos) + 2.0 * vel)
    else:
        energy = vel**2 / 6 + 7.5 * (cos - 1)
        u = 2.0 * np.sign(vel) if energy < 0 else -0.5 * vel
    return np.clip(np.array([u], np.float32), -2.0, 2.0)


def rollouts(
    env_id: str,
    controller: Callable[[np.ndarray], Any],
    episodes: int,
    epsilon: float,
    seed: int = 0,
    meta: dict[str, Any] | None = None,
) -> OfflineData:
    """Episodes of ``controller`` taking a uniformly random action with probability ``epsilon``."""
    env = gym.make(env_id)
    space = env.action_space
    discrete = isinstance(space, gym.spaces.Discrete)
    rng = np.random.default_rng(seed)
    obs_l, act_l, rew_l, term_l, trunc_l = [], [], [], [], []
    for e in range(episodes):
        obs, _ = env.reset(seed=seed * 1000 + e)
        done = False
        while not done:
            action = controller(obs)
            if rng.random() < epsilon:
                action = int(rng.integers(space.n)) if discrete else rng.uniform(space.low, space.high)
            nxt, reward, term, trunc, _ = env.step(action)
            obs_l.append(obs)
            act_l.append(action)
            rew_l.append(reward)
            term_l.append(term)
            trunc_l.append(trunc)
            obs, done = nxt, term or trunc
    env.close()
    return OfflineData(
        observations=np.asarray(obs_l, np.float32),
        actions=np.asarray(act_l, np.int64 if discrete else np.float32),
        rewards=np.asarray(rew_l, np.float32),
        terminals=np.asarray(term_l, bool),
        timeouts=np.asarray(trunc_l, bool),
        meta={"env_id": env_id, "discrete": discrete, **(meta or {})},
    )


def offline_spec(
    algo: str,
    env_id: str,
    steps: int,
    params: dict[str, Any],
    every: int | None = None,
    episodes: int = 2,
    seed: int = 0,
) -> RunSpec:
    return RunSpec(
        suite="t",
        algo=algo,
        algo_name=algo,
        params=params,
        env_id=env_id,
        env_kwargs={},
        seed=seed,
        budget={"steps": steps, "eval_every": every or steps, "eval_episodes": episodes, "timeout": None},
        dataset=f"{env_id}-test",
    )


def train(
    adapter: Any, spec: RunSpec, data: OfflineData, tmp_path: Path, stop: threading.Event | None = None
) -> tuple[RunContext, Metrics]:
    """Train on ``data`` with shards under ``tmp_path``; returns the context and the metrics by name."""
    shards = tmp_path / f"shards-{len(list(tmp_path.glob('shards-*')))}"
    sink = ShardSink(shards, background=False)
    ctx = RunContext(spec=spec, sink=sink, stop_event=stop, _dataset=data)
    try:
        adapter.train(ctx)
    finally:
        sink.close()
    return ctx, read_metrics(shards)


def read_metrics(shards: Path) -> Metrics:
    table = pa.concat_tables([pq.read_table(p) for p in list_shards(shards)]).to_pydict()
    metrics: Metrics = {}
    for step, name, value in zip(table["step"], table["name"], table["value"], strict=True):
        metrics.setdefault(name, []).append((step, value))
    return {k: sorted(v) for k, v in metrics.items()}
