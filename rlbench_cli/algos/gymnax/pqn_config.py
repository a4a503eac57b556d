"""pqn_jax's hyperparameters: ``PQNJaxConfig``, the defaults of PQN's CartPole configuration (Gallici et al.,
"Simplifying Deep Temporal Difference Learning", purejaxql's config/alg/pqn_cartpole.yaml), in rlbench's
names where torch ``ppo`` has the same knob. Imports no JAX."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..params import coerce

__all__ = ["PQNJaxConfig"]


@dataclass(frozen=True)
class PQNJaxConfig:
    """PQN hyperparameters (purejaxql's name in brackets where it differs)."""

    learning_rate: float = 1e-4  # RAdam step size [LR]
    num_envs: int = 32  # environments stepped in lock step
    num_steps: int = 64  # rollout length per env per iteration
    anneal_lr: bool = True  # decay the learning rate linearly to 0 over the budget [LR_LINEAR_DECAY]
    gamma: float = 0.99
    q_lambda: float = 0.95  # the lambda of the Q(lambda) targets [LAMBDA]
    num_minibatches: int = 16
    update_epochs: int = 4  # passes over the batch per iteration [NUM_EPOCHS]
    max_grad_norm: float = 10.0
    hidden_sizes: tuple[int, ...] = (256, 256)  # [HIDDEN_SIZE x NUM_LAYERS]
    layer_norm: bool = True  # LayerNorm before each hidden ReLU [NORM_TYPE layer_norm]
    eps_start: float = 1.0  # epsilon-greedy exploration, linear from eps_start ...
    eps_finish: float = 0.2  # ... to eps_finish ...
    eps_decay: float = 0.2  # ... over this share of the training's iterations
    reward_scale: float = 0.1  # rewards are multiplied by it for learning [REW_SCALE]
    bootstrap_truncated: bool = True  # bootstrap time-limit truncations with max Q(final obs), as ppo does

    @classmethod
    def from_params(cls, params: dict[str, Any], continuous: bool = False) -> PQNJaxConfig:
        """A config from run params; ValueError for a param it does not take or a value it cannot.
        (``continuous`` is refused where the suite loads: PQN acts on discrete actions.)"""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(params) - set(fields))
        if unknown:
            raise ValueError(f"unknown pqn_jax param(s) {', '.join(map(repr, unknown))}; valid params are: "
                             f"{', '.join(fields)}")  # fmt: skip
        cfg = cls(**{k: coerce("pqn_jax", k, v, fields[k].default) for k, v in params.items()})
        problems = [f"{k} must be > 0" for k in ("learning_rate", "max_grad_norm", "reward_scale")
                    if not getattr(cfg, k) > 0]  # fmt: skip
        problems += [f"{k} must be >= 1" for k in ("num_envs", "num_steps", "num_minibatches", "update_epochs")
                     if getattr(cfg, k) < 1]  # fmt: skip
        problems += [f"{k} must be in [0, 1]" for k in ("gamma", "q_lambda", "eps_start", "eps_finish", "eps_decay")
                     if not 0.0 <= getattr(cfg, k) <= 1.0]  # fmt: skip
        if cfg.num_minibatches >= 1 and cfg.batch_size % cfg.num_minibatches:
            problems.append(f"num_envs * num_steps ({cfg.batch_size}) must be a multiple of num_minibatches")
        if not cfg.hidden_sizes or any(h < 1 for h in cfg.hidden_sizes):
            problems.append("hidden_sizes must be a non-empty list of positive ints")
        if problems:
            raise ValueError("invalid pqn_jax params: " + "; ".join(problems))
        return cfg

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps
