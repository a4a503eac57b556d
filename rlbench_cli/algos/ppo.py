"""``ppo``: Proximal Policy Optimisation, following CleanRL's ``ppo.py`` / ``ppo_continuous_action.py``.

Semantics
---------
The algorithm is CleanRL's single-file PPO: ``num_envs`` environments are stepped in lock-step for
``num_steps`` steps, advantages come from GAE(``gamma``, ``gae_lambda``), and the policy and value networks
(separate 64x64 tanh MLPs, orthogonal init, policy head gain 0.01, value head gain 1) are trained for
``update_epochs`` epochs of ``num_minibatches`` minibatches with the clipped surrogate objective, the
clipped value loss, an entropy bonus, global gradient-norm clipping and optionally a linearly annealed
learning rate. All hyperparameters live in :class:`PPOConfig` (CleanRL's ``ppo.py`` defaults) and come from
the run's ``params``. Discrete action spaces use a categorical policy; ``Box`` action spaces use a Gaussian
with a state-independent log-std (as ``ppo_continuous_action.py``), actions are clipped to the space bounds
when stepping (the unclipped sample is what is trained on), and observation / reward normalisation
(``normalize_obs``, ``normalize_reward``) can be switched on. On a ``Box`` action space the defaults are
``ppo_continuous_action.py``'s (``CONTINUOUS_DEFAULTS``: learning rate 3e-4, one env, 2048-step rollouts,
32 minibatches, 10 epochs, no entropy bonus, observation and reward normalisation on, both clipped to
+-10), so continuous control works without params; params given in the suite override any of them.
Evaluation sees observations normalised by the training statistics as they stand (they are not updated
by evaluation episodes) and acts with the Gaussian's mean, clipped to the bounds. The training budget is
``ctx.steps`` env steps counted over all envs; the last iteration collects a shorter rollout so a run stops at ``ctx.steps``
(rounded up to a multiple of ``num_envs``). The learning-rate annealing follows the step count.

Vectorisation and autoreset
---------------------------
gymnasium 1.0's vector envs reset an episode on the *next* ``step`` call: that step ignores the action,
returns reward 0, ``done=False`` and the new episode's first observation. Fed to CleanRL's loop unchanged,
every episode boundary would add a bogus transition to the batch. This module therefore does not use
gymnasium's vector envs at all: it keeps a list of plain environments (``ctx.make_env(seed + i)``) and
steps them itself, resetting an environment on the same step its episode ends, exactly like the
gym 0.26 vector envs CleanRL was written for. The episode's true final observation is kept, so a
*truncated* (time-limit) episode is bootstrapped with ``gamma * V(final_obs)`` added to its last reward
(``bootstrap_truncated``, on by default, as in SB3; CleanRL treats truncation like termination).
Episode returns and lengths are tracked here (raw rewards, before any normalisation) and logged as
``train/episode_return`` / ``train/episode_length`` at the step the episode ended.

Speed
-----
During a rollout the weights are fixed, so the actor's forward pass for sampling is done in NumPy on a
copy of the weights taken after each update (a few microseconds per step instead of tens for the torch
dispatch of a tiny MLP); actions are sampled with a NumPy generator seeded from the run seed. Values and
log-probabilities of the collected batch are then computed by torch in one batched forward pass, so the
quantities PPO optimises come from the same network and code path as the update; its values too on CPU,
and away from the CPU by a NumPy copy of the critic kept beside the actor's (see below). Buffers are
preallocated; a rollout step does one NumPy forward and one Python call per env.

Checkpoints (``budget.checkpoint_every``) are taken at iteration boundaries, after the iteration's metrics
and evaluation: the agent, the optimiser, the action-sampling generator and the minibatch-permutation
generator, the environments pickled whole (their state and random generators), the current observations,
the running episode returns and the normalisation statistics. A resumed run continues bitwise as if it had
never stopped (on CPU).

Evaluation uses the shared ``ctx.maybe_evaluate`` with a deterministic policy (argmax / Gaussian mean)
run by torch under ``no_grad`` on the CPU; on a GPU by the rollout's NumPy copy of the actor, which holds
the same weights, so an evaluation step is no trip to the device and back. Runs are deterministic for a
given seed on CPU.

On a GPU every blocking copy between host and device waits for the work queued on the device, and when
several runs share it (``gpus_per_job`` < 1) also for the other runs' turns on it. An iteration of a small
network and batch therefore waits for the device once. The host computes the batch's values with its
NumPy copy of the critic (when that is cheap, ``HOST_VALUES_MACS``; a larger batch is valued on the device,
one more round trip) and the advantages, then sends the batch, its advantages, returns and values and every
epoch's permutation in one copy from a pinned buffer, which the host does not wait for; the
log-probabilities and the update are queued behind it, and the update's statistics and the networks' new
weights come back in one copy, the iteration's one wait (with ``target_kl``, two more copies an epoch: its
permutation there and its approx_kl back for the check).

The policy handed to evaluation is a ``PPOPolicy``: callable on an observation batch (the deterministic
action), ``sample(obs)`` draws from the policy as training does, and ``save(path)`` writes a checkpoint
(the agent's state dict, its config, the action space and the observation-normalisation statistics) that
``load_policy(path)`` restores without the training run. The dataset builder snapshots it this way.
"""

from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from ..checkpoint import dumps_envs, loads_envs
from .adam import FusedAdam, fused_supported
from .base import RunContext
from .params import coerce

__all__ = ["CONTINUOUS_DEFAULTS", "PPO", "PPOConfig", "PPOPolicy", "load_policy"]


