"""ppo's update: ``update_epochs`` passes over a batch in ``num_minibatches`` steps of the clipped losses
(``loss.py``), for one agent (``Update``) or the stacked agents of N seeds (``StackedUpdate``).

On a CUDA device (``cuda_graph``, the default) one epoch's minibatch steps (forward, losses, backward,
gradient clipping, Adam) are captured once as a CUDA graph over static batch buffers, and each epoch
replays it after copying in its permutation: one launch instead of a few hundred small kernels per
minibatch (``GraphedEpochs``, the same code for both). Small networks are bound by kernel launches, and
several runs sharing a GPU (``gpus_per_job`` < 1) then queue one graph each rather than interleaving
thousands of tiny kernels. The graph computes the same operations in the same order as the eager path, on
the same permutations (the warm-up before the capture runs on a copy of the state that is then put back,
and draws no random numbers), so a run's results do not depend on which path ran. A batch of another size
(a budget that ends mid-iteration) and every CPU run take the eager path; if the capture fails, the run
warns and goes on eagerly.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from ..adam import FusedAdam, fused_supported
from .config import PPOConfig
from .loss import clipped_losses
from .nets import StackedAgent
from .transfer import to_host

__all__ = ["GraphedEpochs", "StackedUpdate", "Update", "adam"]


def adam(params: Any, lr: float | torch.Tensor, device: torch.device, capturable: bool = False) -> Any:
    """CleanRL's Adam (eps 1e-5); the fused kernel on CPU and CUDA (same maths, ~15% faster on CPU), through
    ``FusedAdam``, which spares a worker's first run torch.optim's import of torch._dynamo (about 2 s)."""
    if fused_supported(device):
        return FusedAdam(params, lr=lr, eps=1e-5, capturable=capturable)
    return torch.optim.Adam(params, lr=lr, eps=1e-5, capturable=capturable)


class GraphedEpochs:
    """An optimiser over ``params`` and the epochs of an update, each replayed as one CUDA graph where it
    can be (see the module docstring); a subclass writes ``_epoch(batch, perm)``, one pass over the batch
    in the order of ``perm``."""

    def __init__(self, params: list[torch.Tensor], cfg: PPOConfig, device: torch.device):
        self.params, self.cfg, self.device = params, cfg, device
        self.graphed = cfg.cuda_graph and device.type == "cuda"
        lr: float | torch.Tensor = cfg.learning_rate
        if self.graphed:  # a graph reads the learning rate from device memory, so annealing can change it
            lr = torch.tensor(cfg.learning_rate, dtype=torch.float32, device=device)
        self.optimizer = adam(params, lr, device, capturable=self.graphed)
        self._lr = float(cfg.learning_rate)  # the host's copy: reading a tensor lr would wait for the device
        self.graph: Any = None
        self.static: tuple[torch.Tensor, ...] = ()  # batch buffers, then the permutation
        self.out: dict[str, torch.Tensor] = {}

    @property
    def lr(self) -> float:
        return self._lr

    def set_lr(self, lr: float) -> None:
        self._lr = float(lr)
        for group in self.optimizer.param_groups:
            if isinstance(group["lr"], torch.Tensor):
                group["lr"].fill_(lr)
            else:
                group["lr"] = lr

    def _epoch(self, batch: tuple[torch.Tensor, ...], perm: torch.Tensor) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def _pass(self, use_graph: bool, batch: tuple[torch.Tensor, ...], perm: torch.Tensor) -> dict[str, Any]:
        """One epoch in the order of ``perm``: the graph replayed, or the eager pass."""
        if not use_graph:
            return self._epoch(batch, perm)
        self.static[-1].copy_(perm)
        self.graph.replay()
        return self.out

    def _ready(self, batch: tuple[torch.Tensor, ...], perm_shape: tuple[int, ...]) -> bool:
        """Copy ``batch`` into the graph's buffers, capturing the graph first if there is none yet for this
        batch size; False (and the eager path from then on) if capturing failed."""
        if self.graph is not None and self.static[0].shape == batch[0].shape:
            for buf, x in zip(self.static[:-1], batch, strict=True):
                buf.copy_(x)
            return True
        if self.graph is not None:  # another batch size (the budget's last, short iteration): eager
            return False
        try:
            self._capture(batch, perm_shape)
            return True
        except Exception as exc:  # noqa: BLE001 - any failure to capture leaves the eager path, which works
            import warnings

            warnings.warn(f"ppo: CUDA graph capture failed ({exc!r}); updating eagerly", stacklevel=2)
            self.graphed, self.graph = False, None
            return False

    def _capture(self, batch: tuple[torch.Tensor, ...], perm_shape: tuple[int, ...]) -> None:
        n = perm_shape[-1]
        perm = torch.arange(n, device=self.device).expand(perm_shape).contiguous()
        self.static = (*(x.clone() for x in batch), perm)
        params = self.params
        opt_state = self.optimizer.state
        saved_params = [p.detach().clone() for p in params]
        saved_state = {p: {k: v.clone() for k, v in opt_state[p].items() if isinstance(v, torch.Tensor)}
                       for p in params if p in opt_state}  # fmt: skip
        try:
            # warm up on a side stream (lazy Adam state, cuBLAS workspaces), then put every value back
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                for _ in range(2):
                    self._epoch(self.static[:-1], self.static[-1])
            torch.cuda.current_stream(self.device).wait_stream(side)
            self.optimizer.zero_grad(set_to_none=True)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self.out = self._epoch(self.static[:-1], self.static[-1])
            self.graph = graph
        finally:
            with torch.no_grad():
                for p, value in zip(params, saved_params, strict=True):
                    p.copy_(value)
                for p in params:
                    for k, v in opt_state.get(p, {}).items():
                        if isinstance(v, torch.Tensor):
                            if p in saved_state:
                                v.copy_(saved_state[p][k])
                            else:
                                v.zero_()  # Adam's state as it is created: zero moments, step 0
            self.optimizer.zero_grad(set_to_none=True)


class Update(GraphedEpochs):
    """PPO's update of one agent (an ``nn.Module`` with ``logprob_entropy`` and ``value``): CleanRL's."""

    def __init__(self, agent: nn.Module, cfg: PPOConfig, device: torch.device):
        super().__init__(list(agent.parameters()), cfg, device)
        self.agent = agent

    def state_dict(self) -> dict[str, Any]:
        """The optimiser's state, portable: a float learning rate and not capturable, as an eager run's."""
        state = self.optimizer.state_dict()
        for group in state["param_groups"]:
            group["lr"], group["capturable"] = float(group["lr"]), False
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        own = [(g["lr"], g["capturable"]) for g in self.optimizer.param_groups]
        self.optimizer.load_state_dict(state)
        for group, (lr, capturable) in zip(self.optimizer.param_groups, own, strict=True):
            if isinstance(lr, torch.Tensor):
                lr.fill_(float(group["lr"]))
                group["lr"] = lr
            group["capturable"] = capturable
        self._lr = float(state["param_groups"][0]["lr"])

    def _minibatch(self, batch: tuple[torch.Tensor, ...], mb: torch.Tensor) -> dict[str, torch.Tensor]:
        cfg, agent, optimizer = self.cfg, self.agent, self.optimizer
        b_obs, b_actions, b_logprobs, b_adv, b_returns, b_values = batch
        mb_obs = b_obs[mb]
        newlogprob, entropy = agent.logprob_entropy(mb_obs, b_actions[mb])
        newvalue = agent.value(mb_obs)
        loss, out = clipped_losses(cfg, newlogprob, entropy, newvalue, b_logprobs[mb], b_adv[mb],
                                   b_returns[mb], b_values[mb])  # fmt: skip
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(agent.parameters(), cfg.max_grad_norm)
        optimizer.step()
        return out

    def _epoch(self, batch: tuple[torch.Tensor, ...], perm: torch.Tensor) -> dict[str, torch.Tensor]:
        """One pass over the batch; the last minibatch's losses and every minibatch's clip fraction."""
        clipfracs = []
        for mb in torch.tensor_split(perm, min(self.cfg.num_minibatches, len(perm))):
            out = self._minibatch(batch, mb)
            clipfracs.append(out["clipfrac"])
        out["clipfrac"] = torch.stack(clipfracs)
        return out

    def run(self, batch: tuple[torch.Tensor, ...], perm_gen: torch.Generator) -> dict[str, float]:
        """Update on ``batch`` (obs, actions, log-probs, advantages, returns, values) with permutations from
        ``perm_gen``; the last minibatch's losses and the mean clip fraction, as floats."""
        stats = self.run_tensors(batch, perm_gen)
        return {k: float(v) for k, v in zip(stats, to_host(list(stats.values())), strict=True)}

    def draw_perms(self, n: int, perm_gen: torch.Generator) -> np.ndarray | None:
        """Every epoch's permutation of a batch of ``n``, drawn up front (``update_epochs`` x ``n``), or None
        with ``target_kl``: then an epoch may stop the update, and each is drawn in turn."""
        if self.cfg.target_kl is not None:
            return None
        return torch.stack(
            [torch.randperm(n, generator=perm_gen) for _ in range(self.cfg.update_epochs)]
        ).numpy()

    def run_tensors(
        self, batch: tuple[torch.Tensor, ...], perm_gen: torch.Generator, perms: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        """``run``'s statistics as 0-d tensors on the device, so the caller fetches them with other values in
        one transfer. Without ``target_kl`` no epoch needs a value on the host: every epoch's permutation is
        drawn first (``draw_perms``, the same draws in the same order) and reaches the device at once, in
        ``perms`` when the caller sent it with the batch."""
        cfg = self.cfg
        n = len(batch[0])
        n_mb = min(cfg.num_minibatches, n)
        use_graph = self.graphed and n % n_mb == 0 and self._ready(batch, (n,))
        if perms is None and cfg.target_kl is None:
            perms = torch.from_numpy(self.draw_perms(n, perm_gen)).to(self.device)  # type: ignore[arg-type]
        clipfracs: list[torch.Tensor] = []
        for epoch in range(cfg.update_epochs):
            perm = (
                perms[epoch] if perms is not None else torch.randperm(n, generator=perm_gen).to(self.device)
            )
            out = self._pass(use_graph, batch, perm)
            clipfracs.append(out["clipfrac"].clone() if use_graph else out["clipfrac"])
            if cfg.target_kl is not None and out["approx_kl"].item() > cfg.target_kl:
                break
        stats = {k: out[k] for k in ("pg_loss", "v_loss", "entropy", "approx_kl")}
        stats["clipfrac"] = torch.cat(clipfracs).mean()
        return stats


class StackedUpdate(GraphedEpochs):
    """PPO's update of N seeds' stacked agents: ONE Adam over the stacked parameters, per-seed losses and a
    per-seed gradient-norm clip, so that it is N independent updates.

    Adam is elementwise, so it is N independent Adams as long as each seed's gradient is its own: the loss
    is the sum of the per-seed losses (d sum / d theta_k is seed k's gradient alone) and the gradient-norm
    clip is computed and applied PER SEED (the norm of seed k's slices of all parameters, the same formula
    as ``torch.nn.utils.clip_grad_norm_``). The learning rate and Adam's step count are the same for all
    seeds, as they would be in N separate runs. Each seed's statistics accumulate in buffers of its own
    (the last minibatch's losses, the clip fractions, non-finite losses), masked by ``active``: with
    ``target_kl`` a seed whose approx_kl exceeds it stops its epochs, its parameters and Adam moments put
    back after the others' remaining minibatches.
    """

    def __init__(self, net: StackedAgent, cfg: PPOConfig, device: torch.device):
        super().__init__(net.parameters(), cfg, device)
        self.net = net
        n = net.n
        self.seed_rows = torch.arange(n, device=device)[:, None]
        self.active = torch.ones(n, dtype=torch.bool, device=device)  # seeds still in this update's epochs
        self.last = torch.zeros(n, 4, device=device)  # pg, v, entropy, approx_kl of the last minibatch
        self.clip_sum = torch.zeros(n, device=device)
        self.clip_cnt = torch.zeros(n, device=device)
        self.bad = torch.zeros(n, 3, dtype=torch.bool, device=device)  # non-finite pg / v / entropy loss

    def _epoch(self, batch: tuple[torch.Tensor, ...], perm: torch.Tensor) -> dict[str, torch.Tensor]:
        """One pass over every seed's batch (N, n, ...) in the order of its row of ``perm`` (N, n)."""
        cfg, net, optimizer, active = self.cfg, self.net, self.optimizer, self.active
        rows = self.seed_rows
        # this epoch's batch in each seed's permuted order, gathered once; minibatches are then slices
        e_obs, e_act, e_logp, e_adv, e_ret, e_val = (b[rows, perm] for b in batch)
        for mb in torch.tensor_split(torch.arange(perm.shape[-1]), min(cfg.num_minibatches, perm.shape[-1])):
            lo, hi = int(mb[0]), int(mb[-1]) + 1
            newlogprob, entropy, newvalue = net.evaluate(e_obs[:, lo:hi], e_act[:, lo:hi])
            loss, out = clipped_losses(cfg, newlogprob, entropy, newvalue, e_logp[:, lo:hi], e_adv[:, lo:hi],
                                       e_ret[:, lo:hi], e_val[:, lo:hi], seed_axis=True)  # fmt: skip
            optimizer.zero_grad(set_to_none=True)
            loss.sum().backward()  # d sum / d theta_k = seed k's own gradient
            with torch.no_grad():
                # clip_grad_norm_ per seed: the norm of the per-tensor norms of the seed's own slices
                total_norm = torch.linalg.vector_norm(net.per_seed_norms(), dim=1)
                net.scale_grads(torch.clamp(cfg.max_grad_norm / (total_norm + 1e-6), max=1.0))
                optimizer.step()
                metrics = torch.stack([out[k] for k in ("pg_loss", "v_loss", "entropy", "approx_kl")], 1)
                self.last.copy_(torch.where(active[:, None], metrics, self.last))
                self.clip_sum.add_(torch.where(active, out["clipfrac"], 0.0))
                self.clip_cnt.add_(active)
                self.bad.logical_or_(active[:, None] & ~torch.isfinite(metrics[:, :3]))
        return {}

    def draw_perms(self, n: int, perm_gens: list[torch.Generator]) -> np.ndarray | None:
        """Every epoch's permutations, each seed's from its own generator in the same order as one run
        draws them (``update_epochs`` x N x ``n``), or None with ``target_kl`` (drawn an epoch at a time)."""
        if self.cfg.target_kl is not None:
            return None
        return np.stack([np.stack([torch.randperm(n, generator=g).numpy() for g in perm_gens])
                         for _ in range(self.cfg.update_epochs)])  # fmt: skip

    def run_tensors(
        self, batch: tuple[torch.Tensor, ...], perm_gens: list[torch.Generator], perms: torch.Tensor | None
    ) -> torch.Tensor:
        """Update every seed on its batch (obs, actions, log-probs, advantages, returns, values, each
        (N, n, ...)); per seed (N, 8): the last minibatch's pg, value, entropy losses and approx_kl, the mean
        clip fraction and three flags, a non-finite pg, value, entropy loss in some minibatch."""
        cfg, device = self.cfg, self.device
        n_seeds, n = batch[0].shape[:2]
        use_graph = self.graphed and n % min(cfg.num_minibatches, n) == 0 and self._ready(batch, (n_seeds, n))
        for buf in (self.last, self.clip_sum, self.clip_cnt, self.bad):
            buf.zero_()
        self.active.fill_(True)
        frozen: dict[int, list[tuple[torch.Tensor, ...]]] = {}  # target_kl: slices to restore afterwards
        for epoch in range(cfg.update_epochs):
            if perms is not None:
                perm = perms[epoch]
            else:
                perm = torch.stack([torch.randperm(n, generator=g) for g in perm_gens]).to(device)
            self._pass(use_graph, batch, perm)
            if cfg.target_kl is not None:
                kl = self.last[:, 3].cpu().numpy()
                for k in np.nonzero(self.active.cpu().numpy() & (kl > cfg.target_kl))[0]:
                    frozen[int(k)] = self._seed_slices(int(k))
                    self.active[int(k)] = False
                if not bool(self.active.any()):
                    break
        with torch.no_grad():
            for saved in frozen.values():
                for p, r, value, m1, m2 in saved:
                    p[r] = value
                    self.optimizer.state[p]["exp_avg"][r] = m1
                    self.optimizer.state[p]["exp_avg_sq"][r] = m2
        return torch.cat([self.last, (self.clip_sum / self.clip_cnt)[:, None], self.bad.float()], 1)

    def _seed_slices(self, k: int) -> list[tuple[torch.Tensor, ...]]:
        """Seed ``k``'s rows of every parameter and of its Adam moments, to put back later."""
        st, idx = self.optimizer.state, torch.tensor([k], device=self.device)
        return [(p, r, p.detach()[r].clone(), *(st[p][m][r].clone() for m in ("exp_avg", "exp_avg_sq")))
                for p in self.params for r in (self.net.rows(p, idx),)]  # fmt: skip

    # -- checkpoints: each seed's slice of Adam's state -----------------------------------------------------

    def seed_state(self, k: int) -> list[dict[str, Any]]:
        """Seed ``k``'s part of the pack's Adam state, per parameter of ``net.parameters()``: its rows of the
        moments, and the step count (shared by the pack, as in N separate runs)."""
        idx = torch.tensor([k], device=self.device)
        out = []
        for p in self.params:
            rows = self.net.rows(p, idx)
            out.append({key: (v[rows].detach().cpu().clone() if v.dim() > 0 else v.detach().cpu().clone())
                        for key, v in self.optimizer.state[p].items()})  # fmt: skip
        return out

    def load_seed_states(self, slices: list[list[dict[str, Any]]]) -> None:
        """The pack's Adam state from each seed's ``seed_state``, in seed order."""
        fused = bool(self.optimizer.defaults.get("fused"))
        for i, p in enumerate(self.params):
            state: dict[str, torch.Tensor] = {}
            for key, v in slices[0][i].items():
                if v.dim() == 0:  # the step count: on the parameter's device for fused Adam, else on the CPU
                    state[key] = v.clone().to(p.device) if fused else v.clone()
                    continue
                full = torch.empty((p.shape[0], *v.shape[1:]), dtype=v.dtype, device=p.device)
                for k, seed_slices in enumerate(slices):
                    full[self.net.rows(p, torch.tensor([k], device=p.device))] = seed_slices[i][key].to(
                        p.device
                    )
                state[key] = full
            self.optimizer.state[p] = state

    def keep(
        self, net: StackedAgent, moved: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
    ) -> StackedUpdate:
        """The update of ``net``, the stacks less the seeds that left (``StackedAgent.select``'s ``moved``):
        a new optimiser with the kept rows of this one's state, at this one's learning rate."""
        new = StackedUpdate(net, self.cfg, self.device)
        new.set_lr(self.lr)
        for p_old, p_new, rows in moved:
            if p_old in self.optimizer.state:
                new.optimizer.state[p_new] = {k: (v[rows].clone() if v.dim() > 0 else v.clone())
                                              for k, v in self.optimizer.state[p_old].items()}  # fmt: skip
        return new
