"""``ppo`` on a text env: PPO for a token policy (the suite entry ``ppo`` dispatches here when its env is a
text env, ``rlbench/...``).

An action is a sequence of tokens; its log-probability is the sum of its tokens' (where the env lists its
valid actions, the policy is the softmax of the candidates' sequence log-likelihoods, so the ratio is over
whole valid actions). A value head on the last context token estimates the turn's state value. Each update
plays ``n_steps`` turns in ``num_envs`` envs, computes GAE(``gae_lambda``) advantages over turns, and takes
``update_epochs`` passes of clipped-ratio policy loss plus ``vf_coef`` times the value loss over minibatches
of ``batch_size`` turns. ``budget.steps`` counts env turns. Checkpoints: model, optimiser, step; the envs
start new episodes when a run resumes.

``warm_start: {world_model_steps: W, imagined_steps: N, ...}``: before its first real turn the run trains a
world model of the task's dataset and plays ``N`` turns inside it with these same updates, then goes on in
the real env with the same model and optimiser (``algos.text.warm_start``: settings, logging, and why
``budget.steps`` still counts real turns only).

``pretrain: {bc_steps: N, ...}``: before that (and before a cold run's first turn), the policy learns by
behaviour cloning on a text dataset for ``N`` steps (``algos.text.pretrain``), so that ppo starts from a policy
that wins sometimes on a task where a random one almost never does.

``kl_coef: C`` (default 0: none) adds ``C`` times a KL penalty to each update's loss that keeps the policy near
its reference: the policy as ``pretrain`` left it (the clone), or as the run began without one; kept through a
warm start's imagined updates too. It is the sampled estimate ``E[(r - 1) - log r]`` with ``r = pi_ref(a) /
pi(a)`` over the minibatch's actions (Schulman's k3, as GRPO uses it; never negative), logged as
``train/loss/kl_ref``. The reference is kept in the run's checkpoints.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch

from ..base import RunContext
from .common import TextParams, settings_of
from .online import ONLINE_PARAMS, EnvPool, Turn, collect, online_setup
from .policy import TextPolicy, action_batch, action_logprobs

__all__ = ["TextPPO", "gae", "reference"]


def gae(rewards: np.ndarray, values: np.ndarray, next_values: np.ndarray, terminated: np.ndarray,
        ends: np.ndarray, gamma: float, lam: float) -> np.ndarray:  # fmt: skip
    """GAE advantages of one env's turns in order; ``ends`` marks an episode's last turn (its successor's value
    is ``next_values`` unless ``terminated``)."""
    adv = np.zeros(len(rewards))
    last = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        nv = 0.0 if terminated[t] else next_values[t]
        delta = rewards[t] + gamma * nv - values[t]
        last = delta + gamma * lam * (0.0 if ends[t] else last)
        adv[t] = last
    return adv


def reference(model: Any) -> Any:
    """A frozen copy of ``model``: the policy ``kl_coef`` keeps the run near."""
    import copy

    ref = copy.deepcopy(model).eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


def _policy_params(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` less ``warm_start`` and ``pretrain``: what ppo's own settings are read from."""
    return {k: v for k, v in params.items() if k not in ("warm_start", "pretrain")}


