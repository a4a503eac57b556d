"""Worked example: your own training code trains several seeds at once, each recorded as its own run.

A suite names the function as an ``entrypoint:``; ``@rlbench_cli.seeds_per_job`` tells rlbench that it takes
a LIST of run contexts, one per seed. With ``resources.seeds_per_job: N`` rlbench calls it with up to N
seeds of one (algorithm, env, params) cell per job (see examples/packed-entrypoint.yaml):

    rlbench run examples/packed-entrypoint.yaml --dry-run   # "seeds share jobs: reinforce-packed"
    rlbench run examples/packed-entrypoint.yaml             # from the repository root

The algorithm is REINFORCE with a baseline (the rollout's mean return) on a small tanh MLP, for discrete
action spaces. The N policies are ONE stacked network: every layer holds N weight matrices, so a single
batched matmul (``torch.baddbmm``) computes the actions of every seed, and one Adam updates them all. The
loss is the SUM of the per-seed losses, so each seed's gradient is its own and Adam (elementwise) is N
independent Adams. Every random number of seed ``s`` comes from generators seeded with ``s`` alone (its
initial weights, its action samples, its env), so a seed trains the same whichever seeds share its job.

What rlbench gives each seed, through its own context ``ctx``: ``ctx.seed``, ``ctx.params``, ``ctx.steps``,
``ctx.make_env()``, ``ctx.log_episode`` / ``ctx.sink.log`` (its own metric shards and run folder),
``ctx.maybe_evaluate(step, policy)`` / ``ctx.finish(step, policy)`` (the shared seeded evaluation, scored
as every algorithm's) and ``ctx.fail(reason)``: a seed whose loss stops being finite is marked failed with
the reason and dropped from training; the other seeds go on and finish. rlbench records each seed as its
own run (status, error, metrics, score).

Params (all optional): ``lr`` (default 0.01), ``hidden`` (16), ``rollout`` (env steps per seed per
update, 256), ``gamma`` (0.99).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import rlbench_cli


@rlbench_cli.seeds_per_job
def train(ctxs: list[Any]) -> None:
    import torch

    p = ctxs[0].params  # every context of a job has the same params, env and budget; only the seed differs
    lr, hidden = float(p.get("lr", 0.01)), int(p.get("hidden", 16))
    rollout, gamma = int(p.get("rollout", 256)), float(p.get("gamma", 0.99))
    n, steps = len(ctxs), ctxs[0].steps

    envs = [ctx.make_env() for ctx in ctxs]
    obs_dim = int(np.prod(envs[0].observation_space.shape))
    n_act = int(envs[0].action_space.n)

    # -- one network per seed, stacked: seed k's weights are drawn from a generator seeded with its seed
    gens = [torch.Generator().manual_seed(ctx.seed) for ctx in ctxs]
    w1 = torch.stack([torch.randn(obs_dim, hidden, generator=g) / obs_dim**0.5 for g in gens])
    w2 = torch.stack([torch.randn(hidden, n_act, generator=g) * 0.01 for g in gens])
    params = [w1, torch.zeros(n, 1, hidden), w2, torch.zeros(n, 1, n_act)]
    for t in params:
        t.requires_grad_()
    opt = torch.optim.Adam(params, lr=lr)

    def logits(x: torch.Tensor, rows: slice | list[int] = slice(None)) -> torch.Tensor:
        """x (seeds, batch, obs_dim) -> (seeds, batch, n_act), each seed through its own weights."""
        a, b, c, d = (t[rows] for t in params)
        return torch.baddbmm(d, torch.tanh(torch.baddbmm(b, x, a)), c)

    def policy_of(k: int):
        """Seed k's deterministic policy (argmax), as evaluation wants it: a batch of obs -> actions."""

        def act(obs: np.ndarray) -> np.ndarray:
            x = torch.as_tensor(np.asarray(obs, np.float32).reshape(1, len(obs), obs_dim))
            with torch.no_grad():
                return logits(x, [k])[0].argmax(-1).numpy()

        return act

    policies = [policy_of(k) for k in range(n)]
    obs = np.stack(
        [np.asarray(env.reset(seed=ctx.seed)[0], np.float32).reshape(-1) for env, ctx in zip(envs, ctxs)]
    )
    ep_ret, ep_len = np.zeros(n), np.zeros(n, np.int64)
    live = list(range(n))  # seeds still training (a failed one is dropped)
    for k in live:
        ctxs[k].maybe_evaluate(0, policies[k])

    step = 0
    while step < steps and live:
        T = min(rollout, steps - step)
        obs_buf = np.zeros((T, n, obs_dim), np.float32)
        act_buf = np.zeros((T, n), np.int64)
        rew_buf = np.zeros((T, n), np.float32)
        done_buf = np.zeros((T, n), np.float32)
        for t in range(T):
            obs_buf[t] = obs
            with torch.no_grad():
                probs = torch.softmax(logits(torch.from_numpy(obs[:, None, :])), -1)[:, 0]
            step += 1
            for k in live:
                a = int(torch.multinomial(probs[k], 1, generator=gens[k]))
                o, r, term, trunc, _ = envs[k].step(a)
                act_buf[t, k], rew_buf[t, k] = a, r
                ep_ret[k] += r
                ep_len[k] += 1
                if term or trunc:
                    done_buf[t, k] = 1.0
                    ctxs[k].log_episode(step, float(ep_ret[k]), int(ep_len[k]))
                    ep_ret[k], ep_len[k] = 0.0, 0
                    o, _ = envs[k].reset()
                obs[k] = np.asarray(o, np.float32).reshape(-1)

        # discounted returns to go within each episode, then a baseline per seed
        ret = np.zeros((T, n), np.float32)
        running = np.zeros(n, np.float32)
        for t in reversed(range(T)):
            running = rew_buf[t] + gamma * running * (1.0 - done_buf[t])
            ret[t] = running
        adv = ret - ret.mean(0)
        adv = adv / (ret.std(0) + 1e-8)

        x = torch.from_numpy(obs_buf.transpose(1, 0, 2).copy())  # (seeds, T, obs_dim)
        logp = torch.log_softmax(logits(x), -1)
        chosen = logp.gather(-1, torch.from_numpy(act_buf.T.copy())[..., None])[..., 0]  # (seeds, T)
        losses = -(chosen * torch.from_numpy(adv.T.copy())).mean(1)  # one loss per seed
        mask = torch.zeros(n)
        mask[live] = 1.0
        opt.zero_grad()
        (torch.nan_to_num(losses) * mask).sum().backward()  # seed k's gradient is d loss_k / d theta_k
        opt.step()

        for k in list(live):
            loss = float(losses[k])
            if not np.isfinite(loss):  # this seed diverged: it fails alone, the others go on
                ctxs[k].fail(f"diverged: NaN loss at step {step}")
                live.remove(k)
                continue
            ctxs[k].sink.log(step, **{"train/loss/policy": loss})
            ctxs[k].log_system(step)
            ctxs[k].maybe_evaluate(step, policies[k])
        if any(ctxs[k].should_stop() for k in live):
            break
    for k in live:
        ctxs[k].finish(step, policies[k])
    for env in envs:
        env.close()
