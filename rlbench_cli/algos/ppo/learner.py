"""What learns in ppo's loop (``loop.py``), behind one interface over a leading seed axis of N seeds:
``OneAgent`` (N = 1: CleanRL's agent, an ``nn.Module``, and its ``Update``; what ``ppo`` trains with) and
``StackedAgents`` (N seeds' agents stacked, ``StackedUpdate``; what packed ppo trains with).

Each acts during a rollout through a frozen NumPy copy of its actor (``act``, ``std``), values a batch
and its extra observations (``values``: the next observations and truncated episodes' final ones) and
updates on the batch once the loop has its advantages (``learn``: every seed's statistics and flags, one
row each, and the actor's new weights in the same copy back). Host and device meet in as few copies as
each can: see the package's docstring.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from . import transfer
from .config import PPOConfig
from .nets import Agent, NumpyActor, NumpyStackedActor, SeedActor, StackedAgent
from .transfer import Staging, values_on_host
from .update import StackedUpdate, Update

__all__ = ["N_STATS", "OneAgent", "StackedAgents"]

# a learner's statistics per seed: pg, value, entropy losses, approx_kl, clip fraction, then three flags
# (a non-finite pg, value, entropy loss in some minibatch)
N_STATS = 8


class OneAgent:
    """One seed: its ``Agent`` and ``Update``. On CPU torch values the batch; away from it, a NumPy copy of
    the critic when that is cheap (``values_on_host``), so an iteration waits for the device once."""

    n = 1

    def __init__(self, agents: Sequence[Agent], cfg: PPOConfig, device: torch.device):
        (self.agent,) = agents
        self.update = Update(self.agent, cfg, device)
        self.host_values = values_on_host(device, self.agent, (cfg.num_steps + 1) * cfg.num_envs)
        self.np_actor = NumpyActor(self.agent, cfg.activation, critic=self.host_values)
        self.staging = Staging(device)
        self._batch: tuple[np.ndarray, np.ndarray] = ()  # type: ignore[assignment]

    def act(self, obs: np.ndarray) -> np.ndarray:
        return self.np_actor(obs[0])[None]

    @property
    def std(self) -> np.ndarray:
        return self.np_actor.std[None, None]

    def host_actor(self, index: Callable[[], int]) -> Any:
        """What the seed's policy acts through away from the CPU: the rollout's NumPy actor."""
        return self.np_actor

    def sync(self, k: int, agent: Agent) -> None:
        """Seed ``k``'s weights into its ``agent``: it is the agent."""

    def values(self, obs: np.ndarray, actions: np.ndarray, extra: np.ndarray) -> np.ndarray:
        """The values (1, n + m) of the batch's observations (1, n, obs) and ``extra`` (1, m, obs)."""
        self._batch = (obs[0], actions[0])
        to_value_np = np.concatenate([obs[0], extra[0]]).astype(np.float32, copy=False)
        if self.host_values:
            return self.np_actor.value(to_value_np)[None]
        with torch.no_grad():  # on CPU both copies are no-ops
            (v_all,) = transfer.to_host(
                [self.agent.value(transfer.to_device([to_value_np], self.staging)[0])]
            )
        return v_all[None]

    def learn(self, adv: np.ndarray, returns: np.ndarray, values: np.ndarray,
              perm_gens: list[torch.Generator]) -> np.ndarray:  # fmt: skip
        """Update on the batch ``values`` saw: one copy to the device (the batch, its advantages, returns,
        values and every epoch's permutation), one back (statistics and the actor's new weights)."""
        obs_np, act_np = self._batch
        agent, update, (perm_gen,) = self.agent, self.update, perm_gens
        perms_np = update.draw_perms(len(obs_np), perm_gen)
        b_obs, b_actions, b_adv, b_returns, b_values, *b_perms = transfer.to_device(
            [obs_np, act_np, adv[0], returns[0], values[0], *([] if perms_np is None else [perms_np])],
            self.staging)  # fmt: skip
        with torch.no_grad():
            b_logprobs, _ = agent.logprob_entropy(b_obs, b_actions)
        batch = (b_obs, b_actions, b_logprobs, b_adv, b_returns, b_values)
        stat_t = update.run_tensors(batch, perm_gen, b_perms[0] if b_perms else None)
        fetched = transfer.to_host([*stat_t.values(), *self.np_actor.tensors()])
        self.np_actor.load(fetched[len(stat_t) :])
        return np.array([[*(float(v) for v in fetched[: len(stat_t)]), 0.0, 0.0, 0.0]])

    def optimizer_state(self, k: int) -> dict[str, Any]:
        """The optimiser's part of a checkpoint (ppo's layout: ``optimizer``, torch's state dict)."""
        return {"optimizer": self.update.state_dict()}

    def load_optimizer(self, states: list[dict[str, Any]]) -> None:
        self.update.load_state_dict(states[0]["optimizer"])
        self.np_actor.refresh()


