"""The vendored CleanRL ppo_continuous_action.py (benchmarks/peers/) runs on gymnasium 1.0 with CleanRL's wrapper
chain: raw episode returns recorded, observations normalised and clipped to +-10, rewards scaled,
episodes reset on the step they end. (benchmarks/ppo_continuous_vs_cleanrl.py runs it for real; its figures
are in the benchmark's output, not asserted here.)"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tyro", reason="CleanRL's script needs tyro: pip install -e '.[bench]'")
pytest.importorskip("tensorboard", reason="CleanRL's script logs to TensorBoard")

PEER = Path(__file__).resolve().parents[2] / "benchmarks" / "peers" / "cleanrl_ppo_continuous_action.py"


def test_cleanrl_continuous_wrappers_and_vector_env_on_gymnasium_1_0() -> None:
    spec = importlib.util.spec_from_file_location("cleanrl_ppo_continuous_vendored", PEER)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # the training code is under `if __name__ == "__main__"`
    assert (mod.Args.num_steps, mod.Args.num_minibatches, mod.Args.update_epochs) == (2048, 32, 10)
    assert (mod.Args.learning_rate, mod.Args.ent_coef, mod.Args.total_timesteps) == (3e-4, 0.0, 1_000_000)
    envs = mod.SameStepSyncVectorEnv([mod.make_env("Pendulum-v1", 0, False, "t", 0.99)])
    obs, _ = envs.reset(seed=1)
    ended = 0
    for t in range(400):
        # an out-of-bounds action (Pendulum's torque is in [-2, 2]) goes through ClipAction
        obs, reward, term, trunc, infos = envs.step(np.full((1, 1), 50.0, np.float32))
        assert np.abs(obs).max() <= 10.0 and np.isfinite(reward).all()
        if trunc[0]:
            ended += 1
            episode = infos["final_info"][0]["episode"]
            assert int(episode["l"]) == 200 and float(episode["r"]) < -100  # raw returns, not scaled ones
            assert t + 1 == 200 * ended
    assert ended == 2
    agent = mod.Agent(envs)
    action, logprob, entropy, value = agent.get_action_and_value(mod.torch.zeros(3, 3))
    assert action.shape == (3, 1) and logprob.shape == entropy.shape == (3,) and value.shape == (3, 1)
    envs.close()
