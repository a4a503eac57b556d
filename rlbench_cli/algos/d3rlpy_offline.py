"""``bc``, ``cql``, ``discrete_cql``, ``iql``, ``td3_plus_bc``, ``awac``, ``bcq``, ``crr`` and
``decision_transformer``: d3rlpy 2.8 algorithms trained on the run's offline dataset.

One base class, ``D3rlpyOffline``, does the work; an algorithm names its d3rlpy config classes, one per
action type. Where d3rlpy has a discrete variant (``bc``, ``cql``, ``bcq``, ``decision_transformer``) the
dataset's action type picks it; ``discrete_cql`` is discrete only, and ``iql``, ``td3_plus_bc``, ``awac`` and
``crr`` are continuous only (a dataset of the other kind is a one-line error).

Training: ``ctx.steps`` gradient steps, each ``algo.update(batch)`` on a batch sampled from the dataset,
driven here rather than through ``algo.fit``: evaluation (``ctx.maybe_evaluate``), losses (averaged over
``logging_steps`` updates and logged as ``train/loss/<name>``) and ``ctx.should_stop()`` fit in the same loop,
d3rlpy writes no files, and the per-step timing and bookkeeping of d3rlpy's ``fit`` are skipped.
Batches come from numpy arrays (``replay_buffer: array``): the same transitions as d3rlpy's
``BasicTransitionPicker`` and the same windows as its ``BasicTrajectorySlicer``, gathered with one
indexing call instead of a Python loop per sample (a third of a BC step's time on d3rlpy's default network).
``replay_buffer: d3rlpy`` samples from d3rlpy's ``MDPDataset`` built from the same data instead.

Parameters (``ctx.params``): a key that is a plain (number/bool/string) field of the chosen d3rlpy config
goes to the config, with d3rlpy's default (``learning_rate``, ``batch_size``, ``conservative_weight``,
``expectile``, ``context_size``, ...; ``position_encoding_type`` as ``simple``/``global``); the rest are
rlbench-level (``RUN_PARAMS``, and ``TRANSFORMER_PARAMS`` for ``decision_transformer``). Defaults are
d3rlpy's except:

- continuous algorithms get a min-max action scaler fitted to the env's action space, as the online ones do
  (the dataset's action range where the space is unbounded);
- ``observation_scaler`` is ``standard`` (mean/std of the dataset's observations) for ``td3_plus_bc`` and
  ``decision_transformer``, whose d3rlpy reproductions (and papers) standardise observations, ``none`` for
  the others, whose reproductions do not;
- ``decision_transformer`` multiplies rewards and returns-to-go by ``reward_scale`` (0.001, its d3rlpy
  reproduction's ``MultiplyRewardScaler``); ``max_timestep`` (d3rlpy: 1000) is raised to cover the longest
  episode of the dataset and the env's time limit unless set, since d3rlpy's timestep embedding has exactly
  ``max_timestep`` rows;
- ``decision_transformer`` on vector observations embeds each state with one linear layer of width 128
  (``TRANSFORMER_EMBED_SIZE``), as its d3rlpy reproductions (``VectorEncoderFactory([128],
  exclude_last_activation=True)``), the paper and ``hf_decision_transformer`` do. The embedding's width is
  the transformer's: d3rlpy's default encoder, a [256, 256] ReLU MLP, makes it 256 wide, about 4 times the
  compute per step (0.9 s a step on one CPU core for batch 64, context 20, 3 layers; 0.25 s at 128).
  ``hidden_units`` replaces it with a ``VectorEncoderFactory`` of those units (``[256, 256]``: d3rlpy's
  default).

Checkpoints (``budget.checkpoint_every``, checked every gradient step): the d3rlpy impl's modules (networks,
target networks, optimisers and learning-rate schedulers), its counters (the gradient step, the discrete
Decision Transformer's token count) and the losses not yet logged. Batches are drawn with NumPy's global generator, whose state the runner saves with every
checkpoint, so a resumed run samples the batches the uninterrupted one would have.

Decision Transformer evaluation is return-conditioned on ``target_return``: by default the dataset's expert
reference return (``meta.ref_expert``, the return normalised scores call 100) where it has one, else the
best episode return in the dataset. All evaluation episodes go through the transformer in one batched
forward pass per step; actions are greedy (argmax) for the discrete variant.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import gymnasium
import numpy as np
import torch

from ..datasets.data import OfflineData
from .base import RunContext
from .d3rlpy_online import (  # d3rlpy: no legacy-gym notice
    D3rlpyPolicy,
    _quiet_d3rlpy,
    d3rlpy,
    impl_state,
    restore_impl,
)
from .offline import (
    EpisodeContexts,
    TrajectoryWindows,
    action_bounds,
    check_dataset,
    default_target_return,
    longest_episode,
    transition_steps,
)
from .params import INT_LIST, coerce_all

# isort: split
from d3rlpy.constants import ActionSpace
from d3rlpy.dataset import MDPDataset, TrajectoryMiniBatch, TransitionMiniBatch
from d3rlpy.models.encoders import VectorEncoderFactory
from d3rlpy.preprocessing import MinMaxActionScaler, MultiplyRewardScaler, StandardObservationScaler

__all__ = [
    "D3rlpyOffline",
    "TransformerPolicy",
    "load_transformer_policy",
    "BC",
    "CQL",
    "DiscreteCQL",
    "IQL",
    "TD3PlusBC",
    "AWAC",
    "BCQ",
    "CRR",
    "DecisionTransformer",
    "RUN_PARAMS",
    "TRANSFORMER_PARAMS",
    "TRANSFORMER_EMBED_SIZE",
]

# rlbench-level parameters and their defaults (None: the algorithm's default, see the module docstring).
RUN_PARAMS: dict[str, Any] = {
    "hidden_units": None,  # list[int]: MLP encoders (d3rlpy's default is [256, 256])
    "logging_steps": 1000,  # losses are averaged over and logged every this many updates
    "replay_buffer": "array",  # "array": numpy batches (fast); "d3rlpy": d3rlpy's MDPDataset sampling
    "observation_scaler": None,  # "standard" or "none"
}
TRANSFORMER_PARAMS: dict[str, Any] = {
    "target_return": None,  # return the evaluation asks for; None: meta.ref_expert, else the best episode
    "reward_scale": 0.001,  # rewards and returns-to-go are multiplied by this (d3rlpy's reproduction)
}
# decision_transformer's state embedding width (= the transformer's width) unless hidden_units is set
TRANSFORMER_EMBED_SIZE = 128
# the types of the run params whose default is None (and which may be null)
OPTIONAL_KINDS: dict[str, Any] = {"hidden_units": INT_LIST, "observation_scaler": "", "target_return": 0.0}
_REPLAY_BUFFERS = ("array", "d3rlpy")
_OBSERVATION_SCALERS = ("standard", "none")


# -- batches -------------------------------------------------------------------------------------------


class _TransitionArrays:
    """Transition batches from numpy arrays, with d3rlpy's ``BasicTransitionPicker`` semantics.

    A transition's next observation and action are the episode's next step; the last step of an episode
    that ended in a terminal state has terminal 1 and zero next observation and action (a zero row after
    the data); the last step of an episode that was cut off is no transition, having no next observation.
    """

    def __init__(self, data: OfflineData, actions: np.ndarray):
        n = len(data)
        obs = np.asarray(data.observations, np.float32)
        self._obs = np.concatenate([obs, np.zeros((1, *obs.shape[1:]), np.float32)])
        self._actions = np.concatenate([actions, np.zeros((1, actions.shape[1]), np.float32)])
        self._rewards = np.asarray(data.rewards, np.float32).reshape(n, 1)
        terminal = np.asarray(data.terminals, bool)
        self._terminals = terminal.astype(np.float32).reshape(n, 1)
        self._next = np.where(terminal, n, np.arange(1, n + 1))
        self._pool = transition_steps(data)

    def sample(self, batch_size: int) -> TransitionMiniBatch:
        i = self._pool[np.random.randint(len(self._pool), size=batch_size)]  # np.random: seeded by d3rlpy
        nxt = self._next[i]
        return TransitionMiniBatch(
            observations=self._obs[i],
            actions=self._actions[i],
            rewards=self._rewards[i],
            next_observations=self._obs[nxt],
            next_actions=self._actions[nxt],
            terminals=self._terminals[i],
            intervals=np.ones((batch_size, 1), np.float32),
            transitions=[],
        )


def _actions(data: OfflineData) -> np.ndarray:
    """The dataset's actions as float32 rows (N, act_dim); discrete ones as (N, 1)."""
    return np.asarray(data.actions, np.float32).reshape(len(data), -1)


