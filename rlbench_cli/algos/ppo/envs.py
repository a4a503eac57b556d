"""ppo's environments: the action space as a policy needs it, and N seeds x E envs stepped together with
the same-step autoreset CleanRL's loop expects (``EnvList``; ``CartPoleBlock``: plain CartPole for all of
them in one NumPy call)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...checkpoint import dumps_envs, loads_envs
from ..base import RunContext

__all__ = ["ActionSpec", "CartPoleBlock", "EnvList", "StepResult", "can_vectorise_cartpole", "spaces"]


@dataclass(frozen=True)
class ActionSpec:
    """What a policy needs to know about the action space to turn network outputs into env actions."""

    continuous: bool
    n_act: int  # number of discrete actions, or the flattened size of a Box action
    act_dim: tuple[int, ...]  # shape of one Box action; () for discrete
    offset: int  # Discrete(n, start) maps output index i to action i + start
    low: np.ndarray | None  # Box bounds, flattened (None for discrete)
    high: np.ndarray | None


def spaces(obs_space: Any, act_space: Any) -> tuple[ActionSpec, tuple[int, ...]]:
    """The action spec and the observation shape of an env's spaces; a one-line error for spaces ppo cannot
    train on (a non-Box observation, an action space that is neither Discrete nor Box)."""
    import gymnasium as gym

    if not isinstance(obs_space, gym.spaces.Box):
        raise ValueError(f"ppo needs a Box observation space, got {obs_space}")
    if isinstance(act_space, gym.spaces.Discrete):
        space = ActionSpec(False, int(act_space.n), (), int(act_space.start), None, None)
    elif isinstance(act_space, gym.spaces.Box):
        space = ActionSpec(True, int(np.prod(act_space.shape)), tuple(act_space.shape), 0,
                            act_space.low.astype(np.float32).reshape(-1),
                            act_space.high.astype(np.float32).reshape(-1))  # fmt: skip
    else:
        raise ValueError(f"ppo supports Discrete and Box action spaces, got {act_space}")
    return space, tuple(obs_space.shape)


@dataclass
class StepResult:
    obs: np.ndarray  # (N, E, obs_dim) float32: the next observations (a reset env's first one)
    reward: np.ndarray  # (N, E) float64
    terminated: np.ndarray  # (N, E) bool
    truncated: np.ndarray  # (N, E) bool
    final_obs: np.ndarray  # (N, E, obs_dim) float32: where an episode ended, its last observation
    # (N, E) float64: the step's safety cost (info["cost"]), NaN where an env reports none; None: no env did
    cost: np.ndarray | None


class EnvList:
    """N x E plain environments stepped one by one, each reset on the step its episode ends (see the
    package's docstring)."""

    def __init__(self, envs: list[list[Any]], obs_dim: int):
        self.envs, self.obs_dim = envs, obs_dim

    def reset(self, seeds: list[list[int]]) -> np.ndarray:
        out = np.zeros((len(self.envs), len(self.envs[0]), self.obs_dim), np.float32)
        for k, row in enumerate(self.envs):
            for i, env in enumerate(row):
                out[k, i] = np.asarray(env.reset(seed=seeds[k][i])[0], np.float32).reshape(-1)
        return out

    def step(self, actions: Any) -> StepResult:
        n, e = len(self.envs), len(self.envs[0])
        obs = np.zeros((n, e, self.obs_dim), np.float32)
        final = np.zeros_like(obs)
        rew = np.zeros((n, e), np.float64)
        term = np.zeros((n, e), bool)
        trunc = np.zeros((n, e), bool)
        cost = None
        for k, row in enumerate(self.envs):
            acts = actions[k]
            for i, env in enumerate(row):
                o, r, te, tr, info = env.step(acts[i])
                rew[k, i], term[k, i], trunc[k, i] = r, te, tr
                if "cost" in info:
                    if cost is None:
                        cost = np.full((n, e), np.nan)
                    cost[k, i] = float(info["cost"])
                if te or tr:
                    final[k, i] = np.asarray(o, np.float32).reshape(-1)
                    o, _ = env.reset()
                obs[k, i] = np.asarray(o, np.float32).reshape(-1)
        return StepResult(obs, rew, term, trunc, final, cost)

    def keep(self, idx: np.ndarray) -> None:
        for k in sorted(set(range(len(self.envs))) - set(idx.tolist())):
            for env in self.envs[k]:
                env.close()
        self.envs = [self.envs[k] for k in idx]

    def seed_state(self, k: int) -> bytes:
        """Seed ``k``'s envs, pickled whole (their state and RNGs), for its checkpoint."""
        return dumps_envs(self.envs[k])

    def restore(self, states: list[bytes]) -> None:
        """The envs of every seed from their checkpoints (``seed_state``), in place of the fresh ones."""
        self.close()
        self.envs = [loads_envs(b) for b in states]

    def close(self) -> None:
        for row in self.envs:
            for env in row:
                env.close()


def can_vectorise_cartpole(ctx: RunContext) -> bool:
    """Whether the run's env is plain CartPole (no kwargs, no wrappers), which ``CartPoleBlock`` steps."""
    spec = ctx.spec
    return spec.env_id in ("CartPole-v0", "CartPole-v1") and not spec.env_kwargs and not spec.env_wrappers


class CartPoleBlock:
    """gymnasium's ``CartPoleEnv`` + ``TimeLimit`` for N x E envs at once, same-step autoreset.

    The physics is ``CartPoleEnv.step`` over arrays: the same float64 expressions in the same order (NumPy's
    array and scalar ufuncs round alike), constants read from a real instance. Each env has its own
    ``np_random`` generator seeded as gymnasium seeds it; a reset draws ``uniform(-0.05, 0.05, 4)`` from it.
    The reward is 1 on every step (``sutton_barto_reward`` off, the default).
    """

    def __init__(self, template: Any, max_steps: int, n: int, e: int):
        env = template.unwrapped
        if env.kinematics_integrator != "euler" or getattr(env, "_sutton_barto_reward", False):
            raise ValueError("the vectorised CartPole covers the default euler integrator and reward only")
        for name in ("gravity", "masspole", "total_mass", "length", "polemass_length", "force_mag", "tau",
                     "theta_threshold_radians", "x_threshold"):  # fmt: skip
            setattr(self, name, getattr(env, name))
        self.max_steps, self.n, self.e = max_steps, n, e
        self.gens: list[list[np.random.Generator]] = []
        self.state = np.zeros((n, e, 4), np.float64)
        self.t = np.zeros((n, e), np.int64)

    def reset(self, seeds: list[list[int]]) -> np.ndarray:
        from gymnasium.utils import seeding

        self.gens = [[seeding.np_random(s)[0] for s in row] for row in seeds]
        for k, row in enumerate(self.gens):
            for i, g in enumerate(row):
                self.state[k, i] = g.uniform(low=-0.05, high=0.05, size=(4,))
        self.t[:] = 0
        return self.state.astype(np.float32)

    def step(self, actions: np.ndarray) -> StepResult:
        s = self.state
        x, x_dot, theta, theta_dot = s[..., 0], s[..., 1], s[..., 2], s[..., 3]
        force = np.where(actions == 1, self.force_mag, -self.force_mag)
        costheta = np.cos(theta)
        sintheta = np.sin(theta)
        temp = (force + self.polemass_length * np.square(theta_dot) * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * np.square(costheta) / self.total_mass)
        )
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        x = x + self.tau * x_dot
        x_dot = x_dot + self.tau * xacc
        theta = theta + self.tau * theta_dot
        theta_dot = theta_dot + self.tau * thetaacc
        self.state = s = np.stack((x, x_dot, theta, theta_dot), -1)
        term = (x < -self.x_threshold) | (x > self.x_threshold)
        term |= (theta < -self.theta_threshold_radians) | (theta > self.theta_threshold_radians)
        self.t += 1
        trunc = self.t >= self.max_steps
        obs = s.astype(np.float32)
        final = obs.copy()
        done = term | trunc
        if done.any():
            for k, i in zip(*np.nonzero(done)):
                s[k, i] = self.gens[k][i].uniform(low=-0.05, high=0.05, size=(4,))
                obs[k, i] = s[k, i]
            self.t[done] = 0
        return StepResult(
            obs, np.ones(term.shape, np.float64), term, trunc, final, np.full(term.shape, np.nan)
        )

    def keep(self, idx: np.ndarray) -> None:
        self.gens = [self.gens[k] for k in idx]
        self.state, self.t = self.state[idx], self.t[idx]
        self.n = len(idx)

    def seed_state(self, k: int) -> dict[str, Any]:
        """Seed ``k``'s envs (physical states, step counts, reset generators), for its checkpoint."""
        return {"gens": self.gens[k], "state": self.state[k].copy(), "t": self.t[k].copy()}

    def restore(self, states: list[dict[str, Any]]) -> None:
        self.gens = [st["gens"] for st in states]
        self.state = np.stack([st["state"] for st in states])
        self.t = np.stack([st["t"] for st in states])

    def close(self) -> None:
        pass
