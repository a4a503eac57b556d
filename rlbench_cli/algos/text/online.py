"""Online training of text policies: playing episodes in text envs, and ``online_filtered_bc``.

``collect`` plays ``num_envs`` envs in lock-step with a sampling ``TextPolicy`` and returns every turn with
what training needs (context and action token ids, the env's valid actions when it lists them, log pi of the
action, reward, whether the episode ended). ``online_filtered_bc`` repeats: play ``rollout_episodes``
episodes, keep the best ``top_fraction`` of them by return (and those of earlier rounds), and take
``updates_per_round`` behaviour-cloning steps on everything kept so far.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch

from ..base import RunContext
from .common import TextParams
from .policy import TextPolicy, _gather_pos, action_batch, build_model, build_tokenizer

__all__ = ["EnvPool", "Turn", "collect", "OnlineFilteredBC", "online_setup"]


@dataclass
class Turn:
    context: list[int]
    action: str
    candidates: list[str] | None
    logprob: float
    reward: float = 0.0
    done: bool = False  # the episode ended here (terminated or truncated)
    terminated: bool = False
    episode: int = -1
    extra: dict[str, Any] = field(default_factory=dict)


class EnvPool:
    """Text envs playing on across calls to ``collect`` (the run's own: ``EnvPool.of_run``), each reset with
    seed ``seed * 1000 + i``. ``step`` steps all of them; a pool of envs that step together overrides it."""

    def __init__(self, envs: list[Any], seed: int):
        self.envs = list(envs)
        self.obs: list[str] = []
        self.open: list[list[Turn]] = [[] for _ in self.envs]
        self.returns = np.zeros(len(self.envs))
        self.episodes = 0
        self.reset_all(seed)

    @classmethod
    def of_run(cls, ctx: RunContext, n: int) -> EnvPool:
        """``n`` envs of the run, made with seeds ``ctx.seed * 1000 + i``."""
        return cls([ctx.make_env(seed=ctx.seed * 1000 + i) for i in range(n)], ctx.seed)

    def step(self, actions: list[str]) -> list[tuple[Any, float, bool, bool, Any]]:
        """Each env's ``step`` with its action, in order."""
        return [env.step(a) for env, a in zip(self.envs, actions)]

    def reset_all(self, seed: int) -> None:
        self.obs = [str(env.reset(seed=seed * 1000 + i)[0]) for i, env in enumerate(self.envs)]
        self.open = [[] for _ in self.envs]
        self.returns[:] = 0.0

    def close(self) -> None:
        for env in self.envs:
            env.close()


def collect(pool: EnvPool, policy: TextPolicy, turns: int | None = None, episodes: int | None = None,
            on_episode: Any = None) -> tuple[list[Turn], list[list[Turn]]]:  # fmt: skip
    """Play until ``turns`` turns (or ``episodes`` whole episodes) are collected: (every turn in order of
    play, the episodes that ended). ``on_episode(return, length)`` is called as each episode ends."""
    n = len(pool.envs)
    policy.bind(pool.envs)
    policy.reset(n)
    for i in range(n):  # earlier turns of the open episodes, as the policy's history
        policy.turns[i] = [(pool.open[i][k].extra["obs"], t.action) for k, t in enumerate(pool.open[i])]
    out: list[Turn] = []
    ended: list[list[Turn]] = []
    while (turns is None or len(out) < turns) and (episodes is None or len(ended) < episodes):
        idx = np.arange(n)
        actions = policy.act(np.array(pool.obs, dtype=object), np.zeros(n), idx)
        cands = [policy.candidates(i) for i in range(n)]  # before the step: a state's own valid actions
        stepped = pool.step([str(a) for a in actions])
        for i in range(n):
            t = Turn(policy.last_contexts[i], str(actions[i]), cands[i], float(policy.last_logprobs[i]),
                     extra={"obs": pool.obs[i]})  # fmt: skip
            o, r, term, trunc, _ = stepped[i]
            t.reward, t.done, t.terminated = float(r), bool(term or trunc), bool(term)
            pool.returns[i] += r
            pool.open[i].append(t)
            out.append(t)
            if t.done:
                ep = pool.open[i]
                for u in ep:
                    u.episode = pool.episodes
                pool.episodes += 1
                ended.append(ep)
                if on_episode is not None:
                    on_episode(float(pool.returns[i]), len(ep))
                pool.open[i], pool.returns[i] = [], 0.0
                o = pool.envs[i].reset()[0]
                policy.turns[i], policy.pending[i] = [], None
            pool.obs[i] = str(o)
    return out, ended


def online_setup(ctx: RunContext, settings: dict[str, Any], values: bool,
                 extra_texts: list[str] | None = None) -> tuple[Any, Any, Any]:  # fmt: skip
    """(tokenizer, model, the env pool) of an online text run. The tokenizer's vocabulary: the text of a few
    episodes played with random valid actions (first observations, valid actions, what they lead to), and
    ``extra_texts`` (a dataset the policy is pre-trained on) after it."""
    from .common import normalizer

    ctx.score_normalizer = normalizer(ctx.spec.env, ctx.spec.env_id)
    pool = EnvPool.of_run(ctx, int(settings["num_envs"]))
    texts = _explore_texts(ctx, episodes=int(settings["vocab_episodes"])) + list(extra_texts or [])
    tok = build_tokenizer(settings, texts)
    torch.manual_seed(ctx.seed)
    model = build_model(settings, tok, values=values).to(ctx.device)
    return tok, model, pool


def _explore_texts(ctx: RunContext, episodes: int) -> list[str]:
    rng = np.random.default_rng(ctx.seed)
    env = ctx.make_env(seed=ctx.seed + 7919)
    texts: list[str] = []
    try:
        for e in range(episodes):
            obs, _ = env.reset(seed=ctx.seed * 7919 + e)
            texts.append(str(obs))
            for k in range(30):
                acts = getattr(env.unwrapped, "valid_actions", lambda: None)() or []
                if k == 0 or len(acts) <= 64:  # a long list (Wordle's words) once, and only part of it
                    texts.extend(str(a) for a in acts[:500])
                if not acts:
                    break
                obs, _, term, trunc, _ = env.step(str(acts[int(rng.integers(len(acts)))]))
                texts.append(str(obs))
                if term or trunc:
                    break
    finally:
        env.close()
    return texts


ONLINE_PARAMS: dict[str, Any] = {
    "num_envs": 8,  # envs played in lock-step
    "vocab_episodes": 8,  # random episodes (of at most 30 turns) whose text the tokenizer is built from
}


class OnlineFilteredBC(TextParams):
    """``online_filtered_bc``: see the module docstring. ``budget.steps`` counts env turns."""

    name: ClassVar[str] = "online_filtered_bc"
    own: ClassVar[dict[str, Any]] = {**ONLINE_PARAMS, "rollout_episodes": 16, "top_fraction": 0.25,
                                     "updates_per_round": 20}  # fmt: skip

    def train(self, ctx: RunContext) -> None:
        import torch.nn.functional as F

        from .common import adamw, settings_of
        from .losses import masked_mean

        settings = settings_of(self.name, ctx.params, self.own)
        tok, model, pool = online_setup(ctx, settings, values=False)
        device = ctx.device
        optim = adamw(model.parameters(), settings)
        rng = np.random.default_rng(ctx.seed)
        greedy = TextPolicy(model, tok, settings, device)
        sampler = TextPolicy(model, tok, settings, device, sample=True, rng=rng)
        kept: list[tuple[list[int], list[int]]] = []
        step = 0
        state = ctx.resume()
        if state is None:
            ctx.maybe_evaluate(0, greedy)
        else:
            model.load_state_dict(state["model"])
            optim.load_state_dict(state["optim"])
            sampler.rng = rng = state["rng"]
            kept, step = state["kept"], int(state["step"])
        frac = float(settings["top_fraction"])
        while step < ctx.steps and not ctx.should_stop():
            played, ended = collect(pool, sampler, episodes=int(settings["rollout_episodes"]),
                                    on_episode=lambda r, n, s=step: ctx.log_episode(s, r, n))  # fmt: skip
            step += len(played)
            ended.sort(key=lambda ep: -sum(t.reward for t in ep))
            for ep in ended[: max(1, int(np.ceil(frac * len(ended))))]:
                kept.extend(
                    (t.context, tok.encode(t.action)[: int(settings["max_action_tokens"])]) for t in ep
                )
            losses = []
            for _ in range(int(settings["updates_per_round"])):
                rows = rng.integers(len(kept), size=int(settings["batch_size"]))
                b = action_batch(tok, [kept[i][0] for i in rows], [kept[i][1] for i in rows], device)
                logits, _ = model(b.ids, b.mask)
                lg = _gather_pos(logits, b.pos)
                ce = F.cross_entropy(lg.flatten(0, 1).float(), b.tok.flatten(), reduction="none").view_as(
                    b.valid
                )
                loss = masked_mean(ce, b.valid)
                optim.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), float(settings["max_grad_norm"]))
                optim.step()
                losses.append(float(loss.detach()))
            step = min(step, ctx.steps)
            ctx.sink.log(
                step, **{"train/loss/bc": float(np.mean(losses)), "train/kept_turns": float(len(kept))}
            )
            ctx.maybe_evaluate(step, greedy)
            ctx.log_system(step)
            if ctx.checkpoint_due(step):
                ctx.save_checkpoint(step, {"model": model.state_dict(), "optim": optim.state_dict(),
                                           "rng": rng, "kept": kept})  # fmt: skip
        pool.close()
        ctx.finish(step, greedy)
