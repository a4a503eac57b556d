"""ppo's networks: CleanRL's agent (separate actor and critic MLPs), the same agents of N seeds stacked
(``StackedAgent``, one batched matmul per layer for every seed), and frozen NumPy copies of the actor (and
critic) that a rollout samples with, a few microseconds a step instead of a torch dispatch."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from . import transfer
from .config import PPOConfig

__all__ = ["Agent", "NumpyActor", "NumpyStackedActor", "SeedActor", "StackedAgent"]

_ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU}


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


class Agent(nn.Module):
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
        return log_prob_entropy(self.actor(x), self.actor_logstd, action)


_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def log_prob_entropy(
    out: torch.Tensor, logstd: torch.Tensor | None, action: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The log-probability of ``action`` and the entropy of the policy whose actor gave ``out``: categorical
    over logits without ``logstd``, else a Gaussian with mean ``out`` and that log-std."""
    if logstd is None:
        logp = torch.log_softmax(out, dim=-1)
        logprob = logp.gather(-1, action.unsqueeze(-1)).squeeze(-1)
        entropy = -(logp.exp() * logp).sum(-1)
        return logprob, entropy
    logstd = logstd.expand_as(out)
    z = (action - out) * torch.exp(-logstd)
    logprob = (-0.5 * z.pow(2) - logstd - _HALF_LOG_2PI).sum(-1)
    entropy = (0.5 + _HALF_LOG_2PI + logstd).sum(-1)
    return logprob, entropy


class NumpyActor:
    """A frozen NumPy copy of the actor for sampling during a rollout (weights refreshed per update); with
    ``critic``, of the critic too, for the batch's values on the host (``value``)."""

    def __init__(self, agent: Agent, activation: str, critic: bool = False):
        self.agent, self.critic = agent, critic
        self.act = np.tanh if activation == "tanh" else (lambda h: np.maximum(h, 0.0, out=h))
        self.refresh()

    def tensors(self) -> list[torch.Tensor]:
        """The actor's weights, biases (and log-std), then the critic's if kept, in the order ``load`` takes
        them."""
        agent = self.agent
        out = linear_tensors(agent.actor)
        if agent.actor_logstd is not None:
            out.append(agent.actor_logstd)
        return out + linear_tensors(agent.critic) if self.critic else out

    def load(self, arrays: list[np.ndarray]) -> None:
        """Take the weights from host copies of ``tensors()`` (fetched with other values in one transfer)."""
        n = len(linear_tensors(self.agent.actor))
        self.layers = numpy_layers(arrays[:n])
        if self.agent.actor_logstd is not None:
            self.std = np.exp(arrays[n][0])
            n += 1
        self.critic_layers = numpy_layers(arrays[n:])

    def refresh(self) -> None:
        self.load(transfer.to_host(self.tensors()))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return numpy_forward(self.layers, x, self.act)

    def value(self, x: np.ndarray) -> np.ndarray:
        """The critic's values of ``x`` (float32, one per row); needs ``critic``."""
        return numpy_forward(self.critic_layers, x, self.act)[:, 0]


def linear_tensors(mlp: nn.Sequential) -> list[torch.Tensor]:
    return [t for m in mlp if isinstance(m, nn.Linear) for t in (m.weight, m.bias)]


