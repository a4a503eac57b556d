"""pqn_jax's compiled program: PQN (Parallel Q-Networks: Gallici et al., 2024) over one seed's gymnax envs,
vmapped over the seeds of a job, one chunk per evaluation interval (``common.make_chunk``).

Per seed: ``num_envs`` envs stepped in lock step for ``num_steps`` steps by an epsilon-greedy policy over one
Q-network (an MLP with LayerNorm before each hidden ReLU; no target network, no replay buffer), epsilon
linear from ``eps_start`` to ``eps_finish`` over ``eps_decay`` of the iterations; Q(lambda) targets computed
backwards over the rollout from the Q-values the rollout saw (rewards scaled by ``reward_scale``; a
truncation bootstrapped with ``gamma * max Q(final obs)``); then ``update_epochs`` epochs of
``num_minibatches`` shuffled minibatches of the squared TD error to those targets, the global gradient-norm
clip and RAdam at a learning rate annealed with the step count. Evaluation acts greedily.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax

from .common import Envs, Program, epochs, mlp, mlp_init, program
from .pqn_config import PQNJaxConfig

__all__ = ["ROW", "build"]

ROW = ("train/loss/q", "train/q_mean", "train/epsilon", "train/learning_rate")


def build(cfg: PQNJaxConfig, env: Any, env_params: Any, total_steps: int, max_iters: int) -> Program:
    """The program for ``env`` and ``cfg`` over ``total_steps`` env steps per seed, chunks of at most
    ``max_iters`` iterations."""
    envs = Envs(env, env_params, cfg.num_envs)
    E, T, B, M = cfg.num_envs, cfg.num_steps, cfg.batch_size, cfg.num_minibatches
    tx = optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm), optax.scale_by_radam())
    iterations = -(-total_steps // B)
    decay_iters = max(cfg.eps_decay * iterations, 1e-8)

    def layer_norm(h: Any) -> Any:
        mean = h.mean(-1, keepdims=True)
        return (h - mean) / jnp.sqrt(h.var(-1, keepdims=True) + 1e-6)

    def q_values(p: Any, obs: Any) -> Any:
        return mlp(p, obs, jax.nn.relu, layer_norm if cfg.layer_norm else None)

    def init(seed: Any, lr: Any) -> dict[str, Any]:
        key = jax.random.PRNGKey(seed)
        key, k_net, k_env = jax.random.split(key, 3)
        params = mlp_init(k_net, [envs.obs_dim, *cfg.hidden_sizes, envs.n_act], 1.0)
        obs, env_state = envs.reset(jax.random.split(k_env, E))
        return {"params": params, "opt": tx.init(params), "env": env_state, "obs": obs, "key": key,
                "ep_ret": jnp.zeros(E), "ep_len": jnp.zeros(E, jnp.int32), "it": jnp.int32(0),
                "lr": jnp.float32(lr)}  # fmt: skip

    def epsilon(it: Any) -> Any:
        frac = jnp.minimum(it / decay_iters, 1.0)
        return cfg.eps_start + frac * (cfg.eps_finish - cfg.eps_start)

    def rollout_step(st: dict[str, Any], eps: Any) -> tuple[dict[str, Any], tuple[Any, ...]]:
        key, k_rand, k_pick, k_env = jax.random.split(st["key"], 4)
        q = q_values(st["params"], st["obs"])
        greedy = jnp.argmax(q, -1)
        explore = jax.random.uniform(k_pick, (E,)) < eps
        a = jnp.where(explore, jax.random.randint(k_rand, (E,), 0, envs.n_act), greedy)
        next_obs, env_state, r, done, trunc, final_obs = envs.step(k_env, st["env"], a)
        ep_ret, ep_len = st["ep_ret"] + r, st["ep_len"] + 1
        ended = (jnp.where(done, ep_ret, 0.0).sum(), jnp.where(done, ep_len, 0).sum(), done.sum())
        r_train = cfg.reward_scale * r
        if cfg.bootstrap_truncated:
            r_train = r_train + cfg.gamma * q_values(st["params"], final_obs).max(-1) * trunc
        out = (st["obs"], a, r_train, done, q.max(-1), ended)
        st = dict(st, key=key, env=env_state, obs=next_obs, ep_ret=jnp.where(done, 0.0, ep_ret),
                  ep_len=jnp.where(done, 0, ep_len))  # fmt: skip
        return st, out

    def loss_fn(p: Any, mb: tuple[Any, ...]) -> tuple[Any, Any]:
        obs, a, target = mb
        q = jnp.take_along_axis(q_values(p, obs), a[:, None], -1)[:, 0]
        loss = 0.5 * ((q - target) ** 2).mean()
        return loss, (loss, q.mean())

    def iteration(st: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        lr = st["lr"]
        if cfg.anneal_lr:
            lr = lr * jnp.maximum(1.0 - st["it"] * B / total_steps, 0.0)
        eps = epsilon(st["it"])
        st, (obs, a, r, done, q_max, ended) = jax.lax.scan(lambda c, _: rollout_step(c, eps), st, None, T)
        not_done = 1.0 - done
        last_q = q_values(st["params"], st["obs"]).max(-1)
        # Q(lambda): G_t = r_t + gamma (1 - d_t) ((1 - lambda) max Q(s_t+1) + lambda G_t+1), from the end
        next_max = jnp.concatenate([q_max[1:], last_q[None]])

        def target(g_next: Any, x: tuple[Any, ...]) -> tuple[Any, Any]:
            r_t, nd_t, q_t1 = x
            g = r_t + cfg.gamma * nd_t * ((1 - cfg.q_lambda) * q_t1 + cfg.q_lambda * g_next)
            return g, g

        _, targets = jax.lax.scan(target, last_q, (r, not_done, next_max), reverse=True)
        batch = tuple(x.reshape(B, *x.shape[2:]) for x in (obs, a, targets))

        st, stats = epochs(st, batch, loss_fn, tx, lr, cfg.update_epochs, M)
        st["it"] = st["it"] + 1
        ret_sum, len_sum, count = (x.sum() for x in ended)
        row = jnp.concatenate([stats.reshape(-1, 2).mean(0),
                               jnp.stack([eps, lr, count, ret_sum, len_sum]).astype(jnp.float32)])  # fmt: skip
        return st, row

    def evaluate(st: dict[str, Any], keys: Any) -> tuple[Any, Any]:
        return envs.evaluate(lambda obs: jnp.argmax(q_values(st["params"], obs), -1), keys)

    return program(init, iteration, evaluate, max_iters, ROW, ROW[:1], lambda st: {"params": st["params"]})
