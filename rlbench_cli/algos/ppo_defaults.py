"""What torch ``ppo`` (``algos.ppo.config``) and ``ppo_jax`` (``algos.gymnax.ppo_config``) share about their
params, torch- and JAX-free: ``CONTINUOUS_DEFAULTS`` and the checks on the values both take (``problems``)."""

from __future__ import annotations

from typing import Any

__all__ = ["ACTIVATIONS", "CONTINUOUS_DEFAULTS", "problems"]

# the hidden layers' activation by name
ACTIVATIONS = ("tanh", "relu")

# CleanRL ppo_continuous_action.py's hyperparameters where they differ from ppo.py's: the defaults of a run
# on a Box action space (its other values, gamma 0.99, gae_lambda 0.95, clip 0.2, clipped value loss, vf_coef
# 0.5, max_grad_norm 0.5, annealed lr, normalised advantages, 64x64 tanh, are the same in both scripts).
# Observations are normalised by running statistics and clipped to +-10, rewards scaled by the running std
# of the discounted return and clipped to +-10, actions clipped to the bounds: its wrappers, done here.
CONTINUOUS_DEFAULTS: dict[str, Any] = {
    "learning_rate": 3e-4,
    "num_envs": 1,
    "num_steps": 2048,
    "num_minibatches": 32,
    "update_epochs": 10,
    "ent_coef": 0.0,
    "normalize_obs": True,
    "normalize_reward": True,
}


def problems(cfg: Any) -> list[str]:
    """What is wrong with the values of a PPO config (either algorithm's), one phrase each."""
    out = []
    for name in ("learning_rate", "clip_coef", "max_grad_norm", "clip_obs", "clip_reward"):
        if not getattr(cfg, name) > 0:
            out.append(f"{name} must be > 0")
    for name in ("num_envs", "num_steps", "num_minibatches", "update_epochs"):
        if getattr(cfg, name) < 1:
            out.append(f"{name} must be >= 1")
    for name in ("gamma", "gae_lambda"):
        if not 0.0 <= getattr(cfg, name) <= 1.0:
            out.append(f"{name} must be in [0, 1]")
    if not cfg.hidden_sizes or any(h < 1 for h in cfg.hidden_sizes):
        out.append("hidden_sizes must be a non-empty list of positive ints")
    if cfg.activation not in ACTIVATIONS:
        out.append(f"activation must be one of {', '.join(ACTIVATIONS)}")
    return out
