"""``hf_decision_transformer``: a transformers ``DecisionTransformerModel`` trained from scratch; tiny runs on
both action types, parameters, batched return-conditioned evaluation, a learning check on CartPole."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from offline_helpers import cartpole_controller, offline_spec, pendulum_controller, rollouts, train

pytest.importorskip("transformers")

from rlbench_cli.algos.hf_decision_transformer import (  # noqa: E402
    CONFIG_PARAMS,
    TRAIN_PARAMS,
    HFDecisionTransformer,
    _Encoding,
    _Policy,
)
from rlbench_cli.datasets.data import OfflineData  # noqa: E402

TINY = {"hidden_size": 16, "n_layer": 1, "context_length": 4, "batch_size": 8, "logging_steps": 5}


@pytest.fixture(autouse=True)
def one_torch_thread() -> Any:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def cartpole() -> OfflineData:
    return rollouts("CartPole-v1", cartpole_controller, episodes=10, epsilon=0.2)


@pytest.fixture(scope="module")
def pendulum() -> OfflineData:
    return rollouts("Pendulum-v1", pendulum_controller, episodes=2, epsilon=0.3)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_trains_evaluates_and_logs(
    tmp_path: Path, cartpole: OfflineData, pendulum: OfflineData, env_id: str
) -> None:
    data = cartpole if env_id == "CartPole-v1" else pendulum
    spec = offline_spec("hf_decision_transformer", env_id, 10, TINY, every=5)
    ctx, m = train(HFDecisionTransformer(), spec, data, tmp_path)
    assert [s for s, _ in m["eval/return"]] == [0, 5, 10] and ctx.last_eval == m["eval/return"][-1][1]
    low, high = (1, 500) if env_id == "CartPole-v1" else (-2000, 0)
    assert all(low <= v <= high for _, v in m["eval/return"])
    assert [s for s, _ in m["train/loss/loss"]] == [5, 10]
    assert all(math.isfinite(v) for _, v in m["train/loss/loss"])


def test_model_comes_from_a_config(cartpole: OfflineData, pendulum: OfflineData) -> None:
    adapter = HFDecisionTransformer()
    fields, settings = adapter.split_params({"hidden_size": 32, "n_head": 2, "batch_size": 4})
    assert fields["hidden_size"] == 32 and fields["n_head"] == 2 and "batch_size" not in fields
    assert settings["batch_size"] == 4 and settings["context_length"] == 20  # defaults filled in
    discrete = adapter.build_model(fields, state_dim=4, act_dim=2, discrete=True)
    continuous = adapter.build_model(fields, state_dim=3, act_dim=1, discrete=False)
    assert (
        discrete.config.hidden_size == 32 and discrete.config.n_head == 2 and discrete.config.state_dim == 4
    )
    # discrete: logits, no tanh on the action head; continuous: tanh, mapped onto the action bounds
    assert not discrete.config.action_tanh and continuous.config.action_tanh
    assert isinstance(continuous.predict_action[-1], torch.nn.Tanh)
    enc = _Encoding(pendulum, gym.make("Pendulum-v1"), False, settings)
    assert np.allclose(enc.actions(np.array([[-2.0], [0.0], [2.0]])), [[-1.0], [0.0], [1.0]])
    env_actions, _ = enc.env_actions(torch.tensor([[-1.0], [0.5]]))
    assert np.allclose(env_actions, [[-2.0], [1.0]])
    enc = _Encoding(cartpole, gym.make("CartPole-v1"), True, settings)
    assert np.array_equal(enc.actions(np.array([1, 0])), [[0, 1], [1, 0]])


def test_defaults_are_transformers_and_its_example() -> None:
    from transformers import DecisionTransformerConfig

    library = DecisionTransformerConfig()
    assert {k: getattr(library, k) for k in CONFIG_PARAMS} == CONFIG_PARAMS
    assert TRAIN_PARAMS["context_length"] == 20 and TRAIN_PARAMS["learning_rate"] == 1e-4


def test_unknown_param_is_named(tmp_path: Path, cartpole: OfflineData) -> None:
    def run(params: dict[str, Any]) -> None:
        spec = offline_spec("hf_decision_transformer", "CartPole-v1", 5, params)
        train(HFDecisionTransformer(), spec, cartpole, tmp_path)

    unknown = r"^unknown parameter\(s\) for hf_decision_transformer: hiden_size; valid: .*hidden_size"
    with pytest.raises(ValueError, match=unknown + ".*target_return") as e:
        run({"hiden_size": 8})
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match=r"max_ep_len \(100\) must cover the longest episode \(500 steps\)"):
        run({"max_ep_len": 100})


def test_lock_step_evaluation_equals_one_episode_at_a_time(pendulum: OfflineData) -> None:
    """All running episodes go through one forward pass; padding and masks keep them independent."""
    adapter = HFDecisionTransformer()
    fields, settings = adapter.split_params({**TINY, "context_length": 3})
    torch.manual_seed(0)
    model = adapter.build_model(fields, 3, 1, discrete=False)
    enc = _Encoding(pendulum, gym.make("Pendulum-v1"), False, settings)
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(3, 6, 3)).astype(np.float32)  # 3 episodes of 6 steps
    rewards = -rng.uniform(size=(3, 6))
    together = _Policy(model, enc, settings, target_return=-300.0, device="cpu")
    together.reset(3)
    batched = np.zeros((3, 6))
    for t in range(8):  # episode i starts at step i: rows of one batch have different paddings
        idx = np.array([i for i in range(3) if i <= t < i + 6])
        k = t - idx
        batched[idx, k] = together.act(obs[idx, k], rewards[idx, k], idx)[:, 0]
    assert np.ptp(batched) > 1e-3  # the actions depend on the inputs: the comparison below means something
    for i in range(3):
        alone = _Policy(model, enc, settings, target_return=-300.0, device="cpu")
        alone.reset(1)
        for k in range(6):
            action = alone.act(obs[i, k : k + 1], rewards[i, k : k + 1], np.array([0]))
            assert np.allclose(action[0, 0], batched[i, k], atol=1e-5), (i, k)


def test_learns_cartpole(tmp_path: Path, cartpole: OfflineData) -> None:
    params = {"hidden_size": 32, "n_layer": 1, "context_length": 10, "batch_size": 32, "learning_rate": 1e-3}
    spec = offline_spec("hf_decision_transformer", "CartPole-v1", 300, params, episodes=5)
    _, m = train(HFDecisionTransformer(), spec, cartpole, tmp_path)
    (_, untrained), (_, trained) = m["eval/return"]
    assert untrained < 50 and trained >= 450, m["eval/return"]


def test_transformers_is_imported_only_by_a_run() -> None:
    code = "import sys, rlbench_cli.algos.hf_decision_transformer; print('transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
