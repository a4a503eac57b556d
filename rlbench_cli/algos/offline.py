"""What the offline adapters share: checking a dataset against its env, the Decision Transformers'
(``decision_transformer``, ``hf_decision_transformer``) training windows and evaluation contexts, and the
return they are conditioned on.

A window is up to K consecutive steps of one episode ending at a sampled step, left-padded with zeros (mask
0) where the episode began less than K steps earlier, so that training sees the short contexts evaluation
starts with. Its returns-to-go are the undiscounted rewards from each step to the end of the episode, as in
d3rlpy's ``BasicTrajectorySlicer`` and HuggingFace's Decision Transformer example. A batch is gathered with
one fancy-indexing call: d3rlpy's slicer builds each window in a Python loop.

Evaluation plays n episodes in lock-step; ``EpisodeContexts`` keeps the last K steps of each so that one
forward pass serves every running episode. The return-to-go of a step is the target return less the rewards
received so far (d3rlpy's ``StatefulTransformerWrapper``); the action slot of the current step holds zeros
until the model has chosen it.
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium
import numpy as np

from ..datasets.data import OfflineData

__all__ = [
    "check_dataset",
    "action_bounds",
    "transition_steps",
    "WindowBatch",
    "TrajectoryWindows",
    "EpisodeContexts",
    "longest_episode",
    "default_target_return",
]


def check_dataset(
    algo: str, data: OfflineData, env: gymnasium.Env, label: str, discrete_ok: bool, continuous_ok: bool
) -> bool:
    """Whether the dataset's actions are discrete. One-line errors where ``algo`` has no variant for its
    action space (``discrete_ok``, ``continuous_ok``) or the dataset does not fit its env."""
    space = env.action_space
    if not isinstance(space, (gymnasium.spaces.Discrete, gymnasium.spaces.Box)):
        raise ValueError(f"{algo} needs a Discrete or Box action space; dataset {label} has {space}")
    discrete = isinstance(space, gymnasium.spaces.Discrete)
    if not (discrete_ok if discrete else continuous_ok):
        kind, needs = ("discrete", "continuous") if discrete else ("continuous", "discrete")
        raise ValueError(
            f"{algo} needs a {needs} action space, but dataset {label} has a {kind} one ({space})"
        )
    if data.discrete != discrete:
        kind = "discrete" if data.discrete else "continuous"
        raise ValueError(f"dataset {label} has {kind} actions, but its env's action space is {space}")
    env_shape, data_shape = tuple(env.observation_space.shape or ()), tuple(np.shape(data.observations)[1:])
    if data_shape != env_shape:
        raise ValueError(f"dataset {label} has observations of shape {data_shape}, its env {env_shape}")
    actions = np.asarray(data.actions)
    if discrete and len(actions) and (actions.min() < 0 or actions.max() >= space.n):
        raise ValueError(f"dataset {label} has actions outside its env's action space {space}")
    if not discrete and actions.shape[1:] != space.shape:
        raise ValueError(f"dataset {label} has actions of shape {actions.shape[1:]}, its env {space}")
    return discrete


def action_bounds(data: OfflineData, space: gymnasium.spaces.Box) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of a continuous action space; the dataset's range in a dimension the space leaves
    unbounded."""
    acts = np.asarray(data.actions, np.float64)
    low = np.where(np.isfinite(space.low), space.low, acts.min(axis=0))
    high = np.where(np.isfinite(space.high), space.high, acts.max(axis=0))
    return low, high


def transition_steps(data: OfflineData) -> np.ndarray:
    """The steps d3rlpy counts as transitions: all but the last step of each episode that was cut off (a
    timeout, or the end of the data), which has no next observation. One-line error if there are none."""
    terminal = np.asarray(data.terminals, bool)
    ends = data.episode_ends()
    cut_off = np.zeros(len(data), bool)
    cut_off[ends] = ~terminal[ends]
    steps = np.flatnonzero(~cut_off)
    if not len(steps):
        raise ValueError("the dataset has no transitions to train on (every episode is one cut-off step)")
    return steps


def longest_episode(data: OfflineData) -> int:
    """Number of steps in the dataset's longest episode."""
    ends = data.episode_ends()
    return int(np.diff(np.concatenate([[-1], ends])).max()) if len(ends) else 0


@dataclass(frozen=True)
class WindowBatch:
    """B windows of K steps; padded steps hold zeros and mask 0."""

    observations: np.ndarray  # (B, K, *obs_shape) float32
    actions: np.ndarray  # (B, K, act_dim) float32, in the representation given to TrajectoryWindows
    rewards: np.ndarray  # (B, K, 1) float32
    returns_to_go: np.ndarray  # (B, K, 1) float32
    terminals: np.ndarray  # (B, K, 1) float32: 1 at the last step of an episode ended by a terminal
    timesteps: np.ndarray  # (B, K) int64: step within the episode, from 0
    masks: np.ndarray  # (B, K) float32: 1 for real steps


