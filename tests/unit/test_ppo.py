"""The ``ppo`` adapter: tiny real training runs (CartPole, Pendulum), determinism, params, episode accounting."""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from rlbench_cli.algos.base import RunContext
from rlbench_cli.algos.ppo import PPO, PPOConfig
from rlbench_cli.sink import ShardSink
from rlbench_cli.suite.grid import RunSpec

LOSS_METRICS = (
    "train/loss/policy",
    "train/loss/value",
    "train/entropy",
    "train/approx_kl",
    "train/clipfrac",
    "train/learning_rate",
)


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def run_ppo(
    tmp_path: Path,
    env_id: str = "CartPole-v1",
    params: dict[str, Any] | None = None,
    steps: int = 2048,
    seed: int = 0,
    eval_every: int = 1024,
    eval_episodes: int = 3,
) -> tuple[RunContext, pd.DataFrame]:
    spec = RunSpec(
        suite="t",
        algo="ppo",
        algo_name="ppo",
        params=params or {},
        env_id=env_id,
        env_kwargs={},
        seed=seed,
        budget={"steps": steps, "eval_every": eval_every, "eval_episodes": eval_episodes, "timeout": None},
    )
    out = tmp_path / f"{env_id}-{seed}-{len(list(tmp_path.iterdir()))}"
    sink = ShardSink(out, background=False)
    ctx = RunContext(spec=spec, sink=sink)
    PPO().train(ctx)
    sink.close()
    table = pa.concat_tables([pq.read_table(p) for p in sorted(out.glob("*.parquet"))])
    return ctx, table.to_pandas()


def metric(df: pd.DataFrame, name: str) -> pd.DataFrame:
    return df[df["name"] == name].sort_values("step", kind="stable")


def check_run(ctx: RunContext, df: pd.DataFrame, steps: int) -> None:
    ev = metric(df, "eval/return")
    assert ev["step"].iloc[0] == 0
    assert ev["step"].iloc[-1] == steps, "the final evaluation must be at the last step"
    assert ctx.last_eval == pytest.approx(ev["value"].iloc[-1])
    assert np.isfinite(ev["value"]).all()
    ep = metric(df, "train/episode_return")
    assert len(ep) > 0 and np.isfinite(ep["value"]).all()
    assert (ep["step"] <= steps).all()
    for name in LOSS_METRICS:
        m = metric(df, name)
        assert len(m) > 0, name
        assert np.isfinite(m["value"]).all(), name
    lr = metric(df, "train/learning_rate")["value"].to_numpy()
    assert (np.diff(lr) < 0).all(), "anneal_lr must decrease the learning rate every update"


def test_cartpole_tiny_run(tmp_path: Path) -> None:
    ctx, df = run_ppo(tmp_path, "CartPole-v1", {"num_steps": 64})
    check_run(ctx, df, 2048)
    assert list(metric(df, "eval/return")["step"]) == [0, 1024, 2048]
    assert len(metric(df, "train/loss/policy")) == 2048 // (4 * 64)
    lengths = metric(df, "train/episode_length")["value"]
    # CartPole episodes last at least 8 steps; a bogus autoreset transition would show up as length 1 or 0.
    assert lengths.min() >= 8


def test_pendulum_continuous_tiny_run(tmp_path: Path) -> None:
    params = {"num_envs": 2, "num_steps": 256, "normalize_obs": True, "normalize_reward": True}
    ctx, df = run_ppo(tmp_path, "Pendulum-v1", params, eval_episodes=2)
    check_run(ctx, df, 2048)
    lengths = metric(df, "train/episode_length")["value"]
    assert (lengths == 200).all() and len(lengths) == 10  # 1024 steps per env: 5 truncated episodes each
    # Episode returns are raw env rewards (negative for Pendulum), not the normalised training rewards.
    assert (metric(df, "train/episode_return")["value"] < -100).all()


def test_same_seed_same_run(tmp_path: Path) -> None:
    _, a = run_ppo(tmp_path, seed=3, steps=1024, eval_every=512)
    _, b = run_ppo(tmp_path, seed=3, steps=1024, eval_every=512)
    _, c = run_ppo(tmp_path, seed=4, steps=1024, eval_every=512)
    for name in ("eval/return", "train/episode_return", "train/loss/policy", "train/loss/value"):
        assert metric(a, name)["value"].tolist() == metric(b, name)["value"].tolist(), name
    assert (
        metric(a, "train/episode_return")["value"].tolist()
        != metric(c, "train/episode_return")["value"].tolist()
    )


