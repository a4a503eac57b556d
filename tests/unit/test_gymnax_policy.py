"""A kept policy of ppo_jax / pqn_jax (``algos.gymnax.policy``) without JAX: its state flattened into an .npz
and back, and its NumPy forward pass (how it plays in gymnasium) against the same network written out."""

import numpy as np
import pytest

from rlbench_cli.algos.gymnax.policy import GymnaxPolicy, flatten, load_policy, unflatten

pytestmark = pytest.mark.fast


def _layers(rng, dims):
    return [(rng.normal(size=(a, b)).astype(np.float32), rng.normal(size=b).astype(np.float32))
            for a, b in zip(dims[:-1], dims[1:])]  # fmt: skip


def test_a_policy_state_flattens_and_comes_back():
    rng = np.random.default_rng(0)
    tree = {"params": {"actor": _layers(rng, [4, 8, 2])}, "obs_rms": (np.zeros(4), np.ones(4), np.float32(3))}
    flat = flatten(tree)
    assert sorted(flat) == ["obs_rms/0", "obs_rms/1", "obs_rms/2", "params/actor/0/0", "params/actor/0/1",
                            "params/actor/1/0", "params/actor/1/1"]  # fmt: skip
    back = unflatten(flat)
    assert back["obs_rms"][2] == 3 and len(back["params"]["actor"]) == 2
    assert np.array_equal(back["params"]["actor"][1][0], tree["params"]["actor"][1][0])


def test_saved_and_loaded_it_acts_as_its_network_does(tmp_path):
    rng = np.random.default_rng(1)
    actor = _layers(rng, [4, 16, 16, 2])
    mean, var = rng.normal(size=4), rng.uniform(0.5, 2.0, size=4)
    meta = {"program": "ppo", "params": {"hidden_sizes": [16, 16], "normalize_obs": True},
            "env_id": "gymnax/CartPole-v1", "continuous": False, "seed": 3}  # fmt: skip
    tree = {"params": {"actor": actor}, "obs_rms": (mean, var, np.float32(10))}
    GymnaxPolicy(meta, fetch=lambda: flatten(tree)).save(tmp_path / "policy.npz")
    policy = load_policy(tmp_path / "policy.npz")
    assert policy.meta == meta
    obs = rng.normal(size=(5, 4)).astype(np.float32)
    x = np.clip((obs - mean) / np.sqrt(var + 1e-8), -10, 10)
    for j, (W, b) in enumerate(actor):
        x = x @ W + b
        x = np.tanh(x) if j < 2 else x
    assert np.array_equal(policy(obs), x.argmax(-1))


def test_a_q_network_acts_greedily_with_layer_norm(tmp_path):
    rng = np.random.default_rng(2)
    q = _layers(rng, [4, 8, 3])
    meta = {
        "program": "pqn",
        "params": {"hidden_sizes": [8]},
        "env_id": "gymnax/Acrobot-v1",
        "continuous": False,
    }
    GymnaxPolicy(meta, arrays=flatten({"params": q})).save(tmp_path / "p.npz")
    obs = rng.normal(size=(6, 4)).astype(np.float32)
    h = obs @ q[0][0] + q[0][1]
    h = np.maximum((h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-6), 0)
    assert np.array_equal(load_policy(tmp_path / "p.npz")(obs), (h @ q[1][0] + q[1][1]).argmax(-1))
