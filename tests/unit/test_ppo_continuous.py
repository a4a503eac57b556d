"""``ppo`` on a Box action space picks CleanRL ``ppo_continuous_action.py``'s defaults by itself.

Proven here on Pendulum-v1 with tiny budgets (two 2048-step rollouts): a run without params trains with
``CONTINUOUS_DEFAULTS`` (one env, 2048-step rollouts, lr 3e-4, observation and reward normalisation) in both
the unpacked and the packed implementation, params still override them, discrete envs keep ppo.py's
defaults, the packed run with one seed matches the unpacked one to float tolerance, and a run interrupted
after a checkpoint resumes bitwise (the normalisers' statistics are part of the checkpoint).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from test_checkpoint import _spec, interrupted_and_resumed, metrics_of, uninterrupted
from test_ppo_packed import assert_same_rows, make_spec, read_rows

from rlbench_cli.algos.base import RunContext
from rlbench_cli.algos.ppo import CONTINUOUS_DEFAULTS, PPO, PPOConfig, PPOPolicy, train_packed
from rlbench_cli.sink import ShardSink

STEPS = 4096  # two updates of the continuous defaults' 2048-step rollout


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def train(
    tmp: Path, params: dict[str, Any], packed: bool = False, env_id: str = "Pendulum-v1", steps: int = STEPS
) -> tuple[pd.DataFrame, list[PPOPolicy]]:
    """One run (through ``PPO().train`` or ``train_packed`` with one seed); its rows and evaluated policies."""
    spec = make_spec(env_id, params, seed=5, steps=steps, eval_every=steps, eval_episodes=1)
    folder = tmp / f"{'packed' if packed else 'plain'}-{len(list(tmp.iterdir()))}"
    sink = ShardSink(folder, background=False)
    seen: list[PPOPolicy] = []
    ctx = RunContext(spec=spec, sink=sink, on_evaluate=lambda step, mean, policy: seen.append(policy))
    if packed:
        assert train_packed([ctx]) == {5: None}
    else:
        PPO().train(ctx)
    sink.close()
    return read_rows(folder), seen


def _check_defaults(df: pd.DataFrame, policies: list[PPOPolicy], params: dict[str, Any]) -> None:
    cfg = policies[-1].cfg
    num_steps = params.get("num_steps", 2048)
    for k, v in CONTINUOUS_DEFAULTS.items():
        if k not in params:
            assert getattr(cfg, k) == v, k
    assert cfg.num_steps == num_steps
    lr = df[df["name"] == "train/learning_rate"]
    assert len(lr) == STEPS // num_steps  # one update per rollout of one env
    assert lr["value"].iloc[0] == pytest.approx(3e-4)
    # the observation normaliser saw every observation of training (the reset one included), and
    # evaluation did not update it
    rms = policies[-1].obs_rms
    assert rms is not None and rms.count == pytest.approx(STEPS + 1, abs=1e-3)
    assert not np.allclose(rms.mean, 0.0)
    lengths = df[df["name"] == "train/episode_length"]["value"]
    assert (lengths == 200).all() and len(lengths) == STEPS // 200
    assert (df[df["name"] == "train/episode_return"]["value"] < -100).all()  # raw rewards, not normalised


@pytest.fixture(scope="module")
def default_runs(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[bool, tuple[pd.DataFrame, list[PPOPolicy]]]:
    """Pendulum without params, unpacked (False) and packed with one seed (True): shared by the tests."""
    tmp = tmp_path_factory.mktemp("defaults")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return {packed: train(tmp, {}, packed=packed) for packed in (False, True)}
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("packed", [False, True], ids=["unpacked", "packed"])
def test_box_actions_get_the_continuous_defaults(default_runs: dict, packed: bool) -> None:
    df, policies = default_runs[packed]
    assert len(policies) == 2  # evaluated at 0 and at the budget
    _check_defaults(df, policies, {})


def test_params_override_the_continuous_defaults_and_discrete_keeps_its_own(tmp_path: Path) -> None:
    params = {"num_steps": 1024, "normalize_reward": False}
    df, policies = train(tmp_path, params)
    _check_defaults(df, policies, params)
    assert policies[-1].cfg.normalize_reward is False and policies[-1].cfg.normalize_obs is True
    assert PPOConfig.from_params({}, continuous=True) == PPOConfig(**CONTINUOUS_DEFAULTS)
    assert PPOConfig.from_params({"ent_coef": 0.01}, continuous=True).ent_coef == 0.01
    with pytest.raises(ValueError, match="num_minibatches"):  # 32 minibatches cannot split 16 steps
        PPOConfig.from_params({"num_steps": 16}, continuous=True)
    _, cartpole = train(tmp_path, {"num_steps": 64}, env_id="CartPole-v1", steps=512)
    assert cartpole[-1].cfg == PPOConfig(num_steps=64) and cartpole[-1].obs_rms is None


def test_one_packed_seed_matches_unpacked_with_the_continuous_defaults(default_runs: dict) -> None:
    assert_same_rows(default_runs[False][0], default_runs[True][0])


def test_continuous_defaults_resume_bitwise(tmp_path: Path) -> None:
    spec = _spec("ppo", env="Pendulum-v1", steps=STEPS, eval_every=2048, every=2048, eval_episodes=1)
    _, r2, a2 = interrupted_and_resumed(tmp_path, spec, after=1)
    assert r2["resumed_from_step"] == 2048
    resumed, straight = metrics_of(a2), metrics_of(uninterrupted(tmp_path, spec))
    assert set(resumed["name"]) >= {"eval/return", "train/episode_return", "train/loss/value"}
    pd.testing.assert_frame_equal(resumed, straight)  # normaliser state restored: every row bitwise
