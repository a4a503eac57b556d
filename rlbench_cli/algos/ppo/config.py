"""ppo's hyperparameters: ``PPOConfig`` (CleanRL ``py``'s defaults) and ``CONTINUOUS_DEFAULTS``
(``ppo_continuous_action.py``'s, on a ``Box`` action space)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..params import coerce
from ..ppo_defaults import ACTIVATIONS, CONTINUOUS_DEFAULTS
from ..ppo_defaults import problems as ppo_problems

__all__ = ["ACTIVATIONS", "CONTINUOUS_DEFAULTS", "PPOConfig"]


@dataclass(frozen=True)
class PPOConfig:
    """PPO hyperparameters. Defaults are CleanRL ``py``'s; every field can be set from ``params``.

    For a ``Box`` action space, ``from_params(params, continuous=True)`` starts from
    ``CONTINUOUS_DEFAULTS`` instead, CleanRL ``ppo_continuous_action.py``'s values (learning_rate 3e-4,
    num_envs 1, num_steps 2048, num_minibatches 32, update_epochs 10, ent_coef 0.0, normalize_obs and
    normalize_reward on); a param given in the suite still overrides any of them.
    """

    learning_rate: float = 2.5e-4  # Adam step size (eps 1e-5, as CleanRL)
    num_envs: int = 4  # environments stepped in lock-step
    num_steps: int = 128  # rollout length per env per iteration; batch = num_envs * num_steps
    anneal_lr: bool = True  # decay the learning rate linearly to 0 over the budget
    gamma: float = 0.99  # discount factor
    gae_lambda: float = 0.95  # GAE lambda
    num_minibatches: int = 4  # minibatches per epoch; minibatch size = batch // num_minibatches
    update_epochs: int = 4  # passes over the batch per iteration
    norm_adv: bool = True  # normalise advantages per minibatch
    clip_coef: float = 0.2  # surrogate clipping coefficient (also clips the value update)
    clip_vloss: bool = True  # use the clipped value loss
    ent_coef: float = 0.01  # entropy bonus coefficient
    vf_coef: float = 0.5  # value loss coefficient
    max_grad_norm: float = 0.5  # global gradient-norm clip
    target_kl: float | None = None  # stop the epochs of an iteration early once approx_kl exceeds this
    hidden_sizes: tuple[int, ...] = (64, 64)  # hidden layers of both the actor and the critic
    activation: str = "tanh"  # "tanh" or "relu"
    bootstrap_truncated: bool = True  # bootstrap time-limit truncations with V(final obs)
    normalize_obs: bool = False  # running mean/std observation normalisation (shared over envs)
    clip_obs: float = 10.0  # clip normalised observations to +-clip_obs
    normalize_reward: bool = False  # scale rewards by the running std of the discounted return
    clip_reward: float = 10.0  # clip normalised rewards to +-clip_reward
    init_log_std: float = 0.0  # initial log-std of the Gaussian policy (continuous actions only)
    cuda_graph: bool = True  # on a CUDA device, replay each epoch's minibatch updates as one CUDA graph

    @classmethod
    def from_params(cls, params: dict[str, Any], continuous: bool = False) -> PPOConfig:
        """Build a config from run params, coercing YAML-ish values; unknown keys raise ValueError.

        ``continuous``: the env has a ``Box`` action space, so ``CONTINUOUS_DEFAULTS`` replace the
        discrete defaults (the params still override them)."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(params) - set(fields))
        if unknown:
            raise ValueError(
                f"unknown ppo param(s) {', '.join(map(repr, unknown))}; valid params are: {', '.join(fields)}"
            )
        values = dict(CONTINUOUS_DEFAULTS) if continuous else {}
        values.update({k: _coerce(k, v, fields[k].default) for k, v in params.items()})
        cfg = cls(**values)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        problems = ppo_problems(self)
        if self.num_minibatches > self.num_envs * self.num_steps:
            problems.append("num_minibatches must be <= num_envs * num_steps")
        if self.target_kl is not None and not self.target_kl > 0:
            problems.append("target_kl must be > 0 or null")
        if problems:
            raise ValueError("invalid ppo params: " + "; ".join(problems))

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps


def _coerce(name: str, value: Any, default: Any) -> Any:
    """``value`` as the type of the field's default (params may come from YAML or JSON); ``target_kl`` is a
    float or null, and strings (``activation``) are lower-cased."""
    if name == "target_kl":
        return coerce("ppo", name, value, 0.0, optional=True)
    value = coerce("ppo", name, value, default)
    return value.lower() if isinstance(value, str) else value