class StackedAgents:
    """N seeds' agents stacked (``StackedAgent``, ``StackedUpdate``). The values stay on the device: for N
    seeds the host would pay N critics' forward passes; so an iteration reaches the device in four copies
    whatever N is: the batch there, the values back, the advantages, returns, values and every epoch's
    permutations there, and the actor's new weights with every seed's statistics back."""

    def __init__(self, agents: Sequence[Agent], cfg: PPOConfig, device: torch.device):
        self.cfg, self.device = cfg, device
        self.net = StackedAgent(agents, cfg, device)
        self.update = StackedUpdate(self.net, cfg, device)
        self.np_actor = NumpyStackedActor(self.net, cfg.activation)
        self.staging = Staging(device)
        self._batch: tuple[torch.Tensor, ...] = ()

    @property
    def n(self) -> int:
        return self.net.n

    def act(self, obs: np.ndarray) -> np.ndarray:
        return self.np_actor(obs)

    @property
    def std(self) -> np.ndarray:
        return self.np_actor.std

    def host_actor(self, index: Callable[[], int]) -> Any:
        """What a seed's policy acts through away from the CPU: its row (``index()``) of the NumPy actor."""
        return SeedActor(self.np_actor, index)

    def sync(self, k: int, agent: Agent) -> None:
        self.net.copy_into(k, agent)

    def values(self, obs: np.ndarray, actions: np.ndarray, extra: np.ndarray) -> np.ndarray:
        b_obs, b_actions, extra_t = transfer.to_device([obs, actions, extra], self.staging)
        with torch.no_grad():
            b_logprobs, _ = self.net.logprob_entropy(b_obs, b_actions)
            (v_all,) = transfer.to_host([self.net.value(torch.cat([b_obs, extra_t], 1))])
        self._batch = (b_obs, b_actions, b_logprobs)
        return v_all

    def learn(self, adv: np.ndarray, returns: np.ndarray, values: np.ndarray,
              perm_gens: list[torch.Generator]) -> np.ndarray:  # fmt: skip
        # without target_kl every epoch's permutations are drawn first (each seed's own generator, in the
        # same order) and sent with the batch; with it they are drawn an epoch at a time (seeds may stop)
        drawn = self.update.draw_perms(adv.shape[1], perm_gens)
        b_adv, b_returns, b_values, *b_perms = transfer.to_device(
            [adv, returns, values, *([] if drawn is None else [drawn])], self.staging)  # fmt: skip
        batch = (*self._batch, b_adv, b_returns, b_values)
        stats = self.update.run_tensors(batch, perm_gens, b_perms[0] if b_perms else None)
        *weights, stats_np = transfer.to_host([*self.np_actor.tensors(), stats])
        self.np_actor.load(weights)
        return stats_np

    def optimizer_state(self, k: int) -> dict[str, Any]:
        """Seed ``k``'s slice of Adam's state (packed ppo's layout: ``adam``)."""
        return {"adam": self.update.seed_state(k)}

    def load_optimizer(self, states: list[dict[str, Any]]) -> None:
        self.update.load_seed_states([st["adam"] for st in states])

    def drop(self, keep: np.ndarray) -> None:
        """Keep only the seeds ``keep`` (their rows) in the stacks, the optimiser and the NumPy actor."""
        moved = self.net.select(torch.from_numpy(keep).to(self.device))
        self.update = self.update.keep(self.net, moved)
        self.np_actor.refresh()
