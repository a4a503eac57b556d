"""Rollouts in gymnasium envs for D4RL-style datasets: whole episodes in D4RL's flat layout (``collect``), episode
returns (``episode_returns``) and the uniform random policy, each stepping several envs in lock-step with one
batched policy call a step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..envs import make_env

__all__ = ["COLLECT_ENVS", "Collected", "collect", "collect_envs", "episode_returns", "uniform_policy"]

COLLECT_ENVS = 8  # environments stepped in lock-step while collecting (one batched policy call a step)


def _env_action(a: np.ndarray) -> Any:
    return a.item() if a.ndim == 0 else a


def episode_returns(
    env_id: str, env_kwargs: dict[str, Any], act: Callable[[np.ndarray], np.ndarray], seeds: list[int]
) -> np.ndarray:
    """Undiscounted return of one episode per seed, all stepped in lock-step (one batched ``act`` call)."""
    envs = [make_env(env_id, env_kwargs) for _ in seeds]
    obs = [np.asarray(env.reset(seed=s)[0], np.float32) for env, s in zip(envs, seeds)]
    returns = np.zeros(len(envs))
    alive = list(range(len(envs)))
    while alive:
        actions = np.asarray(act(np.stack([obs[i] for i in alive])))
        still = []
        for j, i in enumerate(alive):
            o, r, term, trunc, _ = envs[i].step(_env_action(actions[j]))
            returns[i] += float(r)
            obs[i] = np.asarray(o, np.float32)
            if not (term or trunc):
                still.append(i)
        alive = still
    for env in envs:
        env.close()
    return returns


@dataclass
class Collected:
    """Transitions collected by ``collect``, D4RL's flat layout, and the returns of the whole episodes."""

    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminals: np.ndarray
    timeouts: np.ndarray
    next_observations: np.ndarray
    returns: list[float]  # of the episodes that ended in the env (not the one cut at the end, if any)


def collect_envs(n: int) -> int:
    """How many envs collect ``n`` transitions: up to ``COLLECT_ENVS``, each with at least
    ``_PER_ENV`` transitions to collect, so that small collections are whole episodes, not fragments."""
    return max(1, min(COLLECT_ENVS, n // _PER_ENV))


_PER_ENV = 5_000


def collect(
    env_id: str,
    env_kwargs: dict[str, Any],
    act: Callable[[np.ndarray], np.ndarray],
    n: int,
    seed: int,
    n_envs: int | None = None,
    wrappers: list[dict[str, Any]] | None = None,
) -> Collected:
    """``n`` transitions of ``act`` in ``env_id``, whole episodes one after another (D4RL's layout).

    ``n_envs`` environments (default ``collect_envs(n)``; reset with seeds ``seed + i``, later episodes
    continuing each env's RNG) are stepped in lock-step, one batched ``act`` call a step. An episode is
    kept when it ends, in the order episodes end; an env starts another only while the episodes kept and
    running fall short of ``n``; the last episode kept is cut at ``n`` (a timeout marks the cut). ``wrappers``
    (``[{name, kwargs}]``) wrap each env, as a suite's ``wrappers:`` do.
    """
    n_envs = n_envs or collect_envs(n)
    envs = [make_env(env_id, env_kwargs, wrappers=wrappers) for _ in range(n_envs)]
    obs = [np.asarray(env.reset(seed=seed + i)[0], np.float32) for i, env in enumerate(envs)]
    Step = tuple[np.ndarray, Any, float, np.ndarray]  # obs, action, reward, next obs
    current: list[list[Step]] = [[] for _ in envs]
    episodes: list[tuple[list[Step], bool, bool]] = []  # steps, terminated, ended in the env
    active = list(range(n_envs))
    kept = taken = 0
    while active and kept < n and taken < 2 * n + n_envs:  # the bound stops envs that never end episodes
        actions = np.asarray(act(np.stack([obs[i] for i in active])))
        for j, i in enumerate(list(active)):
            o, r, term, trunc, _ = envs[i].step(_env_action(actions[j]))
            o = np.asarray(o, np.float32)
            current[i].append((obs[i], actions[j], float(r), o))
            if term or trunc:
                episodes.append((current[i], bool(term), True))
                kept += len(current[i])
                current[i] = []
                if kept + sum(len(c) for c in current) >= n:
                    active.remove(i)
                    continue
                o = np.asarray(envs[i].reset()[0], np.float32)
            obs[i] = o
        taken += len(active)
    for env in envs:
        env.close()
    episodes += [(steps, False, False) for steps in current if steps and kept < n]
    rows: list[Step] = []
    terminals: list[bool] = []
    timeouts: list[bool] = []
    returns: list[float] = []
    for steps, term, ended in episodes:
        part = steps[: n - len(rows)]
        if not part:
            break
        whole = ended and len(part) == len(steps)
        rows += part
        terminals += [False] * (len(part) - 1) + [term and whole]
        timeouts += [False] * (len(part) - 1) + [not (term and whole)]
        if whole:
            returns.append(sum(s[2] for s in part))
    return Collected(
        observations=np.stack([s[0] for s in rows]),
        actions=np.stack([s[1] for s in rows]),
        rewards=np.array([s[2] for s in rows], np.float32),
        terminals=np.array(terminals, bool),
        timeouts=np.array(timeouts, bool),
        next_observations=np.stack([s[3] for s in rows]),
        returns=returns,
    )


def uniform_policy(act_space: Any, rng: np.random.Generator) -> Callable[[np.ndarray], np.ndarray]:
    """The uniform random policy over ``act_space``, drawing from ``rng``."""
    import gymnasium

    if isinstance(act_space, gymnasium.spaces.Discrete):
        lo, n = int(act_space.start), int(act_space.n)
        return lambda obs: rng.integers(lo, lo + n, size=len(obs))
    low, high = act_space.low.astype(np.float32), act_space.high.astype(np.float32)
    return lambda obs: rng.uniform(low, high, size=(len(obs), *low.shape)).astype(np.float32)
