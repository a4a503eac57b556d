"""ppo_jax's hyperparameters: ``PPOJaxConfig``, torch ``ppo``'s names and defaults (CleanRL ``ppo.py``'s; on a
``Box`` action space ``ppo_continuous_action.py``'s, ``ppo_defaults.CONTINUOUS_DEFAULTS``) for the params it
implements.
Imports no JAX (``rlbench validate`` checks params with it) and no torch (so it does not import ``algos.ppo``,
whose package does: ``tests/unit/test_ppo_jax.py`` holds the two tables equal)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..params import coerce
from ..ppo_defaults import ACTIVATIONS, CONTINUOUS_DEFAULTS
from ..ppo_defaults import problems as ppo_problems

__all__ = ["ACTIVATIONS", "CONTINUOUS_DEFAULTS", "NOT_HERE", "PPOJaxConfig"]

# torch ppo's params that ppo_jax does not take, and why (its refusal says so)
NOT_HERE = {
    "target_kl": "a compiled update cannot stop its epochs early per seed",
    "cuda_graph": "XLA compiles the whole training",
}


@dataclass(frozen=True)
class PPOJaxConfig:
    """PPO hyperparameters, as torch ``ppo``'s ``PPOConfig`` names them (see its comments)."""

    learning_rate: float = 2.5e-4
    num_envs: int = 4
    num_steps: int = 128
    anneal_lr: bool = True
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    norm_adv: bool = True
    clip_coef: float = 0.2
    clip_vloss: bool = True
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    bootstrap_truncated: bool = True
    normalize_obs: bool = False
    clip_obs: float = 10.0
    normalize_reward: bool = False
    clip_reward: float = 10.0
    init_log_std: float = 0.0

    @classmethod
    def from_params(cls, params: dict[str, Any], continuous: bool = False) -> PPOJaxConfig:
        """A config from run params (YAML-ish values read as the defaults' types); ValueError for a param it
        does not take or a value it cannot. ``continuous``: start from ``CONTINUOUS_DEFAULTS``."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        torch_only = sorted(set(params) & set(NOT_HERE))
        if torch_only:
            k = torch_only[0]
            raise ValueError(f"ppo_jax does not take {k!r} ({NOT_HERE[k]}); remove it or use ppo")
        unknown = sorted(set(params) - set(fields))
        if unknown:
            raise ValueError(f"unknown ppo_jax param(s) {', '.join(map(repr, unknown))}; valid params are: "
                             f"{', '.join(fields)}")  # fmt: skip
        values = dict(CONTINUOUS_DEFAULTS) if continuous else {}
        for k, v in params.items():
            v = coerce("ppo_jax", k, v, fields[k].default)
            values[k] = v.lower() if isinstance(v, str) else v
        cfg = cls(**values)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        problems = ppo_problems(self)
        if self.num_minibatches >= 1 and self.batch_size % self.num_minibatches:
            problems.append(f"num_envs * num_steps ({self.batch_size}) must be a multiple of num_minibatches "
                            f"({self.num_minibatches}): a compiled update takes equal minibatches")  # fmt: skip
        if problems:
            raise ValueError("invalid ppo_jax params: " + "; ".join(problems))

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps
