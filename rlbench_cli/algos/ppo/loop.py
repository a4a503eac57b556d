"""ppo's training loop over a leading seed axis: N seeds x E envs in lock step, rollout, GAE, the update,
metrics, evaluation and checkpoints. ``ppo`` runs it with one seed, packed ppo with the seeds of a job."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..base import RunContext, resume_together
from . import transfer
from .config import PPOConfig
from .envs import CartPoleBlock, EnvList, can_vectorise_cartpole, spaces
from .learner import OneAgent, StackedAgents
from .nets import Agent
from .policy import RunningMeanStd, SeedPolicy, StackedRMS

__all__ = ["CHECKPOINT_LAYOUT", "train"]

CHECKPOINT_LAYOUT = "packed"  # a packed seed's checkpoint state is its slice of the pack's, not ppo's

TRAIN_METRICS = (
    "train/loss/policy",
    "train/loss/value",
    "train/entropy",
    "train/approx_kl",
    "train/clipfrac",
)


@dataclass(eq=False)  # a seed is itself: ``seeds.index(seed)`` (its row, a step) compares identities
class Seed:
    ctx: RunContext
    rng: np.random.Generator  # action sampling
    perm_gen: torch.Generator  # minibatch permutations
    agent: Agent  # this seed's weights as a plain module, for evaluation / checkpoints
    obs_rms: RunningMeanStd | None
    policy: SeedPolicy | None = None
    failure: str | None = None


def by_seed(a: np.ndarray) -> np.ndarray:
    """(T, N, E) rollout array -> (N, T * E), each seed's rows in (t, env) order."""
    t, n, e = a.shape
    return np.ascontiguousarray(a.transpose(1, 0, 2)).reshape(n, t * e)


def check_pack(ctxs: Sequence[RunContext]) -> None:
    """A ValueError unless ``ctxs`` are ppo runs that differ only by seed."""
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
    if first.algo_name != "ppo":
        raise ValueError(f"{first.algo_name!r} cannot be packed by ppo's trainer")


def train(ctxs: Sequence[RunContext], packed: bool, vectorise: bool | None = None) -> dict[int, str | None]:
    """Train one PPO agent per context, in lock step. Returns {seed: None if it finished, else why it failed}.

    ``packed``: the seeds of a job (their stacked agents, checkpoints in the packed layout, a diverging seed
    fails alone); else exactly one context, a ``ppo`` run. ``vectorise``: step CartPole with the
    NumPy-vectorised block (None: whenever a pack's env allows it; False: a list of plain envs).
    """
    if not packed:
        (ctx,) = ctxs
        random.seed(ctx.seed)
        np.random.seed(ctx.seed % 2**32)
        torch.manual_seed(ctx.seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    probe = ctxs[0].make_env(ctxs[0].seed)  # the spaces pick the defaults (Box: CONTINUOUS_DEFAULTS)
    cfg = PPOConfig.from_params(
        ctxs[0].params, continuous=spaces(probe.observation_space, probe.action_space)[0].continuous
    )
    device = torch.device(ctxs[0].device)
    E, total = cfg.num_envs, ctxs[0].steps

    # -- environments (env i of seed s is seeded s + i) ---------------------------------------------------
    env_seeds = [[c.seed + i for i in range(E)] for c in ctxs]
    fast = (packed and can_vectorise_cartpole(ctxs[0])) if vectorise is None else vectorise
    if fast:
        template = probe
        envs: EnvList | CartPoleBlock = CartPoleBlock(
            template, int(template.spec.max_episode_steps), len(ctxs), E
        )
    else:
        rows = [[c.make_env(s) for s in env_seeds[k][1 if k == 0 else 0 :]] for k, c in enumerate(ctxs)]
        rows[0].insert(0, probe)  # env 0 of the first seed, seeded as it would be
        template = rows[0][0]
    space, obs_shape = spaces(template.observation_space, template.action_space)
    continuous, n_act, act_dim, act_offset = space.continuous, space.n_act, space.act_dim, space.offset
    low, high = space.low, space.high
    obs_dim = int(np.prod(obs_shape))
    if fast:
        template.close()
    else:
        envs = EnvList(rows, obs_dim)

    # -- agents: each drawn from torch's generator seeded with its own seed --------------------------------
    seeds: list[Seed] = []
    for c in ctxs:
        torch.manual_seed(c.seed)
        agent = Agent(obs_dim, n_act, continuous, cfg).to(device)
        if packed:
            agent.eval()
        rms = RunningMeanStd((obs_dim,)) if cfg.normalize_obs else None
        seeds.append(
            Seed(c, np.random.default_rng(c.seed), torch.Generator().manual_seed(c.seed), agent, rms)
        )
    if packed:
        resumed = resume_together(ctxs, CHECKPOINT_LAYOUT)  # every seed at one step, or none of them
    else:
        state = ctxs[0].resume()
        resumed = None if state is None else [state]
    if resumed is not None:
        for s, st in zip(seeds, resumed):
            s.agent.load_state_dict(st["agent"])
    learner: OneAgent | StackedAgents = (StackedAgents if packed else OneAgent)(
        [s.agent for s in seeds], cfg, device
    )
    if resumed is not None:
        learner.load_optimizer(resumed)
        for s, st in zip(seeds, resumed):
            s.rng = st["rng"]
            s.perm_gen.set_state(st["perm_gen"])
    obs_rms = StackedRMS(len(ctxs), (obs_dim,)) if cfg.normalize_obs else None
    ret_rms = StackedRMS(len(ctxs)) if cfg.normalize_reward else None

    def sync(seed: Seed) -> None:
        k = seeds.index(seed)
        learner.sync(k, seed.agent)
        if obs_rms is not None and seed.obs_rms is not None:
            obs_rms.copy_into(k, seed.obs_rms)

    # away from the CPU a seed evaluates through (its slice of) the rollout's NumPy actor: no device trip
    on_host = transfer.host_side(device)
    for s in seeds:
        host = learner.host_actor(lambda s=s: seeds.index(s)) if on_host else None
        s.policy = SeedPolicy(s.agent, cfg, obs_shape, space, s.obs_rms, device, host,
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
    ep_cost = np.full((N, E), np.nan)  # an episode's safety cost (info["cost"]); NaN: the env reports none
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
        if all("ep_cost" in st for st in resumed):  # checkpoints from before costs were logged lack it
            ep_cost[:] = np.stack([st["ep_cost"] for st in resumed])
        for rms, key in ((obs_rms, "obs_rms"), (ret_rms, "ret_rms")):
            if rms is not None:
                rms.mean = np.stack([st[key][0] for st in resumed])
                rms.var = np.stack([st[key][1] for st in resumed])
                rms.count = resumed[0][key][2]
    next_obs = norm_obs(raw_obs)
    T = cfg.num_steps

    def drop(failed: list[int]) -> None:
        """Remove failed seeds (indices into the stacks) from every stack, the optimiser and the envs."""
        nonlocal N, next_obs, raw_obs, ep_ret, ep_len, ep_cost, disc_ret, seeds
        keep = np.array([k for k in range(N) if k not in failed], np.int64)
        assert isinstance(learner, StackedAgents)
        learner.drop(keep)
        envs.keep(keep)
        for rms in (obs_rms, ret_rms):
            if rms is not None:
                rms.keep(keep)
        next_obs, raw_obs = next_obs[keep], raw_obs[keep]
        ep_ret, ep_len, ep_cost, disc_ret = ep_ret[keep], ep_len[keep], ep_cost[keep], disc_ret[keep]
        seeds = [seeds[k] for k in keep]
        N = len(seeds)

    if resumed is None:
        for s in seeds:
            s.ctx.maybe_evaluate(0, s.policy)
    outcome: dict[int, str | None] = {c.seed: None for c in ctxs}
    while global_step < total and seeds:
        steps_now = min(T, -(-(total - global_step) // E))
        if cfg.anneal_lr:
            learner.update.set_lr(cfg.learning_rate * (1.0 - global_step / total))
        lr_now = learner.update.lr

        # -- rollout: all seeds x envs in lock step ------------------------------------------------------
        obs_buf = np.zeros((steps_now, N, E, obs_dim), np.float32)
        act_buf = (
            np.zeros((steps_now, N, E, n_act), np.float32)
            if continuous
            else np.zeros((steps_now, N, E), np.int64)
        )
        rew_buf = np.zeros((steps_now, N, E), np.float32)
        done_buf = np.zeros((steps_now, N, E), np.float32)
        # each seed's random numbers for this rollout, from its own stream (the same as a draw a step)
        if continuous:
            noise = np.stack([s.rng.standard_normal((steps_now, E, n_act), dtype=np.float32) for s in seeds])
        else:
            noise = np.stack([s.rng.random((steps_now, E)) for s in seeds])
        trunc_at: list[tuple[int, int, int]] = []  # (t, seed slot, env) of truncations to bootstrap
        trunc_obs: list[np.ndarray] = []
        std = learner.std if continuous else None
        for t in range(steps_now):
            obs_buf[t] = next_obs
            out = learner.act(next_obs)  # (N, E, n_act)
            if continuous:
                sample = out + std * noise[:, t]
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
            if res.cost is not None:
                costly = ~np.isnan(res.cost)
                ep_cost[costly] = np.nan_to_num(ep_cost[costly]) + res.cost[costly]
            done = res.terminated | res.truncated
            done_buf[t] = done
            if done.any():
                for k, i in zip(*np.nonzero(done)):
                    cost = None if np.isnan(ep_cost[k, i]) else float(ep_cost[k, i])
                    seeds[k].ctx.log_episode(global_step, float(ep_ret[k, i]), int(ep_len[k, i]), cost)
                    if cfg.bootstrap_truncated and res.truncated[k, i] and not res.terminated[k, i]:
                        trunc_at.append((t, int(k), int(i)))
                        trunc_obs.append(res.final_obs[k, i])
                ep_ret[done] = 0.0
                ep_len[done] = 0
                ep_cost[done] = np.nan
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

        # -- values, GAE (per seed), the update -----------------------------------------------------------
        n = steps_now * E
        per_seed_trunc: list[list[int]] = [[] for _ in range(N)]
        for j, (_, k, _) in enumerate(trunc_at):
            per_seed_trunc[k].append(j)
        width = max((len(js) for js in per_seed_trunc), default=0)
        extra = np.zeros((N, E + width, obs_dim), np.float32)  # the next observations, truncations' last
        extra[:, :E] = next_obs
        if trunc_obs:
            raw_trunc = np.zeros((N, width, obs_dim), np.float32)
            for k, js in enumerate(per_seed_trunc):
                for c, j in enumerate(js):
                    raw_trunc[k, c] = trunc_obs[j]
            extra[:, E:] = norm_obs(raw_trunc)
        v_all = learner.values(
            obs_buf.transpose(1, 0, 2, 3).reshape(N, n, obs_dim),
            np.ascontiguousarray(act_buf.swapaxes(0, 1)).reshape(N, n, *act_buf.shape[3:]),
            extra,
        )  # fmt: skip
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
        stats = learner.learn(
            *(by_seed(a) for a in (advantages, returns, values)), [s.perm_gen for s in seeds]
        )
        for s in seeds:
            assert s.policy is not None
            s.policy.stale = True

        # -- per-seed metrics, failures, evaluation --------------------------------------------------------
        logged = stats[:, : len(TRAIN_METRICS)].tolist()
        bad = stats[:, len(TRAIN_METRICS) :] > 0.5
        failed: list[int] = []
        for k, s in enumerate(seeds):
            ret_k, val_k = np.ascontiguousarray(returns[:, k]), np.ascontiguousarray(values[:, k])
            var_y = float(np.var(ret_k))
            explained_var = float("nan") if var_y == 0 else 1.0 - float(np.var(ret_k - val_k)) / var_y
            row = dict(zip(TRAIN_METRICS, logged[k]))
            row.update({"train/learning_rate": lr_now, "train/explained_variance": explained_var})
            s.ctx.sink.log(global_step, **row)
            s.ctx.log_system(global_step)
            if bad[k].any():
                which = ("policy", "value", "entropy")[int(np.argmax(bad[k]))]
                s.failure = f"diverged: NaN in {which} loss at step {global_step}"
                outcome[s.ctx.seed] = s.failure
                failed.append(k)
                continue
            s.ctx.maybe_evaluate(global_step, s.policy)
        if failed:
            drop(failed)
        due = [s.ctx.checkpoint_due(global_step) for s in seeds]  # the same schedule: all or none
        if any(due) and seeds:
            # at an iteration boundary everything the next iteration reads is here: each seed's slice of it
            # (the envs pickled whole, their state and RNGs; the rollout buffers are rewritten before use)
            states = []
            for k, s in enumerate(seeds):
                sync(s)
                states.append({
                    "global_step": global_step, "agent": s.agent.state_dict(), **learner.optimizer_state(k),
                    "rng": s.rng, "perm_gen": s.perm_gen.get_state(), "envs": envs.seed_state(k),
                    "raw_obs": raw_obs[k].copy(), "ep_ret": ep_ret[k].copy(), "ep_len": ep_len[k].copy(),
                    "disc_ret": disc_ret[k].copy(), "ep_cost": ep_cost[k].copy(),
                    "obs_rms": None if obs_rms is None else obs_rms.seed_stats(k),
                    "ret_rms": None if ret_rms is None else ret_rms.seed_stats(k),
                })  # fmt: skip
            if not packed:
                seeds[0].ctx.save_checkpoint(global_step, states[0])
            else:
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
