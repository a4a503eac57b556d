"""``dqn``, ``double_dqn``, ``sac``, ``td3`` and ``ddpg``: d3rlpy 2.8 algorithms trained online by
rlbench's copy of d3rlpy's ``fit_online`` loop.

One base class, ``D3rlpyOnline``, does the work; an algorithm is a row of ``_Spec`` (its d3rlpy config
class, discrete or continuous, which config fields take the encoder, how it explores). Adding another
d3rlpy algorithm is a few lines (``TD3`` at the end of this module is one)::

    class TD3(D3rlpyOnline):
        name: ClassVar[str] = "td3"
        spec = _Spec(d3rlpy.algos.TD3Config, discrete=False, encoder_fields=_ACTOR_CRITIC, explore="normal")

Parameters (``ctx.params``): a key that is a plain (number/bool/string) field of the d3rlpy config goes
to the config (``learning_rate``, ``batch_size``, ``gamma``, ``target_update_interval``, ``n_critics``, ...);
the rest are rlbench-level, see ``RUN_PARAMS``. Defaults are d3rlpy's, except that continuous algorithms
get a min-max action scaler fitted to the action space (so a tanh policy covers the whole action range).

Exploration: ``dqn`` and ``double_dqn`` are epsilon-greedy with a linear decay (``EPSILON_PARAMS``);
``td3`` and ``ddpg`` add Gaussian noise to the greedy action (d3rlpy's ``NormalNoise``, ``NOISE_PARAMS``:
``explore_noise`` is its std, d3rlpy's default 0.1, in the env's action units, and the noisy action is
clipped to the action range); ``sac`` samples from its stochastic policy.

rlbench does the bookkeeping, d3rlpy the training: the loop is d3rlpy 2.8.1's ``fit_online``, step for
step (same actions, buffer writes, updates and loss averages, so the same results for a seed), written out
here so that a run can checkpoint and resume at any step; d3rlpy writes no files (the per-update losses go
to ``train/loss/<name>``, averaged as d3rlpy's logger does), evaluation goes through ``ctx.maybe_evaluate``
(d3rlpy's own ``eval_env`` is never used), and training episodes are counted by a thin gymnasium wrapper
around the training env.

Checkpoints (``budget.checkpoint_every``, checked every step): the d3rlpy impl's modules (networks, target
networks, optimisers) and its gradient-step counter, the replay buffer, the training env pickled whole (with
its episode counters), the current observation and the losses not yet logged; the global RNG states
(NumPy's drives exploration and batch sampling, torch's the updates) are saved by the runner. The replay buffer is a numpy ring buffer
with d3rlpy's transition semantics (``_ArrayReplayBuffer``): d3rlpy's own samples a batch in a Python loop,
which cost as much as the update itself on small networks (``replay_buffer: d3rlpy`` switches back).

Note ``target_update_interval`` counts gradient steps in d3rlpy (environment steps in Stable-Baselines3).

The policy handed to evaluation is a ``D3rlpyPolicy``: callable (``predict``), ``sample`` (``sample_action``)
and ``save`` (d3rlpy's ``algo.save`` file, restored by ``load_policy``); the dataset builder snapshots it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar, Literal

import gymnasium
import numpy as np

from ..checkpoint import dumps_envs, loads_envs
from .base import RunContext
from .params import INT_LIST, coerce_all


def _import_d3rlpy() -> Any:
    """``import d3rlpy``, without the legacy-gym deprecation notice its import prints to stderr."""
    buf = io.StringIO()
    try:
        with contextlib.redirect_stderr(buf):
            import d3rlpy
    finally:
        text = buf.getvalue()
        if "Gym has been unmaintained" in text:
            # the notice is one paragraph, ended by a blank line; keep anything else that was printed
            text = "\n".join(p for p in text.split("\n\n") if "Gym has been unmaintained" not in p)
        if text.strip():
            sys.stderr.write(text)
    return d3rlpy


d3rlpy = _import_d3rlpy()

import structlog  # noqa: E402  (a d3rlpy dependency; configured by d3rlpy's import)
from d3rlpy.algos.qlearning.explorers import Explorer, LinearDecayEpsilonGreedy, NormalNoise  # noqa: E402
from d3rlpy.algos.utility import build_scalers_with_env  # noqa: E402
from d3rlpy.dataset import TransitionMiniBatch, create_fifo_replay_buffer  # noqa: E402
from d3rlpy.models.encoders import VectorEncoderFactory  # noqa: E402
from d3rlpy.preprocessing import MinMaxActionScaler  # noqa: E402

__all__ = [
    "D3rlpyOnline",
    "D3rlpyPolicy",
    "load_policy",
    "DQN",
    "DoubleDQN",
    "SAC",
    "TD3",
    "DDPG",
    "RUN_PARAMS",
]

# rlbench-level parameters and their defaults (None: d3rlpy's default or one derived from the budget).
RUN_PARAMS: dict[str, Any] = {
    "buffer_size": 1_000_000,  # FIFO replay buffer limit (d3rlpy's default)
    "replay_buffer": "array",  # "array": numpy ring buffer (fast sampling); "d3rlpy": d3rlpy's FIFO buffer
    "update_interval": 1,  # env steps between updates
    "n_updates": 1,  # gradient steps per update
    "update_start_step": 0,  # no updates before this step
    "random_steps": 0,  # uniform random actions before this step
    "hidden_units": None,  # list[int]: MLP encoder (d3rlpy's default is [256, 256])
    "logging_steps": 1000,  # losses are averaged and logged about this often (rounded to update_interval)
}
EPSILON_PARAMS: dict[str, Any] = {
    "explore_start": 1.0,  # epsilon at step 0
    "explore_end": 0.1,  # final epsilon
    "explore_fraction": 0.1,  # fraction of the run's steps over which epsilon decays linearly
}
NOISE_PARAMS: dict[str, Any] = {
    # std of the Gaussian noise added to the greedy action, in env action units (d3rlpy NormalNoise's
    # default); the noisy action is clipped to the action space's bounds
    "explore_noise": 0.1,
}
_EXPLORE_PARAMS = {"epsilon": EPSILON_PARAMS, "normal": NOISE_PARAMS, "policy": {}}

_Q_ONLY = ("encoder_factory",)
_ACTOR_CRITIC = ("actor_encoder_factory", "critic_encoder_factory")


@dataclasses.dataclass(frozen=True)
class _Spec:
    """How rlbench drives one d3rlpy algorithm."""

    config_cls: type
    discrete: bool
    encoder_fields: tuple[str, ...]
    # epsilon: LinearDecayEpsilonGreedy; normal: Gaussian noise on the greedy action; policy: sample_action
    explore: Literal["epsilon", "normal", "policy"]


# -- plumbing: d3rlpy's logger, training-episode stats --------------------------------------------


class _SinkAdapter:
    """A d3rlpy ``LoggerAdapter`` that sends per-update losses to the rlbench sink and writes no files (the
    online loop calls its ``write_metric`` where d3rlpy's logger would)."""

    _SKIP_PREFIXES = ("time_",)
    _SKIP = frozenset({"rollout_return", "evaluation"})  # episodes are logged by _EpisodeStats instead

    def __init__(self, ctx: RunContext):
        self._ctx = ctx

    def write_params(self, params: dict[str, Any]) -> None:
        pass

    def before_write_metric(self, epoch: int, step: int) -> None:
        pass

    def write_metric(self, epoch: int, step: int, name: str, value: float) -> None:
        if name in self._SKIP or name.startswith(self._SKIP_PREFIXES):
            return
        self._ctx.sink.log(step, **{f"train/loss/{name}": float(value)})

    def after_write_metric(self, epoch: int, step: int) -> None:
        pass

    def save_model(self, epoch: int, algo: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def watch_model(self, epoch: int, step: int) -> None:
        pass


class _EpisodeStats(gymnasium.Wrapper):
    """Counts env steps and logs each finished training episode (the loop steps the env once a step): its
    return and length, and its safety cost where the env reports one (``info["cost"]``, e.g. SafetyCost)."""

    def __init__(self, env: gymnasium.Env, ctx: RunContext):
        super().__init__(env)
        self._ctx = ctx
        self.total_steps = 0
        self._ret = 0.0
        self._len = 0
        self._cost: float | None = None

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self._ret, self._len, self._cost = 0.0, 0, None
        return self.env.reset(**kwargs)

    def __getstate__(self) -> dict[str, Any]:  # a checkpoint pickles the env, not the run's context
        return {k: v for k, v in self.__dict__.items() if k != "_ctx"}

    def attach(self, ctx: RunContext) -> None:
        """Log to ``ctx`` (after unpickling from a checkpoint)."""
        self._ctx = ctx

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, term, trunc, info = self.env.step(action)
        self.total_steps += 1
        self._ret += float(reward)
        self._len += 1
        if "cost" in info:
            self._cost = (getattr(self, "_cost", None) or 0.0) + float(
                info["cost"]
            )  # older checkpoints lack it
        if term or trunc:
            self._ctx.log_episode(self.total_steps, self._ret, self._len, getattr(self, "_cost", None))
        return obs, reward, term, trunc, info


class _ArrayReplayBuffer:
    """A FIFO replay buffer on preallocated numpy arrays, for the online loop.

    Same transitions as d3rlpy's FIFO buffer with its ``BasicTransitionPicker`` (next observation from the
    same episode; on termination a zero next observation and terminal 1; the last step of a truncated
    episode is dropped, having no next observation), but a batch is sampled with one fancy-indexing call
    instead of a Python loop over transitions: about 50x faster per batch, which is most of an update's
    cost on small networks. Batches carry no ``transitions`` list, so algorithms that need returns-to-go
    (Cal-QL) must use d3rlpy's buffer. One deliberate difference: d3rlpy 2.8.1's writer ignores
    ``clip_episode`` for a 1-step episode (it runs into the next one); here it ends like any other.
    """

    def __init__(self, limit: int, observation_shape: tuple[int, ...], action_shape: tuple[int, ...]):
        self._limit = limit
        self._action_shape = action_shape
        self._obs = np.zeros((limit, *observation_shape), np.float32)
        self._next_obs = np.zeros_like(self._obs)
        self._act = np.zeros((limit, *action_shape), np.float32)
        self._next_act = np.zeros_like(self._act)
        self._rew = np.zeros((limit, 1), np.float32)
        self._term = np.zeros((limit, 1), np.float32)
        self._pos = 0
        self._count = 0
        self._pending: tuple[np.ndarray, np.ndarray, float] | None = None

    _ARRAYS = ("_obs", "_next_obs", "_act", "_next_act", "_rew", "_term")

    def __getstate__(self) -> dict[str, Any]:
        """For a checkpoint: the filled rows only (a buffer of a million rows is mostly empty early on)."""
        state = dict(self.__dict__)
        for k in self._ARRAYS:
            state[k] = (state[k][: self._count], len(state[k]))
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for k in self._ARRAYS:
            rows, limit = state[k]
            full = np.zeros((limit, *rows.shape[1:]), rows.dtype)
            full[: len(rows)] = rows
            state[k] = full
        self.__dict__.update(state)

    @classmethod
    def for_env(cls, limit: int, env: Any) -> _ArrayReplayBuffer:
        space = env.action_space
        action_shape = (1,) if isinstance(space, gymnasium.spaces.Discrete) else tuple(space.shape)
        return cls(limit, tuple(env.observation_space.shape), action_shape)

    def _write(
        self, obs: np.ndarray, act: np.ndarray, rew: float, next_obs: Any, next_act: Any, term: float
    ) -> None:
        i = self._pos
        self._obs[i], self._act[i], self._rew[i, 0] = obs, act, rew
        self._next_obs[i], self._next_act[i], self._term[i, 0] = next_obs, next_act, term
        self._pos = (i + 1) % self._limit
        self._count = min(self._count + 1, self._limit)

    def append(self, observation: Any, action: Any, reward: float) -> None:
        obs = np.asarray(observation, np.float32)
        act = np.asarray(action, np.float32).reshape(self._action_shape)
        if self._pending is not None:
            self._write(*self._pending, next_obs=obs, next_act=act, term=0.0)
        self._pending = (obs, act, float(reward))

    def clip_episode(self, terminated: bool) -> None:
        if self._pending is not None and terminated:
            self._write(*self._pending, next_obs=0.0, next_act=0.0, term=1.0)
        self._pending = None

    def extend(self, obs: np.ndarray, act: np.ndarray, rew: np.ndarray, next_obs: np.ndarray,
               next_act: np.ndarray, term: np.ndarray) -> None:  # fmt: skip
        """Write whole transitions at once, in order (an offline dataset's, before fine-tuning online)."""
        n = min(len(obs), self._limit)
        i = (self._pos + np.arange(n)) % self._limit
        self._obs[i], self._next_obs[i] = obs[-n:], next_obs[-n:]
        self._act[i], self._next_act[i] = (
            act[-n:].reshape(n, *self._action_shape),
            next_act[-n:].reshape(n, *self._action_shape),
        )
        self._rew[i, 0], self._term[i, 0] = rew[-n:].reshape(n), term[-n:].reshape(n)
        self._pos = int((self._pos + n) % self._limit)
        self._count = min(self._count + n, self._limit)

    @property
    def transition_count(self) -> int:
        return self._count

    def sample_transition_batch(self, batch_size: int) -> TransitionMiniBatch:
        idx = np.random.randint(self._count, size=batch_size)  # np.random: seeded by d3rlpy.seed
        return TransitionMiniBatch(
            observations=self._obs[idx],
            actions=self._act[idx],
            rewards=self._rew[idx],
            next_observations=self._next_obs[idx],
            next_actions=self._next_act[idx],
            terminals=self._term[idx],
            intervals=np.ones((batch_size, 1), np.float32),
            transitions=[],
        )


@contextlib.contextmanager
def _quiet_d3rlpy() -> Iterator[None]:
    """Drop d3rlpy's info/debug console lines (a metrics line per commit) and its expected warning."""

    def drop(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
        if method in ("debug", "info") or "already built" in str(event.get("event", "")):
            raise structlog.DropEvent
        return event

    saved = structlog.get_config()
    structlog.configure(processors=[drop, *saved["processors"]])
    try:
        yield
    finally:
        structlog.configure(processors=saved["processors"])


# -- checkpoints ---------------------------------------------------------------------------------------


def impl_state(algo: Any) -> dict[str, Any]:
    """What a checkpoint needs of a d3rlpy algorithm: its impl's modules (``save_model``: networks, target
    networks, optimisers with their learning-rate schedulers), its gradient-step counter, and the impl's
    plain number attributes (counters kept outside the modules, e.g. the discrete Decision Transformer's
    token count that drives its learning-rate schedule)."""
    buf = io.BytesIO()
    algo.impl.save_model(buf)
    scalars = {
        k: v for k, v in vars(algo.impl).items() if isinstance(v, (int, float)) and not isinstance(v, bool)
    }
    return {"impl": buf.getvalue(), "impl_scalars": scalars, "grad_step": int(algo.grad_step)}


def restore_impl(algo: Any, state: dict[str, Any]) -> None:
    """Put back what ``impl_state`` took (into an algorithm built the same way)."""
    algo.impl.load_model(io.BytesIO(state["impl"]))
    for k, v in state["impl_scalars"].items():
        setattr(algo.impl, k, v)
    algo._grad_step = int(state["grad_step"])


# -- the policy ----------------------------------------------------------------------------------------


class D3rlpyPolicy:
    """A d3rlpy algorithm as a policy: called on an observation batch it returns ``predict`` (the greedy /
    mean action, what evaluation scores); ``sample`` returns ``sample_action`` (SAC draws from its
    stochastic policy; DQN, TD3 and DDPG have none and act greedily), which is what a D4RL-style dataset is
    collected with; ``save`` writes d3rlpy's own full-algorithm file (config, scalers and weights), which
    ``d3rlpy.load_learnable`` and ``load_policy`` read (``loader``: the run's saved policies, ``algos.keep``)."""

    loader = "d3rlpy_online:load_policy"
    policy_file = "policy.d3"

    def __init__(self, algo: Any):
        self.algo = algo

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return self.algo.predict(np.asarray(obs, dtype=np.float32))

    def sample(self, obs: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        """Sampled actions. d3rlpy samples with torch's global generator: seed it (``d3rlpy.seed``) for a
        reproducible stream; ``rng`` is accepted for the common policy interface and not used."""
        return self.algo.sample_action(np.asarray(obs, dtype=np.float32))

    def save(self, path: str | Path) -> None:
        self.algo.save(str(path))


def load_policy(path: str | Path, device: str = "cpu") -> D3rlpyPolicy:
    """Restore a policy saved by ``D3rlpyPolicy.save`` (any d3rlpy ``algo.save`` file)."""
    with _quiet_d3rlpy():
        return D3rlpyPolicy(d3rlpy.load_learnable(str(path), device=device))


# -- the adapter ---------------------------------------------------------------------------------------


class D3rlpyOnline:
    """Trains a d3rlpy Q-learning algorithm online; subclasses set ``name`` and ``spec``."""

    name: ClassVar[str]
    spec: ClassVar[_Spec]

    # -- parameters --------------------------------------------------------------------------------
    @classmethod
    def config_params(cls) -> dict[str, Any]:
        """Plain fields of the d3rlpy config and their defaults (factories and scalers are not settable)."""
        out = {}
        for f in dataclasses.fields(cls.spec.config_cls):
            if f.default is not dataclasses.MISSING and isinstance(f.default, (bool, int, float, str)):
                out[f.name] = f.default
        return out

    @classmethod
    def run_params(cls) -> dict[str, Any]:
        return {**RUN_PARAMS, **_EXPLORE_PARAMS[cls.spec.explore]}

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        cls.split_params(params)

    @classmethod
    def split_params(cls, params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """(config kwargs, run settings with defaults filled in). Unknown keys raise ValueError."""
        cfg_fields, run = cls.config_params(), cls.run_params()
        unknown = sorted(set(params) - set(cfg_fields) - set(run))
        if unknown:
            valid = ", ".join(sorted({*cfg_fields, *run}))
            raise ValueError(f"unknown parameter(s) for {cls.name}: {', '.join(unknown)}; valid: {valid}")
        typed = coerce_all(cls.name, params, {**cfg_fields, **run}, {"hidden_units": INT_LIST})
        cfg = {k: v for k, v in typed.items() if k in cfg_fields}
        settings = {**run, **{k: v for k, v in typed.items() if k in run}}
        if settings["replay_buffer"] not in ("array", "d3rlpy"):
            raise ValueError(f"replay_buffer must be 'array' or 'd3rlpy', got {settings['replay_buffer']!r}")
        return cfg, settings

    # -- building ----------------------------------------------------------------------------------
    def check_env(self, env: Any) -> None:
        space = env.action_space
        discrete = isinstance(space, gymnasium.spaces.Discrete)
        if not discrete and not isinstance(space, gymnasium.spaces.Box):
            raise ValueError(f"{self.name} needs a Discrete or Box action space, got {type(space).__name__}")
        if discrete != self.spec.discrete:
            kinds = ("discrete", "continuous") if self.spec.discrete else ("continuous", "discrete")
            raise ValueError(
                f"{self.name} needs a {kinds[0]} action space, but {env.spec.id if env.spec else env} "
                f"has a {kinds[1]} one ({space})"
            )

    def make_config(self, cfg: dict[str, Any], settings: dict[str, Any]) -> Any:
        kwargs = dict(cfg)
        if settings["hidden_units"] is not None:
            units = [int(u) for u in settings["hidden_units"]]
            for f in self.spec.encoder_fields:
                kwargs[f] = VectorEncoderFactory(hidden_units=units)
        if not self.spec.discrete:
            kwargs["action_scaler"] = MinMaxActionScaler()
        return self.spec.config_cls(**kwargs)

    def make_buffer(self, algo: Any, settings: dict[str, Any], env: Any) -> Any:
        limit = int(settings["buffer_size"])
        if settings["replay_buffer"] == "array" and not algo.need_returns_to_go:
            return _ArrayReplayBuffer.for_env(limit, env)
        return create_fifo_replay_buffer(limit, env=env)

    def make_explorer(self, settings: dict[str, Any], steps: int) -> Explorer | None:
        if self.spec.explore == "epsilon":
            return LinearDecayEpsilonGreedy(
                start_epsilon=float(settings["explore_start"]),
                end_epsilon=float(settings["explore_end"]),
                duration=max(1, int(float(settings["explore_fraction"]) * steps)),
            )
        if self.spec.explore == "normal":
            return NormalNoise(mean=0.0, std=float(settings["explore_noise"]))
        return None

    # -- training ----------------------------------------------------------------------------------
    def train(self, ctx: RunContext) -> None:
        with _quiet_d3rlpy():
            self._train(ctx)

    def _train(self, ctx: RunContext) -> None:
        cfg, settings = self.split_params(ctx.params)
        d3rlpy.seed(ctx.seed)
        env = _EpisodeStats(ctx.make_env(), ctx)
        self.check_env(env)

        algo = self.make_config(cfg, settings).create(device=ctx.device)
        build_scalers_with_env(algo, env)
        algo.build_with_env(env)  # networks exist before training, so step 0 can be evaluated

        policy = D3rlpyPolicy(algo)
        steps = ctx.steps
        buffer = self.make_buffer(algo, settings, env)
        explorer = self.make_explorer(settings, steps)
        update_interval = int(settings["update_interval"])
        n_updates = int(settings["n_updates"])
        update_start_step = int(settings["update_start_step"])
        random_steps = int(settings["random_steps"])
        # d3rlpy commits metrics only on update steps: make logging_steps a multiple of update_interval
        logging_steps = max(1, round(int(settings["logging_steps"]) / update_interval)) * update_interval
        log = _SinkAdapter(ctx)

        # fit_online's loop (d3rlpy 2.8.1), step for step, so that it can stop and resume anywhere
        state = ctx.resume()
        if state is None:
            ctx.maybe_evaluate(0, policy)
            observation, _ = env.reset()
            losses: dict[str, list[float]] = {}
            first = 1
        else:
            restore_impl(algo, state)
            buffer = state["buffer"]
            env = loads_envs(state["env"])
            env.attach(ctx)
            observation, losses = state["observation"], state["losses"]
            first = int(state["step"]) + 1
        last = first - 1
        for total_step in range(first, steps + 1):
            if total_step < random_steps:
                action = env.action_space.sample()
            elif explorer:
                action = explorer.sample(algo, observation.reshape((1,) + observation.shape), total_step)[0]
            else:
                action = algo.sample_action(np.expand_dims(observation, axis=0))[0]
            next_observation, reward, terminal, truncated, _ = env.step(action)
            buffer.append(observation, action, float(reward))
            if terminal or truncated:
                buffer.clip_episode(terminal)
                observation, _ = env.reset()
            else:
                observation = next_observation
            if total_step > update_start_step and buffer.transition_count > algo.batch_size:
                if total_step % update_interval == 0:
                    for _ in range(n_updates):  # controls the update-to-data ratio
                        loss = algo.update(buffer.sample_transition_batch(algo.batch_size))
                        for name, val in loss.items():
                            losses.setdefault(name, []).append(val)
                    if total_step % logging_steps == 0:
                        for name, values in losses.items():  # d3rlpy's logger: the mean since the last
                            log.write_metric(0, total_step, name, sum(values) / len(values))
                        losses = {}
            last = total_step
            ctx.maybe_evaluate(total_step, policy)
            if ctx.checkpoint_due(total_step):
                ctx.save_checkpoint(total_step, {**impl_state(algo), "buffer": buffer, "env": dumps_envs(env),
                                                 "observation": observation, "losses": losses})  # fmt: skip
            if total_step % 1000 == 0:
                ctx.log_system(total_step)
            if ctx.should_stop():
                break
        env.close()
        ctx.finish(last, policy)


class DQN(D3rlpyOnline):
    name: ClassVar[str] = "dqn"
    spec: ClassVar[_Spec] = _Spec(
        d3rlpy.algos.DQNConfig, discrete=True, encoder_fields=_Q_ONLY, explore="epsilon"
    )


class SAC(D3rlpyOnline):
    name: ClassVar[str] = "sac"
    spec: ClassVar[_Spec] = _Spec(
        d3rlpy.algos.SACConfig, discrete=False, encoder_fields=_ACTOR_CRITIC, explore="policy"
    )


class DoubleDQN(D3rlpyOnline):
    name: ClassVar[str] = "double_dqn"
    spec: ClassVar[_Spec] = _Spec(
        d3rlpy.algos.DoubleDQNConfig, discrete=True, encoder_fields=_Q_ONLY, explore="epsilon"
    )


class TD3(D3rlpyOnline):
    name: ClassVar[str] = "td3"
    spec: ClassVar[_Spec] = _Spec(
        d3rlpy.algos.TD3Config, discrete=False, encoder_fields=_ACTOR_CRITIC, explore="normal"
    )


class DDPG(D3rlpyOnline):
    name: ClassVar[str] = "ddpg"
    spec: ClassVar[_Spec] = _Spec(
        d3rlpy.algos.DDPGConfig, discrete=False, encoder_fields=_ACTOR_CRITIC, explore="normal"
    )