class TrajectoryWindows:
    """Samples ``WindowBatch``es from a dataset (see the module docstring).

    ``actions`` is the dataset's actions as the model consumes them, (N, act_dim) float32: continuous
    actions, a discrete action's index in a column, or one-hot rows. ``all_ends``: any step can end a
    window; otherwise only ``transition_steps``, as in d3rlpy.
    """

    def __init__(self, data: OfflineData, actions: np.ndarray, all_ends: bool = True):
        n = len(data)
        ends = data.episode_ends()
        starts = np.concatenate([[0], ends[:-1] + 1])
        self._start = np.repeat(starts, ends - starts + 1)
        self._timestep = np.arange(n) - self._start
        rewards = np.asarray(data.rewards, np.float64)
        cum = np.concatenate([[0.0], np.cumsum(rewards)])
        end_of = np.repeat(ends, ends - starts + 1)
        self._obs = np.asarray(data.observations, np.float32)
        self._actions = np.asarray(actions, np.float32)
        self._rewards = rewards.astype(np.float32).reshape(n, 1)
        self._rtg = (cum[end_of + 1] - cum[:n]).astype(np.float32).reshape(n, 1)
        self._terminals = np.asarray(data.terminals, np.float32).reshape(n, 1)
        self._pool = np.arange(n) if all_ends else transition_steps(data)

    @property
    def ends(self) -> np.ndarray:
        """The steps a sampled window may end at."""
        return self._pool

    def sample(self, batch_size: int, length: int, rng: np.random.Generator | None = None) -> WindowBatch:
        """``batch_size`` windows of ``length`` steps ending at steps drawn uniformly from ``ends`` by ``rng``
        (None: numpy's global generator, which d3rlpy seeds)."""
        n = len(self._pool)
        pick = rng.integers(n, size=batch_size) if rng is not None else np.random.randint(n, size=batch_size)
        return self.windows(self._pool[pick], length)

    def windows(self, end: np.ndarray, length: int) -> WindowBatch:
        """The windows of ``length`` steps ending at steps ``end``."""
        idx = end[:, None] + np.arange(1 - length, 1)[None, :]
        real = idx >= self._start[end][:, None]
        idx = np.where(real, idx, end[:, None])
        m = real.astype(np.float32)

        def gather(a: np.ndarray) -> np.ndarray:
            return a[idx] * m.reshape(*m.shape, *([1] * (a.ndim - 1)))

        return WindowBatch(
            observations=gather(self._obs),
            actions=gather(self._actions),
            rewards=gather(self._rewards),
            returns_to_go=gather(self._rtg),
            terminals=gather(self._terminals),
            timesteps=self._timestep[idx] * real,
            masks=m,
        )


class EpisodeContexts:
    """The last ``length`` steps of n episodes evaluated in lock-step (see the module docstring).

    Arrays are laid out like a ``WindowBatch`` with the current step last; ``timesteps`` count from
    ``first_timestep`` and stop at ``max_timestep`` (the size of the model's timestep embedding, less one).
    """

    def __init__(
        self,
        n: int,
        length: int,
        obs_shape: tuple[int, ...],
        act_dim: int,
        target_return: float,
        first_timestep: int,
        max_timestep: int,
    ):
        self.observations = np.zeros((n, length, *obs_shape), np.float32)
        self.actions = np.zeros((n, length, act_dim), np.float32)
        self.returns_to_go = np.zeros((n, length, 1), np.float32)
        self.timesteps = np.zeros((n, length), np.int64)
        self.masks = np.zeros((n, length), np.float32)
        self._rest = np.full(n, float(target_return))
        self._next_t = np.full(n, first_timestep, np.int64)
        self._max_t = max_timestep

    def step(self, idx: np.ndarray, obs: np.ndarray, rewards: np.ndarray) -> None:
        """Episodes ``idx`` received ``rewards`` and now observe ``obs``: slide their windows one step."""
        self._rest[idx] -= rewards
        for a in (self.observations, self.actions, self.returns_to_go, self.timesteps, self.masks):
            a[idx, :-1] = a[idx, 1:]
        self.observations[idx, -1] = obs
        self.actions[idx, -1] = 0.0
        self.returns_to_go[idx, -1, 0] = self._rest[idx]
        self.timesteps[idx, -1] = np.minimum(self._next_t[idx], self._max_t)
        self.masks[idx, -1] = 1.0
        self._next_t[idx] += 1

    def set_actions(self, idx: np.ndarray, actions: np.ndarray) -> None:
        """Record the actions chosen at the current step (the model's representation)."""
        self.actions[idx, -1] = actions


def default_target_return(data: OfflineData) -> float:
    """The return a Decision Transformer is asked for unless the suite says: the dataset's expert reference
    (``meta.ref_expert``: what a normalised score calls 100, the level the Decision Transformer paper
    conditions on) where it has one, else the best episode return in the dataset (the most the data shows
    is reachable)."""
    expert = data.meta.get("ref_expert")
    return float(expert) if expert is not None else float(data.episode_returns().max())