def _window_batch(windows: TrajectoryWindows, batch_size: int, length: int) -> TrajectoryMiniBatch:
    """A d3rlpy trajectory batch from ``TrajectoryWindows`` (d3rlpy counts timesteps from 1)."""
    w = windows.sample(batch_size, length)
    return TrajectoryMiniBatch(
        observations=w.observations,
        actions=w.actions,
        rewards=w.rewards,
        returns_to_go=w.returns_to_go,
        terminals=w.terminals,
        timesteps=((w.timesteps + 1) * w.masks).astype(np.float32),
        masks=w.masks,
        length=length,
    )


def to_mdp_dataset(data: OfflineData, discrete: bool, action_size: int) -> MDPDataset:
    """The dataset as d3rlpy's ``MDPDataset``: episodes end where OfflineData's do (a terminal wins over a
    timeout on the same step; the last step always ends one, where d3rlpy would drop a trailing episode)."""
    terminals = np.asarray(data.terminals, bool)
    timeouts = np.asarray(data.timeouts, bool) & ~terminals
    timeouts[-1] |= not terminals[-1]
    return MDPDataset(
        observations=np.asarray(data.observations, np.float32),
        actions=np.asarray(data.actions, np.int64 if discrete else np.float32),
        rewards=np.asarray(data.rewards, np.float32),
        terminals=terminals.astype(np.float32),
        timeouts=timeouts.astype(np.float32),
        action_space=ActionSpace.DISCRETE if discrete else ActionSpace.CONTINUOUS,
        action_size=action_size,
    )


