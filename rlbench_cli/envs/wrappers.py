"""Realism wrappers, as NeoRL-2 frames real-world control: delays, external disturbances, a safety cost.

Usable in any suite by short name under an env's ``wrappers:`` (``Delay``, ``Disturbance``, ``SafetyCost``),
applied to training and evaluation envs alike; their kwargs are checked when the suite is loaded (an
unknown key or a bad value is a one-line error naming the wrapper and the key).

- ``Delay(obs_steps=0, action_steps=0)``: the agent sees the observation of ``obs_steps`` steps ago (the
  first observation until then), and the env applies the action chosen ``action_steps`` steps ago (a
  no-op until then: 0 for a discrete space, the point of a box nearest 0).
- ``Disturbance(action_scale=0, obs_scale=0, correlation=0)``: an external factor pushing the system, a
  disturbance ``d`` that follows an AR(1) process (``d' = correlation * d + sqrt(1 - correlation^2) * N(0, 1)``,
  so wind-like when correlation is near 1) added to the action times ``action_scale`` times half the action
  range (then clipped to the space; a discrete action is replaced by a random one with probability
  ``action_scale``), and Gaussian sensor noise of std ``obs_scale`` on the observations. Its generator is
  seeded by the env's ``reset(seed=...)``, so seeded episodes are reproducible.
- ``SafetyCost(index, low=None, high=None, limit=0)``: a cost of 1 at each step whose next observation's
  ``index``-th value lies outside [low, high], in ``info["cost"]`` with the episode cost limit in
  ``info["cost_limit"]``. rlbench's evaluation sums it per episode: ``eval/cost`` (mean episode cost) and
  ``eval/violations`` (share of episodes whose cost exceeded the limit) are logged beside ``eval/return``.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any, ClassVar

import gymnasium
import numpy as np

__all__ = ["Delay", "Disturbance", "SafetyCost", "WRAPPERS", "check_kwargs"]


def _int(v: Any, lo: int = 0) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= lo


def _num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


class _Checked:
    """Kwargs the suite loader checks: ``KWARGS`` names each key and what it must be."""

    KWARGS: ClassVar[dict[str, str]]

    @classmethod
    def check(cls, kwargs: dict[str, Any]) -> str | None:
        """None if ``kwargs`` are valid, else a one-line problem naming the key."""
        for key in kwargs:
            if key not in cls.KWARGS:
                return f"unknown key {key!r}; valid: {', '.join(cls.KWARGS)}"
        return cls._check_values(kwargs)

    @classmethod
    def _check_values(cls, kwargs: dict[str, Any]) -> str | None:
        return None


class Delay(_Checked, gymnasium.Wrapper):
    KWARGS: ClassVar[dict[str, str]] = {
        "obs_steps": "steps the observation lags (an integer >= 0)",
        "action_steps": "steps before a chosen action is applied (an integer >= 0)",
    }

    @classmethod
    def _check_values(cls, kwargs: dict[str, Any]) -> str | None:
        for key in cls.KWARGS:
            if key in kwargs and not _int(kwargs[key]):
                return f"key {key!r} must be an integer >= 0 (got {kwargs[key]!r})"
        if not any(kwargs.get(k) for k in cls.KWARGS):
            return "key 'obs_steps' or 'action_steps' must be at least 1 (a delay of 0 steps is no delay)"
        return None

    def __init__(self, env: gymnasium.Env, obs_steps: int = 0, action_steps: int = 0):
        problem = self.check({"obs_steps": obs_steps, "action_steps": action_steps})
        if problem:
            raise ValueError(f"Delay: {problem}")
        super().__init__(env)
        self.obs_steps, self.action_steps = int(obs_steps), int(action_steps)
        self._obs: deque[Any] = deque(maxlen=self.obs_steps + 1)
        self._actions: deque[Any] = deque()

    def _noop(self) -> Any:
        space = self.env.action_space
        if isinstance(space, gymnasium.spaces.Discrete):
            return int(space.start)
        if isinstance(space, gymnasium.spaces.Box):
            return np.clip(np.zeros(space.shape, space.dtype), space.low, space.high)
        return space.sample()

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self._obs.clear()
        self._obs.extend([obs] * (self.obs_steps + 1))
        self._actions = deque([self._noop() for _ in range(self.action_steps)])
        return self._obs[0], info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        self._actions.append(action)
        obs, reward, term, trunc, info = self.env.step(self._actions.popleft())
        self._obs.append(obs)
        return self._obs[0], reward, term, trunc, info


class Disturbance(_Checked, gymnasium.Wrapper):
    KWARGS: ClassVar[dict[str, str]] = {
        "action_scale": "disturbance on the action, a fraction of half the action range (>= 0)",
        "obs_scale": "std of the noise on observations (>= 0)",
        "correlation": "AR(1) correlation of the action disturbance from step to step, in [0, 1)",
    }

    @classmethod
    def _check_values(cls, kwargs: dict[str, Any]) -> str | None:
        for key in cls.KWARGS:
            if key in kwargs and not (_num(kwargs[key]) and kwargs[key] >= 0):
                return f"key {key!r} must be a number >= 0 (got {kwargs[key]!r})"
        if kwargs.get("correlation", 0) >= 1:
            return f"key 'correlation' must be below 1 (got {kwargs['correlation']!r})"
        if not (kwargs.get("action_scale") or kwargs.get("obs_scale")):
            return "key 'action_scale' or 'obs_scale' must be above 0 (else nothing is disturbed)"
        return None

    def __init__(
        self, env: gymnasium.Env, action_scale: float = 0.0, obs_scale: float = 0.0, correlation: float = 0.0
    ):
        problem = self.check(
            {"action_scale": action_scale, "obs_scale": obs_scale, "correlation": correlation}
        )
        if problem:
            raise ValueError(f"Disturbance: {problem}")
        super().__init__(env)
        self.action_scale, self.obs_scale, self.correlation = (
            float(action_scale),
            float(obs_scale),
            float(correlation),
        )
        self._rng = np.random.default_rng()
        self._d: np.ndarray | None = None

    def _noisy(self, obs: Any) -> Any:
        if not self.obs_scale:
            return obs
        obs = np.asarray(obs)
        return (obs + self._rng.normal(0.0, self.obs_scale, size=obs.shape)).astype(obs.dtype)

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        seed = kwargs.get("seed")
        if seed is not None:
            self._rng = np.random.default_rng([int(seed), 0x5EED])
        obs, info = self.env.reset(**kwargs)
        self._d = None
        return self._noisy(obs), info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        space = self.env.action_space
        if self.action_scale and isinstance(space, gymnasium.spaces.Box):
            shape = space.shape
            fresh = self._rng.standard_normal(shape)
            c = self.correlation
            self._d = fresh if self._d is None else c * self._d + math.sqrt(1 - c * c) * fresh
            half = (space.high - space.low) / 2
            action = np.clip(np.asarray(action) + self.action_scale * half * self._d, space.low, space.high)
            action = action.astype(space.dtype)
        elif self.action_scale and isinstance(space, gymnasium.spaces.Discrete):
            if self._rng.random() < self.action_scale:
                action = int(space.start + self._rng.integers(space.n))
        obs, reward, term, trunc, info = self.env.step(action)
        return self._noisy(obs), reward, term, trunc, info


class SafetyCost(_Checked, gymnasium.Wrapper):
    KWARGS: ClassVar[dict[str, str]] = {
        "index": "which observation value is constrained (an integer >= 0)",
        "low": "the lowest safe value (default: none)",
        "high": "the highest safe value (default: none)",
        "limit": "episode cost above which an episode is a violation (>= 0, default 0)",
    }

    @classmethod
    def _check_values(cls, kwargs: dict[str, Any]) -> str | None:
        if "index" not in kwargs:
            return "key 'index' is missing; give the observation index the cost watches, e.g. {index: 0}"
        if not _int(kwargs["index"]):
            return f"key 'index' must be an integer >= 0 (got {kwargs['index']!r})"
        for key in ("low", "high"):
            if kwargs.get(key) is not None and not _num(kwargs[key]):
                return f"key {key!r} must be a number (got {kwargs[key]!r})"
        if kwargs.get("low") is None and kwargs.get("high") is None:
            return "key 'low' or 'high' is needed: the safe range of the observation value"
        if (
            kwargs.get("low") is not None
            and kwargs.get("high") is not None
            and kwargs["low"] > kwargs["high"]
        ):
            return f"key 'low' ({kwargs['low']}) must not exceed 'high' ({kwargs['high']})"
        if "limit" in kwargs and not (_num(kwargs["limit"]) and kwargs["limit"] >= 0):
            return f"key 'limit' must be a number >= 0 (got {kwargs['limit']!r})"
        return None

    def __init__(
        self,
        env: gymnasium.Env,
        index: int,
        low: float | None = None,
        high: float | None = None,
        limit: float = 0.0,
    ):
        problem = self.check({"index": index, "low": low, "high": high, "limit": limit})
        if problem:
            raise ValueError(f"SafetyCost: {problem}")
        super().__init__(env)
        shape = env.observation_space.shape or ()
        if len(shape) != 1 or index >= shape[0]:
            raise ValueError(
                f"SafetyCost: key 'index' is {index}, but the observations have shape {shape}; use 0..{shape[0] - 1}"
                if len(shape) == 1
                else f"SafetyCost: needs flat (1-d) observations, got shape {shape}"
            )
        self.index, self.limit = int(index), float(limit)
        self.low = -math.inf if low is None else float(low)
        self.high = math.inf if high is None else float(high)

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, term, trunc, info = self.env.step(action)
        value = float(np.asarray(obs).reshape(-1)[self.index])
        info = {**info, "cost": float(not (self.low <= value <= self.high)), "cost_limit": self.limit}
        return obs, reward, term, trunc, info


# short names usable under wrappers: in a suite
WRAPPERS: dict[str, type] = {"Delay": Delay, "Disturbance": Disturbance, "SafetyCost": SafetyCost}


def check_kwargs(cls: type, kwargs: dict[str, Any]) -> str | None:
    """None if ``cls(env, **kwargs)`` takes these kwargs, else a one-line problem naming the key: rlbench's
    wrappers check names and values, other classes the names their constructor accepts."""
    if isinstance(cls, type) and issubclass(cls, _Checked):
        return cls.check(kwargs)
    import inspect

    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    names = [n for n, p in params.items() if p.kind is not inspect.Parameter.VAR_POSITIONAL][1:]  # after env
    for key in kwargs:
        if key not in names:
            return f"unknown key {key!r}; valid: {', '.join(names) or 'none'}"
    return None