class TextPPO(TextParams):
    name: ClassVar[str] = "ppo"
    own: ClassVar[dict[str, Any]] = {**ONLINE_PARAMS, "n_steps": 128, "update_epochs": 2, "clip_coef": 0.2,
                                     "vf_coef": 0.5, "gae_lambda": 0.95, "learning_rate": 1e-4,
                                     "reward_scale": 0.1, "kl_coef": 0.0}  # fmt: skip
    takes_warm_start: ClassVar[bool] = True  # ``warm_start:`` (``algos.text.warm_start``)
    takes_pretrain: ClassVar[bool] = True  # ``pretrain:`` (``algos.text.pretrain``)
    ref: Any = None  # the frozen policy ``kl_coef`` keeps the run near (set by ``train``)

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        from .pretrain import check_pretrain
        from .warm_start import check_warm_start

        if "warm_start" in params:
            check_warm_start(params["warm_start"])
        if "pretrain" in params:
            check_pretrain(params["pretrain"])
        if float(settings_of(cls.name, _policy_params(params), cls.own)["kl_coef"]) < 0:
            raise ValueError(f"kl_coef {params['kl_coef']}: a penalty's weight is 0 (none) or more")

    def train(self, ctx: RunContext) -> None:
        from .common import adamw, texts_of
        from .pretrain import behaviour_clone, check_pretrain, pretrain_episodes
        from .warm_start import WarmStart, check_warm_start

        settings = settings_of(self.name, _policy_params(ctx.params), self.own)
        warm = check_warm_start(ctx.params["warm_start"]) if "warm_start" in ctx.params else None
        pre = check_pretrain(ctx.params["pretrain"]) if "pretrain" in ctx.params else None
        cloned = pretrain_episodes(ctx, pre) if pre is not None else []
        tok, model, pool = online_setup(ctx, settings, values=True, extra_texts=texts_of(cloned))
        device = ctx.device
        optim = adamw(model.parameters(), settings)
        rng = np.random.default_rng(ctx.seed)
        greedy = TextPolicy(model, tok, settings, device)
        sampler = TextPolicy(model, tok, settings, device, sample=True, rng=rng)
        step = 0
        state = ctx.resume()
        if state is None:
            # behaviour cloning first, then the imagined phase (neither again on a resume: the checkpoint has
            # the model)
            if pre is not None:
                behaviour_clone(ctx, model, tok, cloned, settings, pre)
            self.ref = reference(model) if float(settings["kl_coef"]) > 0 else None
            if warm is not None and not ctx.should_stop():
                world = WarmStart(ctx, warm)
                world.run(self, model, tok, sampler, settings, optim, rng)
                if not ctx.should_stop():
                    ctx.sink.log(0, **world.fidelity(greedy))
            ctx.maybe_evaluate(0, greedy)
        else:
            model.load_state_dict(state["model"])
            optim.load_state_dict(state["optim"])
            sampler.rng = rng = state["rng"]
            step = int(state["step"])
            self.ref = None
            if "ref" in state:
                self.ref = reference(model)
                self.ref.load_state_dict(state["ref"])
        while step < ctx.steps and not ctx.should_stop():
            n = min(int(settings["n_steps"]), ctx.steps - step)
            played, _ = collect(pool, sampler, turns=max(n, len(pool.envs)),
                                on_episode=lambda r, k, s=step: ctx.log_episode(s, r, k))  # fmt: skip
            step += len(played)
            losses = self.update(model, tok, pool, played, settings, rng, device, optim)
            step = min(step, ctx.steps)
            ctx.sink.log(step, **{f"train/loss/{k}": v for k, v in losses.items()})
            ctx.maybe_evaluate(step, greedy)
            ctx.log_system(step)
            if ctx.checkpoint_due(step):
                kept = {} if self.ref is None else {"ref": self.ref.state_dict()}
                ctx.save_checkpoint(
                    step, {"model": model.state_dict(), "optim": optim.state_dict(), "rng": rng, **kept}
                )
        pool.close()
        ctx.finish(step, greedy)

    def _values(self, model: Any, tok: Any, contexts: list[list[int]], device: str) -> np.ndarray:
        with torch.no_grad():
            b = action_batch(tok, contexts, [[] for _ in contexts], device)
            _, h = model(b.ids, b.mask)
            return model.v_head(h[torch.arange(len(contexts)), b.first])[:, 0].float().cpu().numpy()

    def update(self, model: Any, tok: Any, pool: EnvPool, played: list[Turn], settings: dict[str, Any],
               rng: np.random.Generator, device: str, optim: Any) -> dict[str, float]:  # fmt: skip
        n_env = len(pool.envs)
        values = self._values(model, tok, [t.context for t in played], device)
        # the state after each env's last turn: its current observation, as the policy writes it
        pol = TextPolicy(model, tok, settings, device)
        pol.reset(n_env)
        for i in range(n_env):
            pol.turns[i] = [(u.extra["obs"], u.action) for u in pool.open[i]]
        boot = self._values(model, tok, [pol.context(i, pool.obs[i]) for i in range(n_env)], device)
        scale, gamma, lam = (
            float(settings["reward_scale"]),
            float(settings["gamma"]),
            float(settings["gae_lambda"]),
        )
        adv = np.zeros(len(played))
        for i in range(n_env):  # turns were played round-robin over the envs
            rows = np.arange(i, len(played), n_env)
            if not len(rows):
                continue
            nxt = np.append(values[rows][1:], boot[i])
            ends = np.array([played[r].done for r in rows])
            ends[-1] = True if played[rows[-1]].done else False
            nv = np.where(ends, 0.0, nxt)
            nv[-1] = 0.0 if played[rows[-1]].done else boot[i]
            adv[rows] = gae(np.array([played[r].reward * scale for r in rows]), values[rows], nv,
                            np.array([played[r].terminated for r in rows]), ends, gamma, lam)  # fmt: skip
        returns = adv + values
        old = np.array([t.logprob for t in played])
        stats: dict[str, list[float]] = {"policy": [], "value": [], "approx_kl": [], "kl_ref": []}
        bs = int(settings["batch_size"])
        clip = float(settings["clip_coef"])
        kl_coef, ref = float(settings["kl_coef"]), self.ref
        for _ in range(int(settings["update_epochs"])):
            order = rng.permutation(len(played))
            for s in range(0, len(order), bs):
                mb = order[s : s + bs]
                new_lp, v = self._evaluate(model, tok, [played[j] for j in mb], settings, device)
                a = torch.as_tensor(adv[mb], dtype=torch.float32, device=device)
                if len(mb) > 1:
                    a = (a - a.mean()) / (a.std() + 1e-8)
                ratio = (new_lp - torch.as_tensor(old[mb], dtype=torch.float32, device=device)).exp()
                pg = torch.max(-a * ratio, -a * ratio.clamp(1 - clip, 1 + clip)).mean()
                vl = (
                    0.5 * (v - torch.as_tensor(returns[mb], dtype=torch.float32, device=device)).pow(2).mean()
                )
                loss = pg + float(settings["vf_coef"]) * vl
                if kl_coef > 0 and ref is not None:
                    with torch.no_grad():
                        ref_lp, _ = self._evaluate(ref, tok, [played[j] for j in mb], settings, device)
                    log_r = ref_lp - new_lp
                    kl = (log_r.exp() - 1 - log_r).mean()
                    loss = loss + kl_coef * kl
                    stats["kl_ref"].append(float(kl.detach()))
                optim.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), float(settings["max_grad_norm"]))
                optim.step()
                stats["policy"].append(float(pg.detach()))
                stats["value"].append(float(vl.detach()))
                stats["approx_kl"].append(float(((ratio - 1) - ratio.log()).mean().detach()))
        return {k: float(np.mean(v)) for k, v in stats.items() if v}

    def _evaluate(self, model: Any, tok: Any, turns: list[Turn], settings: dict[str, Any],
                  device: str) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        """(log pi of each turn's action under the current model, V of its state), with gradients."""
        limit = int(settings["max_action_tokens"])
        b = action_batch(
            tok, [t.context for t in turns], [tok.encode(t.action)[:limit] for t in turns], device
        )
        logits, h = model(b.ids, b.mask)
        v = model.v_head(h[torch.arange(len(turns)), b.first])[:, 0]
        import torch.nn.functional as F

        from .policy import _gather_pos

        lp_tok = F.log_softmax(_gather_pos(logits, b.pos).float(), dim=-1)
        seq = (lp_tok.gather(-1, b.tok[..., None])[..., 0] * b.valid).sum(dim=1)
        cand = [i for i, t in enumerate(turns) if t.candidates]
        if cand:
            pairs = [(i, c) for i in cand for c in turns[i].candidates]  # type: ignore[union-attr]
            cb = action_batch(tok, [turns[i].context for i, _ in pairs], [tok.encode(c)[:limit] for _, c in pairs],
                              device)  # fmt: skip
            scores = action_logprobs(model, cb)
            out = list(seq.unbind(0))
            k = 0
            for i in cand:
                c = turns[i].candidates
                sc = scores[k : k + len(c)]  # type: ignore[arg-type]
                k += len(c)  # type: ignore[arg-type]
                j = c.index(turns[i].action)  # type: ignore[union-attr]
                out[i] = sc[j] - torch.logsumexp(sc, dim=0)
            seq = torch.stack(out)
        return seq, v
