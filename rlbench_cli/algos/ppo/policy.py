"""ppo's policy as evaluation and datasets use it (``PPOPolicy``, saved and loaded on its own), and the
running observation / return statistics it normalises with."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .config import PPOConfig
from .envs import ActionSpec
from .nets import Agent, NumpyActor

__all__ = ["PPOPolicy", "SeedPolicy", "RunningMeanStd", "StackedRMS", "load_policy"]


class RunningMeanStd:
    """Running mean / variance (parallel Welford), as gymnasium's and SB3's normalisation wrappers."""

    axis = 0  # the batch axis of ``update``'s samples

    def __init__(self, shape: tuple[int, ...] = ()):
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = 1e-4

    def update(self, x: np.ndarray) -> None:
        b_mean, b_var, b_count = x.mean(self.axis), x.var(self.axis), x.shape[self.axis]
        delta = b_mean - self.mean
        tot = self.count + b_count
        self.mean = self.mean + delta * b_count / tot
        m2 = self.var * self.count + b_var * b_count + delta**2 * self.count * b_count / tot
        self.var = m2 / tot
        self.count = tot


class StackedRMS(RunningMeanStd):
    """``RunningMeanStd`` x N (the same parallel-Welford update, per seed): mean/var (N, *shape), samples
    (N, batch, *shape); every seed sees the same number of samples, so ``count`` is one."""

    axis = 1

    def __init__(self, n: int, shape: tuple[int, ...] = ()):
        super().__init__((n, *shape))

    def keep(self, idx: np.ndarray) -> None:
        self.mean, self.var = self.mean[idx], self.var[idx]

    def seed_stats(self, k: int) -> tuple[Any, Any, float]:
        """Seed ``k``'s (mean, var, count), copies, as a checkpoint holds them."""
        return self.mean[k].copy(), self.var[k].copy(), self.count

    def copy_into(self, k: int, rms: RunningMeanStd) -> None:
        rms.mean, rms.var, rms.count = self.seed_stats(k)


_CHECKPOINT_FORMAT = "rlbench-ppo-policy-1"


class PPOPolicy:
    """The actor of a PPO agent as a policy.

    Called on an observation batch it returns the deterministic action (argmax / Gaussian mean clipped to
    the bounds), which is what evaluation scores; ``sample`` draws the action the way training does
    (categorical / Gaussian, clipped), which is what a D4RL-style dataset is collected with. During
    training it reads the live agent and observation statistics, so it always acts as the current policy;
    ``save`` snapshots both; ``loader`` names ``load_policy`` for the run's saved best and final policies
    (``algos.keep``).
    """

    loader = "ppo.policy:load_policy"
    policy_file = "policy.pt"

    def __init__(
        self,
        agent: Agent,
        cfg: PPOConfig,
        obs_shape: tuple[int, ...],
        space: ActionSpec,
        obs_rms: RunningMeanStd | None,
        device: torch.device,
        host_actor: NumpyActor | None = None,
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
    space = ActionSpec(**{**a, "act_dim": tuple(a["act_dim"])})
    obs_shape = tuple(ck["obs_shape"])
    agent = Agent(int(np.prod(obs_shape)), space.n_act, space.continuous, cfg).to(device)
    agent.load_state_dict(ck["state_dict"])
    agent.eval()
    rms = None
    if ck["obs_rms"] is not None:
        rms = RunningMeanStd()
        rms.mean, rms.var = (np.asarray(ck["obs_rms"][k], np.float64) for k in ("mean", "var"))
        rms.count = ck["obs_rms"]["count"]
    return PPOPolicy(agent, cfg, obs_shape, space, rms, torch.device(device))


class SeedPolicy(PPOPolicy):
    """A seed's ``PPOPolicy`` on its own ``Agent`` and statistics, refreshed from the learner and the stacked
    statistics when used after an update (``stale``)."""

    def __init__(self, *args: Any, sync: Callable[[], None]):
        super().__init__(*args)
        self.stale = True
        self._sync = sync

    def _fresh(self) -> None:
        if self.stale:
            self._sync()
            self.stale = False

    def _actor_out(self, obs: np.ndarray) -> np.ndarray:
        self._fresh()
        return super()._actor_out(obs)

    def normalize(self, raw: np.ndarray) -> np.ndarray:
        self._fresh()
        return super().normalize(raw)

    def save(self, path: Any) -> None:
        self._fresh()
        super().save(path)