def test_budget_not_a_multiple_of_the_batch(tmp_path: Path) -> None:
    ctx, df = run_ppo(tmp_path, steps=1000, eval_every=400, eval_episodes=1)
    assert metric(df, "eval/return")["step"].iloc[-1] == 1000
    assert metric(df, "train/loss/policy")["step"].tolist() == [512, 1000]
    # Evaluated at 0, at 512 (for the 400 point) and at 1000 (the 800 point and the final one: one call),
    # each logged at the suite's grid point it stands for, with the step reached beside it.
    assert metric(df, "eval/return")["step"].tolist() == [0, 400, 1000] and ctx.evaluations == 3
    assert metric(df, "eval/actual_step")["value"].tolist() == [0, 512, 1000]


def test_stop_event_ends_the_run_with_a_final_evaluation(tmp_path: Path) -> None:
    spec = RunSpec(
        suite="t",
        algo="ppo",
        algo_name="ppo",
        params={},
        env_id="CartPole-v1",
        env_kwargs={},
        seed=0,
        budget={"steps": 4096, "eval_every": 1024, "eval_episodes": 1, "timeout": None},
    )
    sink = ShardSink(tmp_path / "m", background=False)
    stop = threading.Event()
    stop.set()
    ctx = RunContext(spec=spec, sink=sink, stop_event=stop)
    PPO().train(ctx)
    sink.close()
    df = pa.concat_tables([pq.read_table(p) for p in sorted((tmp_path / "m").glob("*.parquet"))]).to_pandas()
    assert metric(df, "train/loss/policy")["step"].tolist() == [512]  # one iteration, then stop
    assert metric(df, "eval/return")["step"].tolist() == [0, 512]  # finish() evaluates where it stopped


class _FixedLength(gym.Env):
    """Episodes of exactly ``length`` steps with reward 1, ending by termination or by truncation."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length: int = 5, truncate: bool = False):
        self.length, self.truncate, self.t = length, truncate, 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action: int):
        self.t += 1
        end = self.t >= self.length
        return (
            np.full(2, self.t / self.length, np.float32),
            1.0,
            end and not self.truncate,
            end and self.truncate,
            {},
        )


gym.register("rlbench-test/FixedLength-v0", entry_point=_FixedLength)


@pytest.mark.parametrize("truncate", [False, True])
def test_episodes_reset_on_the_step_they_end(tmp_path: Path, truncate: bool) -> None:
    spec = RunSpec(
        suite="t",
        algo="ppo",
        algo_name="ppo",
        params={"num_envs": 2, "num_steps": 10},
        env_id="rlbench-test/FixedLength-v0",
        env_kwargs={"truncate": truncate},
        seed=0,
        budget={"steps": 100, "eval_every": 100, "eval_episodes": 1, "timeout": None},
    )
    sink = ShardSink(tmp_path / "m", background=False)
    ctx = RunContext(spec=spec, sink=sink)
    PPO().train(ctx)
    sink.close()
    df = pa.concat_tables([pq.read_table(p) for p in sorted((tmp_path / "m").glob("*.parquet"))]).to_pandas()
    ep = metric(df, "train/episode_return")
    # 100 steps over 2 envs = 50 steps each = 10 episodes each, every one 5 steps long, no 6th reset step.
    assert len(ep) == 20
    assert (ep["value"] == 5.0).all()
    assert (metric(df, "train/episode_length")["value"] == 5).all()
    assert sorted(set(ep["step"])) == list(range(10, 101, 10))
    assert ctx.last_eval == 5.0


def test_unknown_param_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="lerning_rate") as err:
        run_ppo(tmp_path, params={"lerning_rate": 1e-3})
    assert "learning_rate" in str(err.value) and "num_minibatches" in str(err.value)


def test_params_are_coerced_and_validated() -> None:
    cfg = PPOConfig.from_params(
        {"learning_rate": "1e-3", "num_envs": 8.0, "hidden_sizes": [32], "norm_adv": "false"}
    )
    assert (
        cfg.learning_rate == 1e-3
        and cfg.num_envs == 8
        and cfg.hidden_sizes == (32,)
        and cfg.norm_adv is False
    )
    assert PPOConfig.from_params({"target_kl": None}).target_kl is None
    assert PPOConfig() == PPOConfig.from_params({})
    assert PPOConfig().learning_rate == 2.5e-4 and PPOConfig().batch_size == 512
    with pytest.raises(ValueError, match="num_envs"):
        PPOConfig.from_params({"num_envs": 2.5})
    with pytest.raises(ValueError, match="gamma"):
        PPOConfig.from_params({"gamma": 1.5})
    with pytest.raises(ValueError, match="anneal_lr"):
        PPOConfig.from_params({"anneal_lr": "maybe"})
    assert math.isclose(PPOConfig.from_params({"clip_coef": 1}).clip_coef, 1.0)