def numpy_layers(arrays: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
    """(weight, bias) pairs as ``x @ w + b`` takes them: each weight's last two axes swapped to (in, out)
    (a stack of seeds' weights keeps its leading seed axis)."""
    return [(np.swapaxes(arrays[i], -1, -2).copy(), arrays[i + 1].copy()) for i in range(0, len(arrays), 2)]


def numpy_forward(layers: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray, act: Any) -> np.ndarray:
    """An MLP's forward pass in NumPy over ``numpy_layers``: ``act`` after every layer but the last."""
    *hidden, (w, b) = layers
    for wh, bh in hidden:
        x = act(x @ wh + bh)
    return x @ w + b


# -- stacked networks -----------------------------------------------------------------------------------


class _NumpyTanh(torch.autograd.Function):
    """tanh with NumPy's CPU kernel forward (about 15x faster than torch's on some AVX-512 CPUs) and
    torch's own backward formula, grad * (1 - y^2). Values agree with ``torch.tanh`` to an ulp or so."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = torch.from_numpy(np.tanh(x.detach().numpy()))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return grad * (1 - y * y)


def _tanh(x: torch.Tensor) -> torch.Tensor:
    return _NumpyTanh.apply(x) if x.device.type == "cpu" else torch.tanh(x)


class StackedAgent:
    """``Agent`` x N, stacked by seed, with the critic's and the actor's hidden layers in ONE tensor.

    Hidden layer j is ``w[j]`` (2N, out, in) and ``b[j]`` (2N, 1, out): rows 0..N-1 are the seeds' critics,
    rows N..2N-1 their actors (both MLPs have the same hidden sizes), so the update's forward and backward
    pass through both networks with one batched matmul per hidden layer. The heads are separate: the value
    head (N, 1, H) and the policy head (N, n_act, H); a continuous policy's log-std is (N, 1, n_act).
    """

    def __init__(self, agents: Sequence[Agent], cfg: PPOConfig, device: torch.device):
        def linears(mlp: nn.Sequential) -> list[nn.Linear]:
            return [m for m in mlp if isinstance(m, nn.Linear)]

        critics = [linears(a.critic) for a in agents]
        actors = [linears(a.actor) for a in agents]
        depth = len(cfg.hidden_sizes)

        def param(ts: list[torch.Tensor]) -> nn.Parameter:
            return nn.Parameter(torch.stack([t.detach() for t in ts]).to(device))

        self.w = [param([ls[j].weight for ls in critics + actors]) for j in range(depth)]
        self.b = [param([ls[j].bias[None] for ls in critics + actors]) for j in range(depth)]
        self.vw, self.vb = (
            param([ls[-1].weight for ls in critics]),
            param([ls[-1].bias[None] for ls in critics]),
        )
        self.aw, self.ab = (
            param([ls[-1].weight for ls in actors]),
            param([ls[-1].bias[None] for ls in actors]),
        )
        self.logstd: nn.Parameter | None = None
        if agents[0].actor_logstd is not None:
            self.logstd = param([a.actor_logstd for a in agents])
        self.act = _tanh if cfg.activation == "tanh" else torch.relu

    @property
    def n(self) -> int:
        return self.vw.shape[0]

    def parameters(self) -> list[nn.Parameter]:
        return [*self.w, *self.b, self.vw, self.vb, self.aw, self.ab] + (
            [self.logstd] if self.logstd is not None else []
        )

    def rows(self, p: torch.Tensor, seeds: torch.Tensor) -> torch.Tensor:
        """The rows of ``p``'s leading axis that hold ``seeds`` (hidden layers hold each seed twice)."""
        return torch.cat([seeds, seeds + self.n]) if p.shape[0] == 2 * self.n else seeds

    def select(self, seeds: torch.Tensor) -> list[tuple[nn.Parameter, nn.Parameter, torch.Tensor]]:
        """Keep only ``seeds``: returns (old parameter, new parameter, rows kept) for each parameter."""
        out = []
        for p in self.parameters():
            rows = self.rows(p, seeds)
            out.append((p, nn.Parameter(p.detach()[rows].clone()), rows))
        new = iter(q for _, q, _ in out)
        depth = len(self.w)
        self.w = [next(new) for _ in range(depth)]
        self.b = [next(new) for _ in range(depth)]
        self.vw, self.vb, self.aw, self.ab = next(new), next(new), next(new), next(new)
        if self.logstd is not None:
            self.logstd = next(new)
        return out

    def per_seed_norms(self) -> torch.Tensor:
        """(N, P): the gradient norm of each seed's slice of each of ``Agent.parameters()`` in its order."""
        n = self.n

        def norms(p: torch.Tensor) -> torch.Tensor:
            assert p.grad is not None
            return torch.linalg.vector_norm(p.grad.reshape(p.shape[0], -1), dim=1)

        hidden = [(norms(w), norms(b)) for w, b in zip(self.w, self.b)]
        cols = [x[:n] for wb in hidden for x in wb] + [norms(self.vw), norms(self.vb)]
        cols += [x[n:] for wb in hidden for x in wb] + [norms(self.aw), norms(self.ab)]
        if self.logstd is not None:
            cols.append(norms(self.logstd))
        return torch.stack(cols, 1)

    def scale_grads(self, coef: torch.Tensor) -> None:
        """Multiply each seed's gradients by its ``coef`` (N,)."""
        both = torch.cat([coef, coef])
        for p in self.parameters():
            assert p.grad is not None
            c = both if p.shape[0] == 2 * self.n else coef
            p.grad.mul_(c.view(-1, *([1] * (p.dim() - 1))))

    def _hidden(self, x: torch.Tensor, part: slice | None = None) -> torch.Tensor:
        for w, b in zip(self.w, self.b):
            if part is not None:
                w, b = w[part], b[part]
            x = self.act(torch.baddbmm(b, x, w.mT))  # per seed: x @ w.T + b, nn.Linear's maths
        return x

    def value(self, x: torch.Tensor) -> torch.Tensor:
        h = self._hidden(x, slice(0, self.n))
        return torch.baddbmm(self.vb, h, self.vw.mT).squeeze(-1)

    def actor_out(self, x: torch.Tensor) -> torch.Tensor:
        h = self._hidden(x, slice(self.n, 2 * self.n))
        return torch.baddbmm(self.ab, h, self.aw.mT)

    def logprob_entropy(self, x: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``Agent.logprob_entropy`` with a leading seed axis: x (N, B, obs) -> (N, B), (N, B)."""
        return log_prob_entropy(self.actor_out(x), self.logstd, action)

    def evaluate(
        self, x: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Log-probability, entropy and value at ``x``: both networks' hidden layers in one pass."""
        n = self.n
        h = self._hidden(torch.cat([x, x]))
        value = torch.baddbmm(self.vb, h[:n], self.vw.mT).squeeze(-1)
        logprob, entropy = log_prob_entropy(torch.baddbmm(self.ab, h[n:], self.aw.mT), self.logstd, action)
        return logprob, entropy, value

    def actor_layers(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The actor's layers as (N, out, in) weights and (N, 1, out) biases."""
        n = self.n
        return [(w[n:], b[n:]) for w, b in zip(self.w, self.b)] + [(self.aw, self.ab)]

    def copy_into(self, k: int, agent: Agent) -> None:
        """Seed ``k``'s weights into a plain ``Agent`` (for evaluation and checkpoints)."""
        n = self.n
        with torch.no_grad():
            for mlp, row, (hw, hb) in (
                (agent.critic, k, (self.vw, self.vb)),
                (agent.actor, n + k, (self.aw, self.ab)),
            ):
                lins = [m for m in mlp if isinstance(m, nn.Linear)]
                for lin, w, b in zip(lins, self.w, self.b):
                    lin.weight.copy_(w[row])
                    lin.bias.copy_(b[row, 0])
                lins[-1].weight.copy_(hw[k])
                lins[-1].bias.copy_(hb[k, 0])
            if self.logstd is not None and agent.actor_logstd is not None:
                agent.actor_logstd.copy_(self.logstd[k])


class NumpyStackedActor:
    """A frozen NumPy copy of the stacked actor for sampling during a rollout (refreshed per update)."""

    def __init__(self, agent: StackedAgent, activation: str):
        self.agent = agent
        self.act = np.tanh if activation == "tanh" else (lambda h: np.maximum(h, 0.0, out=h))
        self.refresh()

    def tensors(self) -> list[torch.Tensor]:
        """The actor's stacked weights and biases (and log-std), in the order ``load`` takes them."""
        out = [t for wb in self.agent.actor_layers() for t in wb]
        return out if self.agent.logstd is None else [*out, self.agent.logstd]

    def load(self, arrays: list[np.ndarray]) -> None:
        """Take the weights from host copies of ``tensors()`` (fetched with other values in one transfer)."""
        n = len(arrays) - (self.agent.logstd is not None)
        self.layers = numpy_layers(arrays[:n])
        if n < len(arrays):
            self.std = np.exp(arrays[-1])  # (N, 1, n_act)

    def refresh(self) -> None:
        self.load(transfer.to_host(self.tensors()))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return numpy_forward(self.layers, x, self.act)


class SeedActor:
    """One seed's slice of the stacked NumPy actor, acting as ``NumpyActor`` does for one run: what a
    seed's policy evaluates with away from the CPU (no trip to the device a step). ``index`` gives the
    seed's current row (failed seeds leave the stacks)."""

    def __init__(self, actor: NumpyStackedActor, index: Callable[[], int]):
        self.actor, self.index = actor, index

    def __call__(self, x: np.ndarray) -> np.ndarray:
        k = self.index()
        return numpy_forward([(w[k], b[k]) for w, b in self.actor.layers], x, self.actor.act)

    @property
    def std(self) -> np.ndarray:
        return self.actor.std[self.index()]
