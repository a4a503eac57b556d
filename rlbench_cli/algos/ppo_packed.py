"""Packed PPO: N independent seeds of ``ppo`` trained in one process, in lock step, batched across seeds.

What it is
----------
``train_packed(ctxs)`` trains one PPO agent per ``RunContext`` (same algorithm, params, env and budget;
different seeds) exactly as ``ppo.PPO().train(ctx)`` trains one, but with every per-seed quantity stacked
along a leading seed axis so that one NumPy or torch call serves all seeds:

- networks: each layer's weights are one tensor ``(N, out, in)`` and biases ``(N, 1, out)``, and the
  critic's and actor's hidden layers share one ``(2N, out, in)`` tensor, so the update's forward pass is
  one ``torch.baddbmm`` per hidden layer for both networks of all seeds, plus the two heads (the rollout
  actor: one NumPy ``matmul`` per layer on stacked arrays). On CPU, tanh is NumPy's kernel with torch's
  backward formula (``_NumpyTanh``): torch's CPU tanh is an order of magnitude slower on some AVX-512 CPUs;
- optimiser: ONE Adam over the stacked parameters. Adam is elementwise, so it is N independent Adams as
  long as each seed's gradient is its own: the loss is the sum of the per-seed losses (d sum / d theta_k is
  seed k's gradient alone) and the gradient-norm clip is computed and applied PER SEED (the norm of seed
  k's slices of all parameters, the same formula as ``torch.nn.utils.clip_grad_norm_``). The learning
  rate (annealed by the shared step count) and Adam's step count are the same for all seeds, as they would
  be in N separate runs;
- minibatches: each seed draws its own permutation from its own generator; advantage normalisation,
  observation and reward normalisation statistics, GAE and explained variance are all per seed;
- defaults: the same as ``ppo``'s, CleanRL ``ppo_continuous_action.py``'s on a ``Box`` action space
  (``ppo.CONTINUOUS_DEFAULTS``, observation and reward normalisation per seed included);
- environments: ``N x num_envs`` of them, stepped with ppo.py's same-step autoreset (see ``ppo``'s module
  docstring: gymnasium 1.0's vector envs reset on the *next* step, which is not what PPO wants). For
  ``CartPole-v0/v1`` without kwargs or wrappers a NumPy-vectorised CartPole steps all of them in one call;
  it is gymnasium's ``CartPoleEnv.step`` written over arrays (the same float64 expressions in the same
  order, the same per-env reset generators), so it produces bit-identical observations to N x num_envs
  plain envs (a test checks this). gymnasium's own ``CartPoleVectorEnv`` is not used: it autoresets on the
  next step. Any other env is a list of plain envs, stepped one by one as ppo.py does.

On a GPU an iteration reaches the device in four copies whatever N is (``ppo._to_device``): the batch
there, the values back, the advantages, returns, values and every epoch's permutations there, and the
actor's new weights with every seed's statistics back; a seed's evaluation acts through its row of the
stacked NumPy actor, with no trip to the device a step. The values stay on the device: for N seeds the
host would pay N critics' forward passes.

Random streams: a seed's numbers depend on its seed only
--------------------------------------------------------
One process cannot ``seed_everything`` N times, so every random draw of seed ``s`` comes from a stream
derived from ``s`` alone, the same ones ppo.py uses: the initial weights are drawn from torch's global
generator right after ``torch.manual_seed(s)`` (one agent at a time, then stacked), actions from
``np.random.default_rng(s)``, minibatch permutations from ``torch.Generator().manual_seed(s)``, env ``i``
is seeded ``s + i`` and evaluation uses ``eval_seeds(s)``. The batched kernels (stacked NumPy matmul,
``baddbmm``, reductions along a per-seed axis) compute each seed's slice as they would compute it alone,
so a seed's metrics are bit for bit the same whichever other seeds share its job (tested, on CPU with a
given thread count). With one context ``train_packed`` reproduces ``PPO().train`` step for step to float
tolerance (tested: same rows, steps and episode lengths, values within 1e-4): the remaining differences
are rounding, from NumPy's tanh and the order of a few reductions, not from the algorithm.
Rollout random numbers are drawn per seed once per iteration (``rng.random((T, num_envs))``), which is the
same stream as ppo.py's T draws of ``num_envs``.

Failures
--------
A seed whose policy, value or entropy loss is not finite in any minibatch of an update stops there: it is
reported as ``"diverged: NaN in <which> loss at step S"``, its metrics up to then stay logged, it is not
evaluated again, and it is removed from the stacks (parameters, Adam moments, envs, buffers); the others
go on. An exception (an env raising, say) ends the whole pack and propagates to the caller.

Differences from one run per job (none statistical)
---------------------------------------------------
- ``should_stop`` of any context stops the whole pack (they share the job's stop event).
- ``target_kl``: a seed whose approx_kl exceeds it stops its epochs (its parameters and Adam moments are
  restored after the others' remaining minibatches), but Adam's step count, one per parameter tensor, keeps
  counting the pack's steps, so that seed's later bias corrections use a step count a few steps too high.
  With ``target_kl: null`` (the default) packing changes nothing.
- ``sys/*`` metrics describe the shared process.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from ..checkpoint import dumps_envs, loads_envs
from .base import RunContext, resume_together
from .ppo import (
    PPOConfig,
    PPOPolicy,
    _adam,
    _Agent,
    _host_side,
    _numpy_forward,
    _numpy_layers,
    _RunningMeanStd,
    _spaces,
    _Staging,
    _to_device,
    _to_host,
)

__all__ = ["PACKABLE", "train_packed", "can_vectorise_cartpole"]

PACKABLE: frozenset[str] = frozenset({"ppo"})  # algorithms whose seeds can share a job
CHECKPOINT_LAYOUT = "packed"  # a seed's checkpoint state here is its slice of the pack's, not ppo.py's


def _adam_slice(optimizer: Any, net: _StackedAgent, k: int) -> list[dict[str, Any]]:
    """Seed ``k``'s part of the pack's Adam state, per parameter of ``net.parameters()``: its rows of the
    moments, and the step count (shared by the pack, as in N separate runs)."""
    idx = torch.tensor([k], device=net.vw.device)
    out = []
    for p in net.parameters():
        rows = net.rows(p, idx)
        out.append({key: (v[rows].detach().cpu().clone() if v.dim() > 0 else v.detach().cpu().clone())
                    for key, v in optimizer.state[p].items()})  # fmt: skip
    return out


def _restore_adam(optimizer: Any, net: _StackedAgent, slices: list[list[dict[str, Any]]]) -> None:
    """The pack's Adam state from each seed's ``_adam_slice``, in seed order."""
    fused = bool(optimizer.defaults.get("fused"))
    for i, p in enumerate(net.parameters()):
        first = slices[0][i]
        state: dict[str, torch.Tensor] = {}
        for key, v in first.items():
            if v.dim() == 0:  # the step count: on the parameter's device for fused Adam, else on the CPU
                state[key] = v.clone().to(p.device) if fused else v.clone()
                continue
            full = torch.empty((p.shape[0], *v.shape[1:]), dtype=v.dtype, device=p.device)
            for k, seed_slices in enumerate(slices):
                full[net.rows(p, torch.tensor([k], device=p.device))] = seed_slices[i][key].to(p.device)
            state[key] = full
        optimizer.state[p] = state


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


class _StackedAgent:
    """``ppo._Agent`` x N, stacked by seed, with the critic's and the actor's hidden layers in ONE tensor.

    Hidden layer j is ``w[j]`` (2N, out, in) and ``b[j]`` (2N, 1, out): rows 0..N-1 are the seeds' critics,
    rows N..2N-1 their actors (both MLPs have the same hidden sizes), so the update's forward and backward
    pass through both networks with one batched matmul per hidden layer. The heads are separate: the value
    head (N, 1, H) and the policy head (N, n_act, H); a continuous policy's log-std is (N, 1, n_act).
    """

    def __init__(self, agents: Sequence[_Agent], cfg: PPOConfig, device: torch.device):
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
        """(N, P): the gradient norm of each seed's slice of each of ``_Agent.parameters()`` in its order."""
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
        """``_Agent.logprob_entropy`` with a leading seed axis: x (N, B, obs) -> (N, B), (N, B)."""
        return self._dist(self.actor_out(x), action)

    def evaluate(
        self, x: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Log-probability, entropy and value at ``x``: both networks' hidden layers in one pass."""
        n = self.n
        h = self._hidden(torch.cat([x, x]))
        value = torch.baddbmm(self.vb, h[:n], self.vw.mT).squeeze(-1)
        logprob, entropy = self._dist(torch.baddbmm(self.ab, h[n:], self.aw.mT), action)
        return logprob, entropy, value

    def _dist(self, out: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.logstd is None:
            logp = torch.log_softmax(out, dim=-1)
            logprob = logp.gather(-1, action.unsqueeze(-1)).squeeze(-1)
            entropy = -(logp.exp() * logp).sum(-1)
            return logprob, entropy
        logstd = self.logstd.expand_as(out)
        z = (action - out) * torch.exp(-logstd)
        logprob = (-0.5 * z.pow(2) - logstd - _HALF_LOG_2PI).sum(-1)
        entropy = (0.5 + _HALF_LOG_2PI + logstd).sum(-1)
        return logprob, entropy

    def actor_layers(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The actor's layers as (N, out, in) weights and (N, 1, out) biases."""
        n = self.n
        return [(w[n:], b[n:]) for w, b in zip(self.w, self.b)] + [(self.aw, self.ab)]

    def copy_into(self, k: int, agent: _Agent) -> None:
        """Seed ``k``'s weights into a plain ``_Agent`` (for evaluation and checkpoints)."""
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


_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


class _NumpyStackedActor:
    """A frozen NumPy copy of the stacked actor for sampling during a rollout (refreshed per update)."""

    def __init__(self, agent: _StackedAgent, activation: str):
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
        self.layers = _numpy_layers(arrays[:n])
        if n < len(arrays):
            self.std = np.exp(arrays[-1])  # (N, 1, n_act)

    def refresh(self) -> None:
        self.load(_to_host(self.tensors()))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return _numpy_forward(self.layers, x, self.act)


class _SeedActor:
    """One seed's slice of the stacked NumPy actor, acting as ``ppo._NumpyActor`` does for one run: what a
    seed's policy evaluates with away from the CPU (no trip to the device a step). ``index`` gives the
    seed's current row (failed seeds leave the stacks)."""

    def __init__(self, actor: _NumpyStackedActor, index: Callable[[], int]):
        self.actor, self.index = actor, index

    def __call__(self, x: np.ndarray) -> np.ndarray:
        k = self.index()
        return _numpy_forward([(w[k], b[k]) for w, b in self.actor.layers], x, self.actor.act)

    @property
    def std(self) -> np.ndarray:
        return self.actor.std[self.index()]


class _StackedRMS:
    """``ppo._RunningMeanStd`` x N (the same parallel-Welford update, per seed): mean/var (N, *shape)."""

    def __init__(self, n: int, shape: tuple[int, ...] = ()):
        self.mean = np.zeros((n, *shape), np.float64)
        self.var = np.ones((n, *shape), np.float64)
        self.count = 1e-4  # every seed sees the same number of samples

    def update(self, x: np.ndarray) -> None:  # x: (N, batch, *shape)
        b_mean, b_var, b_count = x.mean(1), x.var(1), x.shape[1]
        delta = b_mean - self.mean
        tot = self.count + b_count
        self.mean = self.mean + delta * b_count / tot
        m2 = self.var * self.count + b_var * b_count + delta**2 * self.count * b_count / tot
        self.var = m2 / tot
        self.count = tot

    def keep(self, idx: np.ndarray) -> None:
        self.mean, self.var = self.mean[idx], self.var[idx]

    def copy_into(self, k: int, rms: _RunningMeanStd) -> None:
        rms.mean, rms.var, rms.count = self.mean[k].copy(), self.var[k].copy(), self.count


# -- environments -----------------------------------------------------------------------------------------


@dataclass
class _StepResult:
    obs: np.ndarray  # (N, E, obs_dim) float32: the next observations (a reset env's first one)
    reward: np.ndarray  # (N, E) float64
    terminated: np.ndarray  # (N, E) bool
    truncated: np.ndarray  # (N, E) bool
    final_obs: np.ndarray  # (N, E, obs_dim) float32: where an episode ended, its last observation


class _EnvList:
    """N x E plain environments stepped one by one, each reset on the step its episode ends (ppo.py)."""

    def __init__(self, envs: list[list[Any]], obs_dim: int):
        self.envs, self.obs_dim = envs, obs_dim

    def reset(self, seeds: list[list[int]]) -> np.ndarray:
        out = np.zeros((len(self.envs), len(self.envs[0]), self.obs_dim), np.float32)
        for k, row in enumerate(self.envs):
            for i, env in enumerate(row):
                out[k, i] = np.asarray(env.reset(seed=seeds[k][i])[0], np.float32).reshape(-1)
        return out

    def step(self, actions: Any) -> _StepResult:
        n, e = len(self.envs), len(self.envs[0])
        obs = np.zeros((n, e, self.obs_dim), np.float32)
        final = np.zeros_like(obs)
        rew = np.zeros((n, e), np.float64)
        term = np.zeros((n, e), bool)
        trunc = np.zeros((n, e), bool)
        for k, row in enumerate(self.envs):
            acts = actions[k]
            for i, env in enumerate(row):
                o, r, te, tr, _ = env.step(acts[i])
                rew[k, i], term[k, i], trunc[k, i] = r, te, tr
                if te or tr:
                    final[k, i] = np.asarray(o, np.float32).reshape(-1)
                    o, _ = env.reset()
                obs[k, i] = np.asarray(o, np.float32).reshape(-1)
        return _StepResult(obs, rew, term, trunc, final)

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
    """Whether the run's env is plain CartPole (no kwargs, no wrappers), which ``_CartPoleBlock`` steps."""
    spec = ctx.spec
    return spec.env_id in ("CartPole-v0", "CartPole-v1") and not spec.env_kwargs and not spec.env_wrappers


class _CartPoleBlock:
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

    def step(self, actions: np.ndarray) -> _StepResult:
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
        return _StepResult(obs, np.ones(term.shape, np.float64), term, trunc, final)

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


# -- one seed's bookkeeping ---------------------------------------------------------------------------------


class _PackedPolicy(PPOPolicy):
    """A seed's ``PPOPolicy`` on its own ``_Agent``, which is refreshed from the stacks when used."""

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


@dataclass(eq=False)  # a seed is itself: ``seeds.index(seed)`` (its row, a step) compares identities
class _Seed:
    ctx: RunContext
    rng: np.random.Generator  # action sampling, as ppo.py
    perm_gen: torch.Generator  # minibatch permutations, as ppo.py
    agent: _Agent  # this seed's weights as a plain module, for evaluation / checkpoints
    obs_rms: _RunningMeanStd | None
    policy: _PackedPolicy | None = None
    failure: str | None = None


def _by_seed(a: np.ndarray) -> np.ndarray:
    """(T, N, E) rollout array -> (N, T * E), each seed's rows in ppo.py's (t, env) order."""
    t, n, e = a.shape
    return np.ascontiguousarray(a.transpose(1, 0, 2)).reshape(n, t * e)


# -- training -----------------------------------------------------------------------------------------------


def _check_pack(ctxs: Sequence[RunContext]) -> None:
    if not ctxs:
        raise ValueError("train_packed needs at least one RunContext")
    first = ctxs[0].spec
    seeds = [c.seed for c in ctxs]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"packed runs must have different seeds, got {seeds}")
    for c in ctxs[1:]:
        s = c.spec
        same = (s.algo_name, s.params, s.env_id, s.env_kwargs, s.env_wrappers, s.budget, c.device) == (
            first.algo_name, first.params, first.env_id, first.env_kwargs, first.env_wrappers, first.budget,
            ctxs[0].device,
        )  # fmt: skip
        if not same:
            raise ValueError(
                "packed runs must share algorithm, params, env, budget and device; only the seed may differ "
                f"({first.run_id} vs {s.run_id})"
            )
    if first.algo_name not in PACKABLE:
        raise ValueError(f"{first.algo_name!r} cannot be packed; packable: {', '.join(sorted(PACKABLE))}")


def train_packed(ctxs: Sequence[RunContext], vectorise: bool | None = None) -> dict[int, str | None]:
    """Train one PPO agent per context, in lock step. Returns {seed: None if it finished, else why it failed}.

    ``vectorise``: step CartPole with the NumPy-vectorised block (None: whenever the env allows it;
    False: a list of plain envs, as ppo.py).
    """

    _check_pack(ctxs)
    probe = ctxs[0].make_env(ctxs[0].seed)  # the spaces pick the defaults (Box: CONTINUOUS_DEFAULTS)
    cfg = PPOConfig.from_params(
        ctxs[0].params, continuous=_spaces(probe.observation_space, probe.action_space)[0].continuous
    )
    device = torch.device(ctxs[0].device)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    E, total = cfg.num_envs, ctxs[0].steps

    # -- environments (env i of seed s is seeded s + i, as ppo.py) -------------------------------------
    env_seeds = [[c.seed + i for i in range(E)] for c in ctxs]
    fast = can_vectorise_cartpole(ctxs[0]) if vectorise is None else vectorise
    if fast:
        template = probe
        envs: _EnvList | _CartPoleBlock = _CartPoleBlock(
            template, int(template.spec.max_episode_steps), len(ctxs), E
        )
    else:
        rows = [[c.make_env(s) for s in env_seeds[k][1 if k == 0 else 0 :]] for k, c in enumerate(ctxs)]
        rows[0].insert(0, probe)  # env 0 of the first seed, seeded as it would be
        template = rows[0][0]
    space, obs_shape = _spaces(template.observation_space, template.action_space)
    continuous, n_act, act_dim, low, high = space.continuous, space.n_act, space.act_dim, space.low, space.high  # fmt: skip
    act_offset = space.offset
    obs_dim = int(np.prod(obs_shape))
    if fast:
        template.close()
    else:
        envs = _EnvList(rows, obs_dim)

    # -- agents: each drawn from torch's generator seeded with its own seed, then stacked ----------------
    seeds: list[_Seed] = []
    for c in ctxs:
        torch.manual_seed(c.seed)
        agent = _Agent(obs_dim, n_act, continuous, cfg).to(device)
        agent.eval()
        rms = _RunningMeanStd((obs_dim,)) if cfg.normalize_obs else None
        seeds.append(
            _Seed(c, np.random.default_rng(c.seed), torch.Generator().manual_seed(c.seed), agent, rms)
        )
    resumed = resume_together(ctxs, CHECKPOINT_LAYOUT)  # every seed at one step, or none of them
    if resumed is not None:
        for s, st in zip(seeds, resumed):
            s.agent.load_state_dict(st["agent"])
            s.rng = st["rng"]
            s.perm_gen.set_state(st["perm_gen"])
    net = _StackedAgent([s.agent for s in seeds], cfg, device)

    def adam(params: list[nn.Parameter]) -> Any:
        return _adam(params, cfg.learning_rate, device)

    optimizer = adam(net.parameters())
    if resumed is not None:
        _restore_adam(optimizer, net, [st["adam"] for st in resumed])
    np_actor = _NumpyStackedActor(net, cfg.activation)
    obs_rms = _StackedRMS(len(ctxs), (obs_dim,)) if cfg.normalize_obs else None
    ret_rms = _StackedRMS(len(ctxs)) if cfg.normalize_reward else None

    def sync(seed: _Seed) -> None:
        k = seeds.index(seed)
        net.copy_into(k, seed.agent)
        if obs_rms is not None and seed.obs_rms is not None:
            obs_rms.copy_into(k, seed.obs_rms)

    # away from the CPU a seed evaluates through its slice of the NumPy actor, as ppo does (ppo._host_side)
    on_host = _host_side(device)
    staging = _Staging(device)
    for s in seeds:
        host = _SeedActor(np_actor, lambda s=s: seeds.index(s)) if on_host else None
        s.policy = _PackedPolicy(s.agent, cfg, obs_shape, space, s.obs_rms, device, host,
                                 sync=lambda s=s: sync(s))  # fmt: skip

    def norm_obs(raw: np.ndarray) -> np.ndarray:  # raw (N, B, obs_dim); PPOPolicy.normalize per seed
        if obs_rms is None:
            return raw
        out = (raw - obs_rms.mean[:, None]) / np.sqrt(obs_rms.var[:, None] + 1e-8)
        return np.clip(out, -cfg.clip_obs, cfg.clip_obs).astype(np.float32)

    raw_obs = envs.reset(env_seeds)
    if obs_rms is not None:
        obs_rms.update(raw_obs)
    N = len(seeds)
    ep_ret = np.zeros((N, E), np.float64)
    ep_len = np.zeros((N, E), np.int64)
    disc_ret = np.zeros((N, E), np.float64)
    global_step = 0
    if resumed is not None:  # the envs, observations, episode counters and normalisers as they were
        envs.restore([st["envs"] for st in resumed])
        global_step = int(resumed[0]["global_step"])
        for name, arr in (
            ("raw_obs", raw_obs),
            ("ep_ret", ep_ret),
            ("ep_len", ep_len),
            ("disc_ret", disc_ret),
        ):
            arr[:] = np.stack([st[name] for st in resumed])
        for rms, key in ((obs_rms, "obs_rms"), (ret_rms, "ret_rms")):
            if rms is not None:
                rms.mean = np.stack([st[key][0] for st in resumed])
                rms.var = np.stack([st[key][1] for st in resumed])
                rms.count = resumed[0][key][2]
    next_obs = norm_obs(raw_obs)
    T = cfg.num_steps

    def drop(failed: list[int]) -> None:
        """Remove failed seeds (indices into the stacks) from every stack, the optimiser and the envs."""
        nonlocal optimizer, N, next_obs, raw_obs, ep_ret, ep_len, disc_ret, seeds
        keep = np.array([k for k in range(N) if k not in failed], np.int64)
        keep_t = torch.from_numpy(keep).to(device)
        state = optimizer.state
        moved = net.select(keep_t)
        optimizer = adam([new for _, new, _ in moved])
        for p_old, p_new, rows in moved:
            if p_old in state:
                optimizer.state[p_new] = {
                    k: (v[rows].clone() if v.dim() > 0 else v.clone()) for k, v in state[p_old].items()
                }
        np_actor.refresh()
        envs.keep(keep)
        for rms in (obs_rms, ret_rms):
            if rms is not None:
                rms.keep(keep)
        next_obs, raw_obs = next_obs[keep], raw_obs[keep]
        ep_ret, ep_len, disc_ret = ep_ret[keep], ep_len[keep], disc_ret[keep]
        seeds = [seeds[k] for k in keep]
        N = len(seeds)

    if resumed is None:
        for s in seeds:
            s.ctx.maybe_evaluate(0, s.policy)
    outcome: dict[int, str | None] = {c.seed: None for c in ctxs}
    while global_step < total and seeds:
        steps_now = min(T, -(-(total - global_step) // E))
        if cfg.anneal_lr:
            lr = cfg.learning_rate * (1.0 - global_step / total)
            for group in optimizer.param_groups:
                group["lr"] = lr
        lr_now = optimizer.param_groups[0]["lr"]

        # -- rollout: all seeds x envs in lock step ------------------------------------------------------
        obs_buf = np.zeros((steps_now, N, E, obs_dim), np.float32)
        act_buf = (
            np.zeros((steps_now, N, E, n_act), np.float32)
            if continuous
            else np.zeros((steps_now, N, E), np.int64)
        )
        rew_buf = np.zeros((steps_now, N, E), np.float32)
        done_buf = np.zeros((steps_now, N, E), np.float32)
        # each seed's random numbers for this rollout, from its own stream (= ppo.py's per-step draws)
        if continuous:
            noise = np.stack([s.rng.standard_normal((steps_now, E, n_act), dtype=np.float32) for s in seeds])
        else:
            noise = np.stack([s.rng.random((steps_now, E)) for s in seeds])
        trunc_at: list[tuple[int, int, int]] = []  # (t, seed slot, env) of truncations to bootstrap
        trunc_obs: list[np.ndarray] = []
        for t in range(steps_now):
            obs_buf[t] = next_obs
            out = np_actor(next_obs)  # (N, E, n_act)
            if continuous:
                sample = out + np_actor.std * noise[:, t]
                act_buf[t] = sample
                env_actions: Any = np.clip(sample, low, high).reshape(N, E, *act_dim)
            else:
                cdf = np.exp(out - out.max(2, keepdims=True)).cumsum(2)
                u = noise[:, t][..., None] * cdf[..., -1:]
                a = np.minimum((u >= cdf).sum(2), n_act - 1)
                act_buf[t] = a
                env_actions = a + act_offset if fast else (a + act_offset).tolist()
            global_step += E
            res = envs.step(env_actions)
            rew_buf[t] = res.reward
            ep_ret += res.reward
            ep_len += 1
            done = res.terminated | res.truncated
            done_buf[t] = done
            if done.any():
                for k, i in zip(*np.nonzero(done)):
                    seeds[k].ctx.log_episode(global_step, float(ep_ret[k, i]), int(ep_len[k, i]))
                    if cfg.bootstrap_truncated and res.truncated[k, i] and not res.terminated[k, i]:
                        trunc_at.append((t, int(k), int(i)))
                        trunc_obs.append(res.final_obs[k, i])
                ep_ret[done] = 0.0
                ep_len[done] = 0
            raw_obs = res.obs
            if ret_rms is not None:
                rew = rew_buf[t]
                disc_ret[:] = disc_ret * cfg.gamma + rew
                ret_rms.update(disc_ret)
                rew[:] = np.clip(
                    rew / np.sqrt(ret_rms.var[:, None] + 1e-8), -cfg.clip_reward, cfg.clip_reward
                )
                disc_ret[done] = 0.0
            if obs_rms is not None:
                obs_rms.update(raw_obs)
            next_obs = norm_obs(raw_obs)

        # -- values, log-probs, GAE (per seed; seed axis first for torch) ---------------------------------
        # the device is reached in three copies (ppo._to_device): the batch there, the values back, the
        # advantages, returns, values and every epoch's permutations there; and one back after the update
        n = steps_now * E
        per_seed_trunc: list[list[int]] = [[] for _ in range(N)]
        for j, (_, k, _) in enumerate(trunc_at):
            per_seed_trunc[k].append(j)
        width = max((len(js) for js in per_seed_trunc), default=0)
        extra = np.zeros((N, E + width, obs_dim), np.float32)
        extra[:, :E] = next_obs
        if trunc_obs:
            raw_trunc = np.zeros((N, width, obs_dim), np.float32)
            for k, js in enumerate(per_seed_trunc):
                for c, j in enumerate(js):
                    raw_trunc[k, c] = trunc_obs[j]
            extra[:, E:] = norm_obs(raw_trunc)
        b_obs, b_actions, extra_t = _to_device([
            obs_buf.transpose(1, 0, 2, 3).reshape(N, n, obs_dim),
            np.ascontiguousarray(act_buf.transpose(1, 0, *range(2, act_buf.ndim))).reshape(N, n, *act_buf.shape[3:]),
            extra], staging)  # fmt: skip
        with torch.no_grad():
            b_logprobs, _ = net.logprob_entropy(b_obs, b_actions)
            (v_all,) = _to_host([net.value(torch.cat([b_obs, extra_t], 1))])
        values = v_all[:, :n].reshape(N, steps_now, E).transpose(1, 0, 2)
        next_value = v_all[:, n : n + E]
        rewards = rew_buf.copy()
        for k, js in enumerate(per_seed_trunc):
            for c, j in enumerate(js):
                t, _, i = trunc_at[j]
                rewards[t, k, i] += cfg.gamma * v_all[k, n + E + c]
        not_done = 1.0 - done_buf
        advantages = np.zeros((steps_now, N, E), np.float32)
        last = np.zeros((N, E), np.float32)
        for t in reversed(range(steps_now)):
            nv = next_value if t == steps_now - 1 else values[t + 1]
            delta = rewards[t] + cfg.gamma * nv * not_done[t] - values[t]
            last = delta + cfg.gamma * cfg.gae_lambda * not_done[t] * last
            advantages[t] = last
        returns = advantages + values

        # without target_kl every epoch's permutations are drawn first (each seed's own generator, in the
        # same order) and sent with the batch; with it they are drawn an epoch at a time (seeds may stop)
        drawn = None
        if cfg.target_kl is None:
            drawn = np.stack([np.stack([torch.randperm(n, generator=s.perm_gen).numpy() for s in seeds])
                              for _ in range(cfg.update_epochs)])  # fmt: skip
        b_adv, b_returns, b_values, *b_perms = _to_device(
            [*(_by_seed(a) for a in (advantages, returns, values)), *([] if drawn is None else [drawn])],
            staging)  # fmt: skip

        # -- update: one Adam over the stacks, per-seed losses, per-seed gradient-norm clip ---------------
        params = net.parameters()
        n_mb = min(cfg.num_minibatches, n)
        sizes = [len(c) for c in torch.tensor_split(torch.arange(n), n_mb)]  # ppo.py's minibatch bounds
        bounds = [(sum(sizes[:j]), sum(sizes[: j + 1])) for j in range(n_mb)]
        rows = torch.arange(N, device=device)[:, None]
        active = torch.ones(N, dtype=torch.bool, device=device)  # seeds still in this update's epochs
        frozen: dict[int, list[tuple[torch.Tensor, ...]]] = {}  # target_kl: slices to restore afterwards
        last_metrics = torch.zeros(N, 4, device=device)  # pg, v, entropy, approx_kl of the last minibatch
        clip_sum = torch.zeros(N, device=device)
        clip_cnt = torch.zeros(N, device=device)
        bad = torch.zeros(N, 3, dtype=torch.bool, device=device)  # non-finite pg / v / entropy loss
        for epoch in range(cfg.update_epochs):
            if b_perms:
                perms = b_perms[0][epoch]
            else:
                perms = torch.stack([torch.randperm(n, generator=s.perm_gen) for s in seeds]).to(device)
            # this epoch's batch in each seed's permuted order, gathered once; minibatches are then slices
            e_obs, e_act, e_logp = b_obs[rows, perms], b_actions[rows, perms], b_logprobs[rows, perms]
            e_adv, e_ret, e_val = b_adv[rows, perms], b_returns[rows, perms], b_values[rows, perms]
            for lo, hi in bounds:
                newlogprob, entropy, newvalue = net.evaluate(e_obs[:, lo:hi], e_act[:, lo:hi])
                logratio = newlogprob - e_logp[:, lo:hi]
                ratio = logratio.exp()
                with torch.no_grad():
                    approx_kl = ((ratio - 1) - logratio).mean(1)
                    clipfrac = ((ratio - 1.0).abs() > cfg.clip_coef).float().mean(1)
                mb_adv = e_adv[:, lo:hi]
                if cfg.norm_adv and hi - lo > 1:
                    mb_adv = (mb_adv - mb_adv.mean(1, keepdim=True)) / (mb_adv.std(1, keepdim=True) + 1e-8)
                pg_loss = torch.max(
                    -mb_adv * ratio, -mb_adv * torch.clamp(ratio, 1 - cfg.clip_coef, 1 + cfg.clip_coef)
                ).mean(1)
                mb_returns = e_ret[:, lo:hi]
                v_loss_unclipped = (newvalue - mb_returns).pow(2)
                if cfg.clip_vloss:
                    mb_values = e_val[:, lo:hi]
                    v_clipped = mb_values + torch.clamp(newvalue - mb_values, -cfg.clip_coef, cfg.clip_coef)
                    v_loss = 0.5 * torch.max(v_loss_unclipped, (v_clipped - mb_returns).pow(2)).mean(1)
                else:
                    v_loss = 0.5 * v_loss_unclipped.mean(1)
                entropy_loss = entropy.mean(1)
                loss = pg_loss - cfg.ent_coef * entropy_loss + cfg.vf_coef * v_loss  # (N,)
                optimizer.zero_grad(set_to_none=True)
                loss.sum().backward()  # d sum / d theta_k = seed k's own gradient
                with torch.no_grad():
                    # clip_grad_norm_ per seed: the norm of the per-tensor norms of the seed's own slices
                    total_norm = torch.linalg.vector_norm(net.per_seed_norms(), dim=1)
                    net.scale_grads(torch.clamp(cfg.max_grad_norm / (total_norm + 1e-6), max=1.0))
                    optimizer.step()
                    metrics = torch.stack([pg_loss, v_loss, entropy_loss, approx_kl], 1)
                    last_metrics = torch.where(active[:, None], metrics, last_metrics)
                    clip_sum += torch.where(active, clipfrac, 0.0)
                    clip_cnt += active
                    bad |= active[:, None] & ~torch.isfinite(metrics[:, :3])
            if cfg.target_kl is not None:
                kl = last_metrics[:, 3].cpu().numpy()
                for k in np.nonzero(active.cpu().numpy() & (kl > cfg.target_kl))[0]:
                    k = int(k)
                    st = optimizer.state
                    idx = torch.tensor([k], device=device)
                    frozen[k] = [
                        (
                            p,
                            r,
                            p.detach()[r].clone(),
                            *(st[p][m][r].clone() for m in ("exp_avg", "exp_avg_sq")),
                        )
                        for p in params
                        for r in (net.rows(p, idx),)
                    ]
                    active[k] = False
                if not bool(active.any()):
                    break
        with torch.no_grad():
            for saved in frozen.values():
                for p, r, value, m1, m2 in saved:
                    p[r] = value
                    optimizer.state[p]["exp_avg"][r] = m1
                    optimizer.state[p]["exp_avg_sq"][r] = m2
        # the actor's new weights, each seed's statistics and its non-finite flags: one copy back
        stats = torch.cat([last_metrics, (clip_sum / clip_cnt)[:, None], bad.float()], 1)
        *weights, stats_np = _to_host([*np_actor.tensors(), stats])
        np_actor.load(weights)
        for s in seeds:
            assert s.policy is not None
            s.policy.stale = True

        # -- per-seed metrics, failures, evaluation ----------------------------------------------------------
        logged = stats_np[:, :5].tolist()
        bad_np = stats_np[:, 5:] > 0.5
        failed: list[int] = []
        for k, s in enumerate(seeds):
            ret_k, val_k = np.ascontiguousarray(returns[:, k]), np.ascontiguousarray(values[:, k])
            var_y = float(np.var(ret_k))
            explained_var = float("nan") if var_y == 0 else 1.0 - float(np.var(ret_k - val_k)) / var_y
            pg, vl, ent, kl, cf = logged[k]
            s.ctx.sink.log(
                global_step,
                **{
                    "train/loss/policy": pg,
                    "train/loss/value": vl,
                    "train/entropy": ent,
                    "train/approx_kl": kl,
                    "train/clipfrac": cf,
                    "train/learning_rate": lr_now,
                    "train/explained_variance": explained_var,
                },
            )
            s.ctx.log_system(global_step)
            if bad_np[k].any():
                which = ("policy", "value", "entropy")[int(np.argmax(bad_np[k]))]
                s.failure = f"diverged: NaN in {which} loss at step {global_step}"
                outcome[s.ctx.seed] = s.failure
                failed.append(k)
                continue
            s.ctx.maybe_evaluate(global_step, s.policy)
        if failed:
            drop(failed)
        due = [s.ctx.checkpoint_due(global_step) for s in seeds]  # the same schedule: all or none
        if any(due) and seeds:
            # at an iteration boundary, as ppo.py: each seed's slice of everything the next iteration reads
            states = []
            for k, s in enumerate(seeds):
                sync(s)
                states.append({
                    "global_step": global_step, "agent": s.agent.state_dict(),
                    "adam": _adam_slice(optimizer, net, k), "rng": s.rng, "perm_gen": s.perm_gen.get_state(),
                    "envs": envs.seed_state(k), "raw_obs": raw_obs[k].copy(), "ep_ret": ep_ret[k].copy(),
                    "ep_len": ep_len[k].copy(), "disc_ret": disc_ret[k].copy(),
                    "obs_rms": None if obs_rms is None else (obs_rms.mean[k].copy(), obs_rms.var[k].copy(), obs_rms.count),
                    "ret_rms": None if ret_rms is None else (ret_rms.mean[k].copy(), ret_rms.var[k].copy(), ret_rms.count),
                })  # fmt: skip
            saved = [s.ctx.save_checkpoint(global_step, st, layout=CHECKPOINT_LAYOUT, prune=False)
                     for s, st in zip(seeds, states)]  # fmt: skip
            if all(saved):  # every seed has this step now: the older ones can go
                for s in seeds:
                    s.ctx.prune_checkpoints(global_step)
            else:  # a seed could not save: keep the step they all have, and take no more checkpoints
                for s in seeds:
                    s.ctx.disable_checkpoints()
        if any(s.ctx.should_stop() for s in seeds):
            break
    for s in seeds:
        s.ctx.finish(global_step, s.policy)
    envs.close()
    return outcome


class PackedPPO:
    """``ppo`` with many seeds per job: ``PackedPPO().train_packed(ctxs)``; see the module docstring."""

    name = "ppo"

    def train_packed(self, ctxs: Sequence[RunContext]) -> dict[int, str | None]:
        return train_packed(ctxs)