# -- evaluation ----------------------------------------------------------------------------------------


class TransformerPolicy:
    """An ``EpisodePolicy`` over a d3rlpy Decision Transformer: n episodes, one forward pass per step.

    Gives the transformer what d3rlpy's ``StatefulTransformerWrapper`` gives it for one episode (the last
    ``context_size`` steps, left-padded, through the algorithm's scalers), for all running episodes at once.
    ``save(folder)`` writes d3rlpy's own file and the return it is conditioned on; ``load_transformer_policy``
    reads them back (``loader``: the run's saved policies, ``algos.keep``).
    """

    loader = "d3rlpy_offline:load_transformer_policy"
    policy_file = "transformer"  # a folder: policy.d3 and conditioning.json

    def __init__(self, algo: Any, target_return: float, discrete: bool):
        self._algo = algo
        self._target = target_return
        self._discrete = discrete
        self._ctx: EpisodeContexts | None = None

    def save(self, path: Any) -> None:
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        self._algo.save(str(folder / "policy.d3"))
        (folder / "conditioning.json").write_text(
            json.dumps({"target_return": self._target, "discrete": self._discrete}) + "\n"
        )

    def reset(self, n: int) -> None:
        impl, cfg = self._algo.impl, self._algo.config
        self._ctx = EpisodeContexts(
            n,
            cfg.context_size,
            tuple(impl.observation_shape),
            1 if self._discrete else impl.action_size,
            self._target,
            first_timestep=1,
            max_timestep=cfg.max_timestep - 1,
        )

    def act(self, obs: np.ndarray, rewards: np.ndarray, idx: np.ndarray) -> np.ndarray:
        c = self._ctx
        assert c is not None, "reset(n) before act()"
        c.step(idx, np.asarray(obs, np.float32), rewards)
        impl, cfg = self._algo.impl, self._algo.config
        x, actions, rtg, timesteps, masks = (
            torch.as_tensor(a[idx], device=impl.device)
            for a in (c.observations, c.actions, c.returns_to_go, c.timesteps, c.masks)
        )
        impl.modules.set_eval()
        with torch.no_grad():
            if cfg.observation_scaler:
                x = cfg.observation_scaler.transform(x)
            if cfg.action_scaler:
                actions = cfg.action_scaler.transform(actions)
            if cfg.reward_scaler:
                rtg = cfg.reward_scaler.transform(rtg)
            out = impl.modules.transformer(x, actions, rtg, timesteps, 1 - masks)
            if self._discrete:
                chosen = out[1][:, -1].argmax(dim=-1).cpu().numpy()
                c.set_actions(idx, chosen[:, None])
                return chosen
            action = out[:, -1]
            if cfg.action_scaler:
                action = cfg.action_scaler.reverse_transform(action)
        chosen = action.cpu().numpy()
        c.set_actions(idx, chosen)
        return chosen