@dataclass(frozen=True)
class PPOConfig:
    """PPO hyperparameters. Defaults are CleanRL ``ppo.py``'s; every field can be set from ``params``.

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
        problems = []
        for name in ("learning_rate", "clip_coef", "max_grad_norm", "clip_obs", "clip_reward"):
            if not getattr(self, name) > 0:
                problems.append(f"{name} must be > 0")
        for name in ("num_envs", "num_steps", "num_minibatches", "update_epochs"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be >= 1")
        for name in ("gamma", "gae_lambda"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                problems.append(f"{name} must be in [0, 1]")
        if self.num_minibatches > self.num_envs * self.num_steps:
            problems.append("num_minibatches must be <= num_envs * num_steps")
        if not self.hidden_sizes or any(h < 1 for h in self.hidden_sizes):
            problems.append("hidden_sizes must be a non-empty list of positive ints")
        if self.activation not in _ACTIVATIONS:
            problems.append(f"activation must be one of {', '.join(_ACTIVATIONS)}")
        if self.target_kl is not None and not self.target_kl > 0:
            problems.append("target_kl must be > 0 or null")
        if problems:
            raise ValueError("invalid ppo params: " + "; ".join(problems))

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps


_ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU}

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


def _coerce(name: str, value: Any, default: Any) -> Any:
    """``value`` as the type of the field's default (params may come from YAML or JSON); ``target_kl`` is a
    float or null, and strings (``activation``) are lower-cased."""
    if name == "target_kl":
        return coerce("ppo", name, value, 0.0, optional=True)
    value = coerce("ppo", name, value, default)
    return value.lower() if isinstance(value, str) else value


# -- networks -------------------------------------------------------------------------------------------


def _layer_init(layer: nn.Linear, std: float = math.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias_const)
    return layer


def _mlp(
    n_in: int, hidden: tuple[int, ...], n_out: int, out_std: float, act: type[nn.Module]
) -> nn.Sequential:
    layers: list[nn.Module] = []
    for h in hidden:
        layers += [_layer_init(nn.Linear(n_in, h)), act()]
        n_in = h
    layers.append(_layer_init(nn.Linear(n_in, n_out), std=out_std))
    return nn.Sequential(*layers)


class _Agent(nn.Module):
    """CleanRL's Agent: separate actor and critic MLPs; a free log-std for continuous actions."""

    def __init__(self, obs_dim: int, n_act: int, continuous: bool, cfg: PPOConfig):
        super().__init__()
        act = _ACTIVATIONS[cfg.activation]
        self.continuous = continuous
        self.critic = _mlp(obs_dim, cfg.hidden_sizes, 1, 1.0, act)
        self.actor = _mlp(obs_dim, cfg.hidden_sizes, n_act, 0.01, act)
        self.actor_logstd = (
            nn.Parameter(torch.full((1, n_act), float(cfg.init_log_std))) if continuous else None
        )

    def value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x).squeeze(-1)

    def logprob_entropy(self, x: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probability of ``action`` and the policy's entropy at ``x`` (no torch.distributions)."""
        out = self.actor(x)
        if self.actor_logstd is None:
            logp = torch.log_softmax(out, dim=-1)
            logprob = logp.gather(-1, action.unsqueeze(-1)).squeeze(-1)
            entropy = -(logp.exp() * logp).sum(-1)
            return logprob, entropy
        logstd = self.actor_logstd.expand_as(out)
        z = (action - out) * torch.exp(-logstd)
        logprob = (-0.5 * z.pow(2) - logstd - _HALF_LOG_2PI).sum(-1)
        entropy = (0.5 + _HALF_LOG_2PI + logstd).sum(-1)
        return logprob, entropy


_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


class _NumpyActor:
    """A frozen NumPy copy of the actor for sampling during a rollout (weights refreshed per update); with
    ``critic``, of the critic too, for the batch's values on the host (``value``)."""

    def __init__(self, agent: _Agent, activation: str, critic: bool = False):
        self.agent, self.critic = agent, critic
        self.act = np.tanh if activation == "tanh" else (lambda h: np.maximum(h, 0.0, out=h))
        self.refresh()

    def tensors(self) -> list[torch.Tensor]:
        """The actor's weights, biases (and log-std), then the critic's if kept, in the order ``load`` takes
        them."""
        agent = self.agent
        out = _linear_tensors(agent.actor)
        if agent.actor_logstd is not None:
            out.append(agent.actor_logstd)
        return out + _linear_tensors(agent.critic) if self.critic else out

    def load(self, arrays: list[np.ndarray]) -> None:
        """Take the weights from host copies of ``tensors()`` (fetched with other values in one transfer)."""
        n = len(_linear_tensors(self.agent.actor))
        self.layers = _numpy_layers(arrays[:n])
        if self.agent.actor_logstd is not None:
            self.std = np.exp(arrays[n][0])
            n += 1
        self.critic_layers = _numpy_layers(arrays[n:])

    def refresh(self) -> None:
        self.load(_to_host(self.tensors()))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return _numpy_forward(self.layers, x, self.act)

    def value(self, x: np.ndarray) -> np.ndarray:
        """The critic's values of ``x`` (float32, one per row); needs ``critic``."""
        return _numpy_forward(self.critic_layers, x, self.act)[:, 0]


def _host_side(device: torch.device) -> bool:
    """Whether training acts on the host through its NumPy copy of the actor everywhere, evaluation
    included, and may value the batch there too (``_values_on_host``), so that an iteration waits for the
    device once (see _to_device): away from the CPU. On CPU torch evaluates and computes the values (the
    rollout samples through the NumPy actor either way)."""
    return device.type != "cpu"


# The host values a batch itself when that takes about as long as a trip to the device and back (under a
# millisecond of NumPy: a 512-row CartPole batch through 64x64 is 2.3M multiply-adds); a larger batch or
# critic is valued on the device, at the price of one more wait an iteration.
HOST_VALUES_MACS = 4_000_000


def _values_on_host(device: torch.device, agent: _Agent, rows: int) -> bool:
    """Whether a run's batch of ``rows`` is valued by the NumPy copy of the critic (``_host_side``, and
    cheap: ``HOST_VALUES_MACS``) rather than on the device."""
    macs = sum(m.in_features * m.out_features for m in agent.critic if isinstance(m, nn.Linear))
    return _host_side(device) and rows * macs <= HOST_VALUES_MACS


def _linear_tensors(mlp: nn.Sequential) -> list[torch.Tensor]:
    return [t for m in mlp if isinstance(m, nn.Linear) for t in (m.weight, m.bias)]


def _numpy_layers(arrays: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
    """(weight, bias) pairs as ``x @ w + b`` takes them: each weight's last two axes swapped to (in, out)
    (a stack of seeds' weights keeps its leading seed axis)."""
    return [(np.swapaxes(arrays[i], -1, -2).copy(), arrays[i + 1].copy()) for i in range(0, len(arrays), 2)]


def _numpy_forward(layers: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray, act: Any) -> np.ndarray:
    """An MLP's forward pass in NumPy over ``_numpy_layers``: ``act`` after every layer but the last."""
    *hidden, (w, b) = layers
    for wh, bh in hidden:
        x = act(x @ wh + bh)
    return x @ w + b


def _to_device(arrays: list[np.ndarray], staging: _Staging) -> list[torch.Tensor]:
    """``arrays`` as tensors on ``staging.device`` through one host-to-device copy.

    A blocking copy to a GPU waits for everything queued on the device before it; when several runs share
    a GPU (``gpus_per_job`` < 1) each such wait can also wait for the other runs' turns on it. So the
    arrays are laid out in one byte buffer (each at an 8-byte-aligned offset), copied once, and viewed
    back as their dtypes and shapes on the device. On a CUDA device the ``staging`` buffer is pinned and
    reused, and the copy is queued without waiting for it. On CPU the copy is a no-op and the values are
    the same.
    """
    offsets, total = [], 0
    for a in arrays:
        offsets.append(total)
        total += -(-a.nbytes // 8) * 8
    host = staging.buffer(total)
    view = host.numpy()
    for a, off in zip(arrays, offsets, strict=True):
        view[off : off + a.nbytes] = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    buf = staging.send(host)
    return [buf[off : off + a.nbytes].view(_TORCH_DTYPES[a.dtype]).view(a.shape)
            for a, off in zip(arrays, offsets, strict=True)]  # fmt: skip


class _Staging:
    """A reusable host buffer for ``_to_device``: on a CUDA device pinned, so the copy out of it is queued
    on the stream and the host goes on without waiting (the kernels that read the values are queued after
    it). The buffer is written again only once that copy is done (an event). Elsewhere a fresh buffer each
    time: on CPU the tensors are views of it."""

    def __init__(self, device: torch.device):
        self.device = device
        self.pinned = device.type == "cuda"
        self.host = torch.empty(0, dtype=torch.uint8)
        self.copied: Any = None  # a CUDA event recorded after the last copy out of ``host``

    def buffer(self, nbytes: int) -> torch.Tensor:
        if not self.pinned:
            return torch.empty(nbytes, dtype=torch.uint8)
        if self.copied is not None:
            self.copied.synchronize()
        if len(self.host) < nbytes:
            self.host = torch.empty(max(nbytes, 2 * len(self.host)), dtype=torch.uint8, pin_memory=True)
        return self.host[:nbytes]

    def send(self, host: torch.Tensor) -> torch.Tensor:
        if not self.pinned:
            return host.to(self.device)
        out = host.to(self.device, non_blocking=True)  # queued on the device's current stream
        self.copied = torch.cuda.Event()
        self.copied.record(torch.cuda.current_stream(self.device))
        return out


def _to_host(tensors: list[torch.Tensor]) -> list[np.ndarray]:
    """Host copies of float32 ``tensors`` (any shapes, one device) through one device-to-host copy."""
    flat = torch.cat([t.detach().reshape(-1) for t in tensors]).cpu().numpy()
    out, off = [], 0
    for t in tensors:
        out.append(flat[off : off + t.numel()].reshape(t.shape))
        off += t.numel()
    return out


_TORCH_DTYPES = {np.dtype(d): t for d, t in ((np.float32, torch.float32), (np.int64, torch.int64))}


class _RunningMeanStd:
    """Running mean / variance (parallel Welford), as gymnasium's and SB3's normalisation wrappers."""

    def __init__(self, shape: tuple[int, ...] = ()):
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = 1e-4

    def update(self, x: np.ndarray) -> None:
        b_mean, b_var, b_count = x.mean(0), x.var(0), x.shape[0]
        delta = b_mean - self.mean
        tot = self.count + b_count
        self.mean = self.mean + delta * b_count / tot
        m2 = self.var * self.count + b_var * b_count + delta**2 * self.count * b_count / tot
        self.var = m2 / tot
        self.count = tot


@dataclass(frozen=True)
class _ActionSpec:
    """What a policy needs to know about the action space to turn network outputs into env actions."""

    continuous: bool
    n_act: int  # number of discrete actions, or the flattened size of a Box action
    act_dim: tuple[int, ...]  # shape of one Box action; () for discrete
    offset: int  # Discrete(n, start) maps output index i to action i + start
    low: np.ndarray | None  # Box bounds, flattened (None for discrete)
    high: np.ndarray | None


def _spaces(obs_space: Any, act_space: Any) -> tuple[_ActionSpec, tuple[int, ...]]:
    """The action spec and the observation shape of an env's spaces; a one-line error for spaces ppo cannot
    train on (a non-Box observation, an action space that is neither Discrete nor Box)."""
    import gymnasium as gym

    if not isinstance(obs_space, gym.spaces.Box):
        raise ValueError(f"ppo needs a Box observation space, got {obs_space}")
    if isinstance(act_space, gym.spaces.Discrete):
        space = _ActionSpec(False, int(act_space.n), (), int(act_space.start), None, None)
    elif isinstance(act_space, gym.spaces.Box):
        space = _ActionSpec(True, int(np.prod(act_space.shape)), tuple(act_space.shape), 0,
                            act_space.low.astype(np.float32).reshape(-1),
                            act_space.high.astype(np.float32).reshape(-1))  # fmt: skip
    else:
        raise ValueError(f"ppo supports Discrete and Box action spaces, got {act_space}")
    return space, tuple(obs_space.shape)


_CHECKPOINT_FORMAT = "rlbench-ppo-policy-1"


class PPOPolicy:
    """The actor of a PPO agent as a policy.

    Called on an observation batch it returns the deterministic action (argmax / Gaussian mean clipped to
    the bounds), which is what evaluation scores; ``sample`` draws the action the way training does
    (categorical / Gaussian, clipped), which is what a D4RL-style dataset is collected with. During
    training it reads the live agent and observation statistics, so it always acts as the current policy;
    ``save`` snapshots both.
    """

    def __init__(
        self,
        agent: _Agent,
        cfg: PPOConfig,
        obs_shape: tuple[int, ...],
        space: _ActionSpec,
        obs_rms: _RunningMeanStd | None,
        device: torch.device,
        host_actor: _NumpyActor | None = None,
    ):
        self.agent, self.cfg, self.obs_shape, self.space = agent, cfg, obs_shape, space
        self.obs_rms, self.device, self.host_actor = obs_rms, device, host_actor
        self.obs_dim = int(np.prod(obs_shape))

    def normalize(self, raw: np.ndarray) -> np.ndarray:
        """Observations as the networks see them (running mean/std normalisation, if the run uses it)."""
        if self.obs_rms is None:
            return raw
        out = (raw - self.obs_rms.mean) / np.sqrt(self.obs_rms.var + 1e-8)
        return np.clip(out, -self.cfg.clip_obs, self.cfg.clip_obs).astype(np.float32)

    def _actor_out(self, obs: np.ndarray) -> np.ndarray:
        x = self.normalize(np.asarray(obs, np.float32).reshape(len(obs), self.obs_dim))
        if self.host_actor is not None:  # training's NumPy copy of the actor: no trip to the device a step
            return self.host_actor(x)
        with torch.no_grad():
            return self.agent.actor(torch.as_tensor(x, dtype=torch.float32, device=self.device)).cpu().numpy()

    def _to_env(self, a: np.ndarray, n: int) -> np.ndarray:
        sp = self.space
        if not sp.continuous:
            return a + sp.offset
        return np.clip(a, sp.low, sp.high).reshape(n, *sp.act_dim)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        out = self._actor_out(obs)
        return self._to_env(out if self.space.continuous else out.argmax(-1), len(obs))

    def sample(self, obs: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        """Actions drawn from the policy (pass ``rng`` for a reproducible stream)."""
        rng = rng if rng is not None else np.random.default_rng()
        out = self._actor_out(obs)
        if self.space.continuous:
            h = self.host_actor
            std = h.std if h is not None else np.exp(self.agent.actor_logstd.detach().cpu().numpy()[0])
            return self._to_env(out + std * rng.standard_normal(out.shape).astype(np.float32), len(obs))
        cdf = np.exp(out - out.max(1, keepdims=True)).cumsum(1)
        u = rng.random(len(out))[:, None] * cdf[:, -1:]
        return self._to_env(np.minimum((u >= cdf).sum(1), self.space.n_act - 1), len(obs))

    def save(self, path: str | Path) -> None:
        """A self-contained checkpoint: ``torch.load(path, weights_only=True)`` reads it, ``load_policy``
        turns it back into a policy."""
        rms = self.obs_rms
        stats = (
            None if rms is None else {"mean": rms.mean.tolist(), "var": rms.var.tolist(), "count": rms.count}
        )
        action = dataclasses.asdict(self.space)
        for k in ("low", "high"):
            action[k] = None if action[k] is None else action[k].tolist()
        checkpoint = {
            "format": _CHECKPOINT_FORMAT,
            "config": dataclasses.asdict(self.cfg),
            "obs_shape": list(self.obs_shape),
            "action": action,
            "obs_rms": stats,
            "state_dict": {k: v.detach().cpu() for k, v in self.agent.state_dict().items()},
        }
        torch.save(checkpoint, path)


def load_policy(path: str | Path, device: str = "cpu") -> PPOPolicy:
    """Restore a ``PPOPolicy`` saved by ``PPOPolicy.save``."""
    ck = torch.load(path, map_location=device, weights_only=True)
    if not isinstance(ck, dict) or ck.get("format") != _CHECKPOINT_FORMAT:
        raise ValueError(f"{path}: not an rlbench ppo policy checkpoint")
    c = dict(ck["config"])
    c["hidden_sizes"] = tuple(c["hidden_sizes"])
    cfg = PPOConfig(**c)
    a = dict(ck["action"])
    for k in ("low", "high"):
        a[k] = None if a[k] is None else np.asarray(a[k], np.float32)
    space = _ActionSpec(**{**a, "act_dim": tuple(a["act_dim"])})
    obs_shape = tuple(ck["obs_shape"])
    agent = _Agent(int(np.prod(obs_shape)), space.n_act, space.continuous, cfg).to(device)
    agent.load_state_dict(ck["state_dict"])
    agent.eval()
    rms = None
    if ck["obs_rms"] is not None:
        rms = _RunningMeanStd()
        rms.mean, rms.var = (np.asarray(ck["obs_rms"][k], np.float64) for k in ("mean", "var"))
        rms.count = ck["obs_rms"]["count"]
    return PPOPolicy(agent, cfg, obs_shape, space, rms, torch.device(device))


def _adam(params: Any, lr: float | torch.Tensor, device: torch.device, capturable: bool = False) -> Any:
    """CleanRL's Adam (eps 1e-5); the fused kernel on CPU and CUDA (same maths, ~15% faster on CPU), through
    ``FusedAdam``, which spares a worker's first run torch.optim's import of torch._dynamo (about 2 s)."""
    if fused_supported(device):
        return FusedAdam(params, lr=lr, eps=1e-5, capturable=capturable)
    return torch.optim.Adam(params, lr=lr, eps=1e-5, capturable=capturable)


class _Update:
    """PPO's update of one iteration: ``update_epochs`` passes over the batch in ``num_minibatches`` steps.

    On a CUDA device (``cuda_graph``, the default) one epoch's minibatch steps (forward, losses, backward,
    gradient clipping, Adam) are captured once as a CUDA graph over static batch buffers, and each epoch
    replays it after copying in its permutation: one launch instead of a few hundred small kernels per
    minibatch. Small networks are bound by kernel launches, and several runs sharing a GPU
    (``gpus_per_job`` < 1) then queue one graph each rather than interleaving thousands of tiny kernels.
    The graph computes the same operations in the same order as the eager path, on the same permutations
    (the warm-up before the capture runs on a copy of the state that is then put back, and draws no random
    numbers), so a run's results do not depend on which path ran. A batch of another size (a budget that
    ends mid-iteration) and every CPU run take the eager path; if the capture fails, the run warns and goes
    on eagerly.
    """

    def __init__(self, agent: nn.Module, cfg: PPOConfig, device: torch.device):
        self.agent, self.cfg, self.device = agent, cfg, device
        self.graphed = cfg.cuda_graph and device.type == "cuda"
        lr: float | torch.Tensor = cfg.learning_rate
        if self.graphed:  # a graph reads the learning rate from device memory, so annealing can change it
            lr = torch.tensor(cfg.learning_rate, dtype=torch.float32, device=device)
        self.optimizer = _adam(agent.parameters(), lr, device, capturable=self.graphed)
        self._lr = float(cfg.learning_rate)  # the host's copy: reading a tensor lr would wait for the device
        self.graph: Any = None
        self.static: tuple[torch.Tensor, ...] = ()  # batch buffers, then the permutation
        self.out: dict[str, torch.Tensor] = {}

    # -- learning rate and checkpoints --------------------------------------------------------------------

    @property
    def lr(self) -> float:
        return self._lr

    def set_lr(self, lr: float) -> None:
        self._lr = float(lr)
        for group in self.optimizer.param_groups:
            if isinstance(group["lr"], torch.Tensor):
                group["lr"].fill_(lr)
            else:
                group["lr"] = lr

    def state_dict(self) -> dict[str, Any]:
        """The optimiser's state, portable: a float learning rate and not capturable, as an eager run's."""
        state = self.optimizer.state_dict()
        for group in state["param_groups"]:
            group["lr"], group["capturable"] = float(group["lr"]), False
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        own = [(g["lr"], g["capturable"]) for g in self.optimizer.param_groups]
        self.optimizer.load_state_dict(state)
        for group, (lr, capturable) in zip(self.optimizer.param_groups, own, strict=True):
            if isinstance(lr, torch.Tensor):
                lr.fill_(float(group["lr"]))
                group["lr"] = lr
            group["capturable"] = capturable
        self._lr = float(state["param_groups"][0]["lr"])

    # -- the update ---------------------------------------------------------------------------------------

    def _minibatch(self, batch: tuple[torch.Tensor, ...], mb: torch.Tensor) -> dict[str, torch.Tensor]:
        cfg, agent, optimizer = self.cfg, self.agent, self.optimizer
        b_obs, b_actions, b_logprobs, b_adv, b_returns, b_values = batch
        mb_obs = b_obs[mb]
        newlogprob, entropy = agent.logprob_entropy(mb_obs, b_actions[mb])
        newvalue = agent.value(mb_obs)
        logratio = newlogprob - b_logprobs[mb]
        ratio = logratio.exp()
        with torch.no_grad():
            approx_kl = ((ratio - 1) - logratio).mean()
            clipfrac = ((ratio - 1.0).abs() > cfg.clip_coef).float().mean()
        mb_adv = b_adv[mb]
        if cfg.norm_adv and len(mb) > 1:
            mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
        pg_loss = torch.max(
            -mb_adv * ratio, -mb_adv * torch.clamp(ratio, 1 - cfg.clip_coef, 1 + cfg.clip_coef)
        ).mean()
        mb_returns = b_returns[mb]
        v_loss_unclipped = (newvalue - mb_returns).pow(2)
        if cfg.clip_vloss:
            mb_values = b_values[mb]
            v_clipped = mb_values + torch.clamp(newvalue - mb_values, -cfg.clip_coef, cfg.clip_coef)
            v_loss = 0.5 * torch.max(v_loss_unclipped, (v_clipped - mb_returns).pow(2)).mean()
        else:
            v_loss = 0.5 * v_loss_unclipped.mean()
        entropy_loss = entropy.mean()
        loss = pg_loss - cfg.ent_coef * entropy_loss + cfg.vf_coef * v_loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(agent.parameters(), cfg.max_grad_norm)
        optimizer.step()
        return {"pg_loss": pg_loss, "v_loss": v_loss, "entropy": entropy_loss, "approx_kl": approx_kl,
                "clipfrac": clipfrac}  # fmt: skip

    def _epoch(self, batch: tuple[torch.Tensor, ...], minibatches: Any) -> dict[str, torch.Tensor]:
        """One pass over the batch; the last minibatch's losses and every minibatch's clip fraction."""
        clipfracs = []
        for mb in minibatches:
            out = self._minibatch(batch, mb)
            clipfracs.append(out["clipfrac"])
        out["clipfrac"] = torch.stack(clipfracs)
        return out

    def run(self, batch: tuple[torch.Tensor, ...], perm_gen: torch.Generator) -> dict[str, float]:
        """Update on ``batch`` (obs, actions, log-probs, advantages, returns, values) with permutations from
        ``perm_gen``; the last minibatch's losses and the mean clip fraction, as floats."""
        stats = self.run_tensors(batch, perm_gen)
        return {k: float(v) for k, v in zip(stats, _to_host(list(stats.values())), strict=True)}

    def draw_perms(self, n: int, perm_gen: torch.Generator) -> np.ndarray | None:
        """Every epoch's permutation of a batch of ``n``, drawn up front (``update_epochs`` x ``n``), or None
        with ``target_kl``: then an epoch may stop the update, and each is drawn in turn."""
        if self.cfg.target_kl is not None:
            return None
        return torch.stack(
            [torch.randperm(n, generator=perm_gen) for _ in range(self.cfg.update_epochs)]
        ).numpy()

    def run_tensors(
        self, batch: tuple[torch.Tensor, ...], perm_gen: torch.Generator, perms: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        """``run``'s statistics as 0-d tensors on the device, so the caller fetches them with other values in
        one transfer. Without ``target_kl`` no epoch needs a value on the host: every epoch's permutation is
        drawn first (``draw_perms``, the same draws in the same order) and reaches the device at once, in
        ``perms`` when the caller sent it with the batch."""
        cfg = self.cfg
        n = len(batch[0])
        n_mb = min(cfg.num_minibatches, n)
        use_graph = self.graphed and n % n_mb == 0 and self._ready(batch, n_mb)
        if perms is None and cfg.target_kl is None:
            perms = torch.from_numpy(self.draw_perms(n, perm_gen)).to(self.device)  # type: ignore[arg-type]
        clipfracs: list[torch.Tensor] = []
        for epoch in range(cfg.update_epochs):
            perm = (
                perms[epoch] if perms is not None else torch.randperm(n, generator=perm_gen).to(self.device)
            )
            if use_graph:
                self.static[-1].copy_(perm)
                self.graph.replay()
                out = self.out
            else:
                out = self._epoch(batch, torch.tensor_split(perm, n_mb))
            clipfracs.append(out["clipfrac"].clone() if use_graph else out["clipfrac"])
            if cfg.target_kl is not None and out["approx_kl"].item() > cfg.target_kl:
                break
        stats = {k: out[k] for k in ("pg_loss", "v_loss", "entropy", "approx_kl")}
        stats["clipfrac"] = torch.cat(clipfracs).mean()
        return stats

    def _ready(self, batch: tuple[torch.Tensor, ...], n_mb: int) -> bool:
        """Copy ``batch`` into the graph's buffers, capturing the graph first if there is none yet for this
        batch size; False (and the eager path from then on) if capturing failed."""
        n = len(batch[0])
        if self.graph is not None and len(self.static[0]) == n:
            for buf, x in zip(self.static[:-1], batch, strict=True):
                buf.copy_(x)
            return True
        if self.graph is not None:  # another batch size (the budget's last, short iteration): eager
            return False
        try:
            self._capture(batch, n_mb)
            return True
        except Exception as exc:  # noqa: BLE001 - any failure to capture leaves the eager path, which works
            import warnings

            warnings.warn(f"ppo: CUDA graph capture failed ({exc!r}); updating eagerly", stacklevel=2)
            self.graphed, self.graph = False, None
            return False

    def _capture(self, batch: tuple[torch.Tensor, ...], n_mb: int) -> None:
        n = len(batch[0])
        self.static = (*(x.clone() for x in batch), torch.arange(n, device=self.device))
        minibatches = self.static[-1].view(n_mb, n // n_mb)
        params = list(self.agent.parameters())
        opt_state = self.optimizer.state
        saved_params = [p.detach().clone() for p in params]
        saved_state = {p: {k: v.clone() for k, v in opt_state[p].items() if isinstance(v, torch.Tensor)}
                       for p in params if p in opt_state}  # fmt: skip
        try:
            # warm up on a side stream (lazy Adam state, cuBLAS workspaces), then put every value back
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                for _ in range(2):
                    self._epoch(self.static[:-1], minibatches)
            torch.cuda.current_stream(self.device).wait_stream(side)
            self.optimizer.zero_grad(set_to_none=True)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self.out = self._epoch(self.static[:-1], minibatches)
            self.graph = graph
        finally:
            with torch.no_grad():
                for p, value in zip(params, saved_params, strict=True):
                    p.copy_(value)
                for p in params:
                    for k, v in opt_state.get(p, {}).items():
                        if isinstance(v, torch.Tensor):
                            if p in saved_state:
                                v.copy_(saved_state[p][k])
                            else:
                                v.zero_()  # Adam's state as it is created: zero moments, step 0
            self.optimizer.zero_grad(set_to_none=True)


# -- the adapter -----------------------------------------------------------------------------------------


class PPO:
    name: ClassVar[str] = "ppo"

    @staticmethod
    def check_params(params: dict[str, Any]) -> None:
        """What ``PPOConfig.from_params`` refuses for every kind of action space (the env decides the kind,
        and so the defaults, when the run starts; a value refused with one kind's defaults only is the
        run's to report)."""
        try:
            PPOConfig.from_params(params, continuous=False)
        except ValueError:
            PPOConfig.from_params(params, continuous=True)

    def train(self, ctx: RunContext) -> None:

        seed = ctx.seed
        random.seed(seed)
        np.random.seed(seed % 2**32)
        torch.manual_seed(seed)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
        rng = np.random.default_rng(seed)  # action sampling
        perm_gen = torch.Generator().manual_seed(seed)  # minibatch permutations
        device = torch.device(ctx.device)

        first = ctx.make_env(seed)
        space, obs_shape = _spaces(first.observation_space, first.action_space)
        cfg = PPOConfig.from_params(ctx.params, continuous=space.continuous)  # Box: CONTINUOUS_DEFAULTS
        n_envs, total = cfg.num_envs, ctx.steps
        envs = [first] + [ctx.make_env(seed + i) for i in range(1, n_envs)]
        continuous, n_act, act_dim, low, high = space.continuous, space.n_act, space.act_dim, space.low, space.high  # fmt: skip
        act_offset = space.offset
        obs_dim = int(np.prod(obs_shape))

        agent = _Agent(obs_dim, n_act, continuous, cfg).to(device)
        update = _Update(agent, cfg, device)
        on_host = _host_side(device)
        host_values = _values_on_host(device, agent, (cfg.num_steps + 1) * n_envs)
        np_actor = _NumpyActor(agent, cfg.activation, critic=host_values)
        staging = _Staging(device)

        obs_rms = _RunningMeanStd((obs_dim,)) if cfg.normalize_obs else None
        ret_rms = _RunningMeanStd() if cfg.normalize_reward else None
        disc_ret = np.zeros(n_envs, np.float64)

        # on a GPU, evaluation acts through the NumPy actor too (a device round trip per step otherwise)
        policy = PPOPolicy(agent, cfg, obs_shape, space, obs_rms, device,
                           host_actor=np_actor if on_host else None)  # fmt: skip
        norm_obs = policy.normalize

        # Preallocated rollout storage (NumPy; handed to torch once per iteration).
        T = cfg.num_steps
        obs_buf = np.zeros((T, n_envs, obs_dim), np.float32)
        act_buf = np.zeros((T, n_envs, n_act), np.float32) if continuous else np.zeros((T, n_envs), np.int64)
        rew_buf = np.zeros((T, n_envs), np.float32)
        done_buf = np.zeros((T, n_envs), np.float32)  # the episode ended (either way) after step t
        raw_obs = np.zeros((n_envs, obs_dim), np.float32)
        for i, env in enumerate(envs):
            raw_obs[i] = np.asarray(env.reset(seed=seed + i)[0], np.float32).reshape(-1)
        if obs_rms is not None:
            obs_rms.update(raw_obs)
        next_obs = norm_obs(raw_obs)
        ep_ret = np.zeros(n_envs, np.float64)
        ep_len = np.zeros(n_envs, np.int64)
        ep_cost = np.full(
            n_envs, np.nan
        )  # an episode's safety cost (info["cost"]); NaN: the env reports none

        global_step = 0
        state = ctx.resume()
        if state is not None:
            global_step = int(state["global_step"])
            agent.load_state_dict(state["agent"])
            update.load_state_dict(state["optimizer"])
            np_actor.refresh()
            rng = state["rng"]
            perm_gen.set_state(state["perm_gen"])
            envs = loads_envs(state["envs"])
            raw_obs[:], ep_ret[:], ep_len[:], disc_ret[:] = (
                state[k] for k in ("raw_obs", "ep_ret", "ep_len", "disc_ret")
            )
            if "ep_cost" in state:  # checkpoints from before costs were logged lack it
                ep_cost[:] = state["ep_cost"]
            for rms, saved in ((obs_rms, state["obs_rms"]), (ret_rms, state["ret_rms"])):
                if rms is not None:
                    rms.mean, rms.var, rms.count = saved
            next_obs = norm_obs(raw_obs)
        else:
            ctx.maybe_evaluate(0, policy)
        while global_step < total:
            steps_now = min(T, -(-(total - global_step) // n_envs))
            if cfg.anneal_lr:
                lr = cfg.learning_rate * (1.0 - global_step / total)
                update.set_lr(lr)
            lr_now = update.lr

            # -- rollout ----------------------------------------------------------------------------
            trunc_at: list[tuple[int, int]] = []  # (t, env) of truncations to bootstrap
            trunc_obs: list[np.ndarray] = []
            for t in range(steps_now):
                obs_buf[t] = next_obs
                out = np_actor(next_obs)
                if continuous:
                    sample = out + np_actor.std * rng.standard_normal(out.shape, dtype=np.float32)
                    act_buf[t] = sample
                    env_actions = np.clip(sample, low, high).reshape(n_envs, *act_dim)
                else:
                    cdf = np.exp(out - out.max(1, keepdims=True)).cumsum(1)
                    u = rng.random(n_envs)[:, None] * cdf[:, -1:]
                    a = np.minimum((u >= cdf).sum(1), n_act - 1)
                    act_buf[t] = a
                    env_actions = (a + act_offset).tolist()
                global_step += n_envs
                rew = rew_buf[t]
                done = done_buf[t]
                for i in range(n_envs):
                    o, r, term, trunc, info = envs[i].step(env_actions[i])
                    rew[i] = r
                    ep_ret[i] += r
                    ep_len[i] += 1
                    if "cost" in info:
                        ep_cost[i] = np.nan_to_num(ep_cost[i]) + float(info["cost"])
                    if term or trunc:
                        done[i] = 1.0
                        cost = None if np.isnan(ep_cost[i]) else float(ep_cost[i])
                        ctx.log_episode(global_step, float(ep_ret[i]), int(ep_len[i]), cost)
                        ep_ret[i], ep_len[i], ep_cost[i] = 0.0, 0, np.nan
                        if trunc and not term and cfg.bootstrap_truncated:
                            trunc_at.append((t, i))
                            trunc_obs.append(np.asarray(o, np.float32).reshape(-1))
                        o, _ = envs[i].reset()
                    else:
                        done[i] = 0.0
                    raw_obs[i] = np.asarray(o, np.float32).reshape(-1)
                if ret_rms is not None:
                    disc_ret[:] = disc_ret * cfg.gamma + rew
                    ret_rms.update(disc_ret)
                    rew[:] = np.clip(rew / np.sqrt(ret_rms.var + 1e-8), -cfg.clip_reward, cfg.clip_reward)
                    disc_ret[done > 0] = 0.0
                if obs_rms is not None:
                    obs_rms.update(raw_obs)
                next_obs = norm_obs(raw_obs)

            # -- values, GAE, log-probs --------------------------------------------------------------
            # one copy to the device (the batch, its advantages and every epoch's permutation), one back
            n = steps_now * n_envs
            obs_np = obs_buf[:steps_now].reshape(n, obs_dim)
            to_value = [obs_np, next_obs]
            if trunc_obs:
                to_value.append(norm_obs(np.stack(trunc_obs)))
            to_value_np = np.concatenate(to_value).astype(np.float32, copy=False)
            if host_values:
                v_all = np_actor.value(to_value_np)
            else:  # on CPU both copies are no-ops
                with torch.no_grad():
                    (v_all,) = _to_host([agent.value(_to_device([to_value_np], staging)[0])])
            values = v_all[:n].reshape(steps_now, n_envs)
            next_value = v_all[n : n + n_envs]
            rewards = rew_buf[:steps_now].copy()
            for k, (t, i) in enumerate(trunc_at):
                rewards[t, i] += cfg.gamma * v_all[n + n_envs + k]
            not_done = 1.0 - done_buf[:steps_now]
            advantages = np.zeros((steps_now, n_envs), np.float32)
            last = np.zeros(n_envs, np.float32)
            for t in reversed(range(steps_now)):
                nv = next_value if t == steps_now - 1 else values[t + 1]
                delta = rewards[t] + cfg.gamma * nv * not_done[t] - values[t]
                last = delta + cfg.gamma * cfg.gae_lambda * not_done[t] * last
                advantages[t] = last
            returns = advantages + values
            perms_np = update.draw_perms(n, perm_gen)
            b_obs, b_actions, b_adv, b_returns, b_values, *b_perms = _to_device(
                [obs_np, act_buf[:steps_now].reshape(n, *act_buf.shape[2:]), advantages.reshape(n),
                 returns.reshape(n), values.reshape(n), *([] if perms_np is None else [perms_np])],
                staging)  # fmt: skip
            with torch.no_grad():
                b_logprobs, _ = agent.logprob_entropy(b_obs, b_actions)

            # -- update: its statistics and the networks' new weights come back in one copy ----------
            batch = (b_obs, b_actions, b_logprobs, b_adv, b_returns, b_values)
            stat_t = update.run_tensors(batch, perm_gen, b_perms[0] if b_perms else None)
            fetched = _to_host([*stat_t.values(), *np_actor.tensors()])
            stats = {k: float(v) for k, v in zip(stat_t, fetched)}
            np_actor.load(fetched[len(stat_t) :])

            var_y = float(np.var(returns))
            explained_var = float("nan") if var_y == 0 else 1.0 - float(np.var(returns - values)) / var_y
            ctx.sink.log(
                global_step,
                **{
                    "train/loss/policy": stats["pg_loss"],
                    "train/loss/value": stats["v_loss"],
                    "train/entropy": stats["entropy"],
                    "train/approx_kl": stats["approx_kl"],
                    "train/clipfrac": stats["clipfrac"],
                    "train/learning_rate": lr_now,
                    "train/explained_variance": explained_var,
                },
            )
            ctx.log_system(global_step)
            ctx.maybe_evaluate(global_step, policy)
            if ctx.checkpoint_due(global_step):
                # at an iteration boundary everything the next iteration reads is here: the envs are
                # pickled whole (their state and RNGs), the rollout buffers are rewritten before use
                ctx.save_checkpoint(global_step, {
                    "global_step": global_step, "agent": agent.state_dict(),
                    "optimizer": update.state_dict(), "rng": rng, "perm_gen": perm_gen.get_state(),
                    "envs": dumps_envs(envs), "raw_obs": raw_obs, "ep_ret": ep_ret, "ep_len": ep_len, "disc_ret": disc_ret,
                    "ep_cost": ep_cost,
                    "obs_rms": None if obs_rms is None else (obs_rms.mean, obs_rms.var, obs_rms.count),
                    "ret_rms": None if ret_rms is None else (ret_rms.mean, ret_rms.var, ret_rms.count),
                })  # fmt: skip
            if ctx.should_stop():
                break
        ctx.finish(global_step, policy)
        for env in envs:
            env.close()