def load_transformer_policy(path: Any, device: str = "cpu") -> TransformerPolicy:
    """Restore a policy saved by ``TransformerPolicy.save``."""
    folder = Path(path)
    meta = json.loads((folder / "conditioning.json").read_text())
    with _quiet_d3rlpy():
        algo = d3rlpy.load_learnable(str(folder / "policy.d3"), device=device)
    return TransformerPolicy(algo, float(meta["target_return"]), bool(meta["discrete"]))


# -- the adapter ---------------------------------------------------------------------------------------


class D3rlpyOffline:
    """Trains a d3rlpy offline algorithm on ``ctx.dataset()``; subclasses set ``name`` and the configs."""

    name: ClassVar[str]
    continuous_config: ClassVar[type | None] = None  # d3rlpy config class for continuous actions
    discrete_config: ClassVar[type | None] = None  # ... and for discrete actions
    transformer: ClassVar[bool] = False  # trained on trajectory windows, evaluated return-conditioned
    default_observation_scaler: ClassVar[str] = "none"

    # -- parameters --------------------------------------------------------------------------------
    @classmethod
    def config_cls(cls, discrete: bool) -> type:
        """The d3rlpy config class for the action type."""
        config = cls.discrete_config if discrete else cls.continuous_config
        if config is None:
            raise ValueError(f"{cls.name} has no {'discrete' if discrete else 'continuous'}-action variant")
        return config

    @classmethod
    def config_params(cls, discrete: bool) -> dict[str, Any]:
        """Plain fields of the d3rlpy config and their defaults (enums by value; factories and scalers are
        not settable)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(cls.config_cls(discrete)):
            if isinstance(f.default, enum.Enum) and isinstance(f.default.value, str):
                out[f.name] = f.default.value
            elif isinstance(f.default, (bool, int, float, str)):
                out[f.name] = f.default
        return out

    @classmethod
    def run_params(cls) -> dict[str, Any]:
        return {
            **RUN_PARAMS,
            "observation_scaler": cls.default_observation_scaler,
            **(TRANSFORMER_PARAMS if cls.transformer else {}),
        }

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        """What ``split_params`` refuses for every action kind the algorithm has (the dataset decides the
        kind when the run starts; a param of one kind's config only is the run's to check)."""
        configs = ((True, cls.discrete_config), (False, cls.continuous_config))
        *others, last = [discrete for discrete, config in configs if config is not None]
        for discrete in others:
            try:
                cls.split_params(params, discrete)
                return
            except ValueError:
                pass
        cls.split_params(params, last)

    @classmethod
    def split_params(cls, params: dict[str, Any], discrete: bool) -> tuple[dict[str, Any], dict[str, Any]]:
        """(config kwargs, run settings with defaults filled in). Unknown keys raise ValueError."""
        config_cls = cls.config_cls(discrete)
        cfg_fields, run = cls.config_params(discrete), cls.run_params()
        unknown = sorted(set(params) - set(cfg_fields) - set(run))
        if unknown:
            valid = ", ".join(sorted({*cfg_fields, *run}))
            raise ValueError(
                f"unknown parameter(s) for {cls.name} ({config_cls.__name__}): {', '.join(unknown)}; "
                f"valid: {valid}"
            )
        enums = {
            f.name: type(f.default)
            for f in dataclasses.fields(config_cls)
            if isinstance(f.default, enum.Enum)
        }
        plain = {k: v for k, v in cfg_fields.items() if k not in enums}
        typed = coerce_all(cls.name, params, {**plain, **run}, OPTIONAL_KINDS)
        cfg: dict[str, Any] = {}
        for k, v in typed.items():
            if k in enums:
                cfg[k] = enums[k](v)
            elif k in cfg_fields:
                cfg[k] = v
        settings = {**run, **{k: v for k, v in typed.items() if k in run}}
        for key, choices in (
            ("replay_buffer", _REPLAY_BUFFERS),
            ("observation_scaler", _OBSERVATION_SCALERS),
        ):
            if settings[key] not in choices:
                raise ValueError(f"{key} must be one of {', '.join(choices)}; got {settings[key]!r}")
        return cfg, settings

    # -- building ----------------------------------------------------------------------------------
    def make_config(
        self,
        cfg: dict[str, Any],
        settings: dict[str, Any],
        discrete: bool,
        env: gymnasium.Env,
        data: OfflineData,
    ) -> Any:
        config_cls = self.config_cls(discrete)
        kwargs = dict(cfg)
        if settings["hidden_units"] is not None:
            units = [int(u) for u in settings["hidden_units"]]
            for f in dataclasses.fields(config_cls):
                if f.name.endswith("encoder_factory"):
                    kwargs[f.name] = VectorEncoderFactory(hidden_units=units)
        elif self.transformer and len(env.observation_space.shape or ()) == 1:
            # the reproductions' state embedding, not d3rlpy's default [256, 256] MLP (see the docstring)
            kwargs["encoder_factory"] = VectorEncoderFactory(
                hidden_units=[TRANSFORMER_EMBED_SIZE], exclude_last_activation=True
            )
        if not discrete:
            low, high = action_bounds(data, env.action_space)
            kwargs["action_scaler"] = MinMaxActionScaler(minimum=low, maximum=high)
        if settings["observation_scaler"] == "standard":
            obs = np.asarray(data.observations, np.float64)
            kwargs["observation_scaler"] = StandardObservationScaler(
                mean=obs.mean(axis=0), std=obs.std(axis=0)
            )
        if self.transformer:
            kwargs["reward_scaler"] = MultiplyRewardScaler(multiplier=float(settings["reward_scale"]))
            longest = longest_episode(data)
            if "max_timestep" not in cfg:
                horizon = max(longest, (env.spec.max_episode_steps or 0) if env.spec else 0)
                kwargs["max_timestep"] = max(self.config_params(discrete)["max_timestep"], horizon + 1)
            elif cfg["max_timestep"] <= longest:
                raise ValueError(
                    f"max_timestep ({cfg['max_timestep']}) must exceed the longest episode ({longest} steps)"
                )
        return config_cls(**kwargs)

    def make_sampler(
        self, algo: Any, settings: dict[str, Any], data: OfflineData, discrete: bool
    ) -> Callable[[], Any]:
        """A function returning the next training batch."""
        batch_size = int(algo.config.batch_size)
        length = int(getattr(algo.config, "context_size", 0))
        if settings["replay_buffer"] == "d3rlpy":
            mdp = to_mdp_dataset(data, discrete, int(algo.impl.action_size))
            if self.transformer:
                return lambda: mdp.sample_trajectory_batch(batch_size, length=length)
            return lambda: mdp.sample_transition_batch(batch_size)
        actions = _actions(data)
        if self.transformer:
            windows = TrajectoryWindows(data, actions, all_ends=False)
            return lambda: _window_batch(windows, batch_size, length)
        transitions = _TransitionArrays(data, actions)
        return lambda: transitions.sample(batch_size)

    def make_policy(self, algo: Any, settings: dict[str, Any], data: OfflineData, discrete: bool) -> Any:
        """The evaluated policy: greedy actions, or a return-conditioned ``TransformerPolicy``."""
        if self.transformer:
            target = settings["target_return"]
            return TransformerPolicy(
                algo, default_target_return(data) if target is None else float(target), discrete
            )

        return D3rlpyPolicy(algo)  # greedy actions; saved with d3rlpy's own algo.save

    # -- training ----------------------------------------------------------------------------------
    def train(self, ctx: RunContext) -> None:
        with _quiet_d3rlpy():
            self._train(ctx)

    def _train(self, ctx: RunContext) -> None:
        data = ctx.dataset()
        env = ctx.make_env()
        discrete_ok, continuous_ok = self.discrete_config is not None, self.continuous_config is not None
        discrete = check_dataset(self.name, data, env, repr(ctx.spec.dataset), discrete_ok, continuous_ok)
        cfg, settings = self.split_params(ctx.params, discrete)
        d3rlpy.seed(ctx.seed)
        algo = self.make_config(cfg, settings, discrete, env, data).create(device=ctx.device)
        algo.build_with_env(env)
        env.close()
        sample = self.make_sampler(algo, settings, data, discrete)
        policy = self.make_policy(algo, settings, data, discrete)

        logging_steps = int(settings["logging_steps"])
        sums: dict[str, float] = {}
        count = step = first = 0
        state = ctx.resume()
        online = None  # an online-phase checkpoint (offline-to-online runs): fine-tuning goes on from it
        if state is None:
            if ctx.finetune_steps:  # offline-to-online: the phase turns 1 at the last offline step
                ctx.sink.log(0, **{"train/phase": 0.0})
            ctx.maybe_evaluate(0, policy)
        else:
            restore_impl(algo, state)
            if state.get("phase") == "online":
                online, first = state, ctx.steps
            else:
                sums, count, first = state["sums"], int(state["count"]), int(state["step"])
            step = first
        for step in range(first + 1, ctx.steps + 1):
            for k, v in algo.update(sample()).items():
                sums[k] = sums.get(k, 0.0) + v
            count += 1
            if step % logging_steps == 0:
                ctx.sink.log(step, **{f"train/loss/{k}": v / count for k, v in sums.items()})
                sums, count = {}, 0
            ctx.maybe_evaluate(step, policy)
            ctx.log_system(step)
            if ctx.checkpoint_due(step):
                ctx.save_checkpoint(step, {**impl_state(algo), "sums": sums, "count": count})
            if ctx.should_stop():
                break
        if count:  # the updates since the last logging step
            ctx.sink.log(step, **{f"train/loss/{k}": v / count for k, v in sums.items()})
        if ctx.finetune_steps and step >= ctx.steps and not ctx.should_stop():
            from .finetune import finetune_online

            transitions = None if online else _TransitionArrays(data, _actions(data))
            step = finetune_online(ctx, algo, transitions, discrete, policy,
                                   explore_noise=self.name == "td3_plus_bc", resume=online)  # fmt: skip
        ctx.finish(step, policy)


class BC(D3rlpyOffline):
    name: ClassVar[str] = "bc"
    continuous_config: ClassVar[type | None] = d3rlpy.algos.BCConfig
    discrete_config: ClassVar[type | None] = d3rlpy.algos.DiscreteBCConfig


class CQL(D3rlpyOffline):
    name: ClassVar[str] = "cql"
    continuous_config: ClassVar[type | None] = d3rlpy.algos.CQLConfig
    discrete_config: ClassVar[type | None] = d3rlpy.algos.DiscreteCQLConfig


class DiscreteCQL(D3rlpyOffline):
    name: ClassVar[str] = "discrete_cql"
    discrete_config: ClassVar[type | None] = d3rlpy.algos.DiscreteCQLConfig


class IQL(D3rlpyOffline):
    name: ClassVar[str] = "iql"
    continuous_config: ClassVar[type | None] = d3rlpy.algos.IQLConfig


class TD3PlusBC(D3rlpyOffline):
    name: ClassVar[str] = "td3_plus_bc"
    continuous_config: ClassVar[type | None] = d3rlpy.algos.TD3PlusBCConfig
    default_observation_scaler: ClassVar[str] = "standard"


class AWAC(D3rlpyOffline):
    name: ClassVar[str] = "awac"
    continuous_config: ClassVar[type | None] = d3rlpy.algos.AWACConfig


class BCQ(D3rlpyOffline):
    name: ClassVar[str] = "bcq"
    continuous_config: ClassVar[type | None] = d3rlpy.algos.BCQConfig
    discrete_config: ClassVar[type | None] = d3rlpy.algos.DiscreteBCQConfig


class CRR(D3rlpyOffline):
    name: ClassVar[str] = "crr"
    continuous_config: ClassVar[type | None] = d3rlpy.algos.CRRConfig


class DecisionTransformer(D3rlpyOffline):
    name: ClassVar[str] = "decision_transformer"
    continuous_config: ClassVar[type | None] = d3rlpy.algos.DecisionTransformerConfig
    discrete_config: ClassVar[type | None] = d3rlpy.algos.DiscreteDecisionTransformerConfig
    transformer: ClassVar[bool] = True
    default_observation_scaler: ClassVar[str] = "standard"
