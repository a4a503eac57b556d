"""ppo_jax's compiled program: PPO over one seed's gymnax envs as pure JAX functions, vmapped over the seeds
of a job and jit-compiled once per (pack size, chunk length).

``build(...)`` returns a ``Program``: ``init(seeds, learning_rates)`` -> the training state of every seed,
and ``chunk(state, n, eval_keys)`` -> (state after ``n`` more iterations, one row of ``ROW`` per iteration
(``max_iters`` rows; the first ``n`` are this chunk's), each seed's evaluation episode returns and lengths
after them). ``n`` is traced (a ``fori_loop`` bound), so chunks of every length share one compilation; one
call is one evaluation interval, and metrics leave the program only there.

Per seed everything is CleanRL's ppo.py as torch ``ppo`` runs it: ``num_envs`` envs stepped in lock step
for ``num_steps`` steps, reset on the step their episode ends, a truncation (the state's ``time`` reaching
``max_steps_in_episode``) bootstrapped with ``gamma * V(final obs)``, GAE, ``update_epochs`` epochs of
``num_minibatches`` shuffled minibatches, the clipped surrogate, the clipped value loss, the entropy bonus,
the global gradient-norm clip and Adam (eps 1e-5) at a learning rate annealed with the step count;
separate actor and critic MLPs (orthogonal init, gains sqrt 2, actor head 0.01, critic head 1), a
categorical or a state-independent-log-std Gaussian policy (actions clipped to the bounds when stepping),
and optionally running observation normalisation and reward scaling. Every random number of a seed comes
from ``PRNGKey(seed)``; evaluation episode ``i`` of seed ``s`` from ``PRNGKey(eval_seeds(s)[i])``, acting
deterministically (argmax, the Gaussian's mean).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .config import PPOJaxConfig

__all__ = ["ROW", "Program", "build"]

# one row per iteration: losses as torch ppo logs them (means over the iteration's minibatches), the
# learning rate, the explained variance, and the training episodes that ended in it (count, sums)
ROW = ("train/loss/policy", "train/loss/value", "train/entropy", "train/approx_kl", "train/clipfrac",
       "train/learning_rate", "train/explained_variance", "episodes", "return_sum", "length_sum")  # fmt: skip
LOG2PI = math.log(2 * math.pi)


class Program(NamedTuple):
    init: Callable[..., Any]
    chunk: Callable[..., Any]
    continuous: bool
    obs_dim: int


def build(cfg: PPOJaxConfig, env: Any, env_params: Any, total_steps: int, max_iters: int) -> Program:
    """The program for ``env`` and ``cfg`` over a budget of ``total_steps`` env steps per seed, whose chunks
    run at most ``max_iters`` iterations."""
    from gymnax.environments import spaces  # heavy (jax): the caller imported jax already

    space = env.action_space(env_params)
    continuous = isinstance(space, spaces.Box)
    n_act = int(np.prod(space.shape)) if continuous else int(space.n)
    low = jnp.asarray(space.low, jnp.float32) if continuous else None
    high = jnp.asarray(space.high, jnp.float32) if continuous else None
    obs_dim = int(np.prod(env.observation_space(env_params).shape))
    E, T, B = cfg.num_envs, cfg.num_steps, cfg.batch_size
    M = cfg.num_minibatches
    act_fn = jnp.tanh if cfg.activation == "tanh" else jax.nn.relu
    max_eval_steps = int(env_params.max_steps_in_episode)
    tx = optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm), optax.scale_by_adam(eps=1e-5))

    # -- networks --------------------------------------------------------------------------------------
    def mlp_init(key: Any, out: int, head_gain: float) -> list[tuple[Any, Any]]:
        dims = [obs_dim, *cfg.hidden_sizes, out]
        keys = jax.random.split(key, len(dims) - 1)
        layers = []
        for j, (k, a, b) in enumerate(zip(keys, dims[:-1], dims[1:])):
            gain = head_gain if j == len(dims) - 2 else math.sqrt(2)
            layers.append((jax.nn.initializers.orthogonal(gain)(k, (a, b), jnp.float32), jnp.zeros(b)))
        return layers

    def mlp(layers: list[tuple[Any, Any]], x: Any) -> Any:
        for W, b in layers[:-1]:
            x = act_fn(x @ W + b)
        W, b = layers[-1]
        return x @ W + b

    def init_params(key: Any) -> dict[str, Any]:
        ka, kc = jax.random.split(key)
        p = {"actor": mlp_init(ka, n_act, 0.01), "critic": mlp_init(kc, 1, 1.0)}
        if continuous:
            p["log_std"] = jnp.full((n_act,), cfg.init_log_std, jnp.float32)
        return p

    def value(p: dict[str, Any], obs: Any) -> Any:
        return mlp(p["critic"], obs)[..., 0]

    def log_prob_entropy(p: dict[str, Any], obs: Any, a: Any) -> tuple[Any, Any]:
        out = mlp(p["actor"], obs)
        if continuous:
            log_std = jnp.broadcast_to(p["log_std"], out.shape)
            lp = -0.5 * ((a - out) / jnp.exp(log_std)) ** 2 - log_std - 0.5 * LOG2PI
            return lp.sum(-1), (0.5 + 0.5 * LOG2PI + log_std).sum(-1)
        logp = jax.nn.log_softmax(out)
        lp = jnp.take_along_axis(logp, a[..., None], -1)[..., 0]
        return lp, -(jnp.exp(logp) * logp).sum(-1)

    def deterministic(p: dict[str, Any], obs: Any) -> Any:
        out = mlp(p["actor"], obs)
        return jnp.clip(out, low, high) if continuous else jnp.argmax(out, -1)

    # -- running statistics (torch ppo's RunningMeanStd: mean 0, var 1, count 1e-4) -------------------------
    def rms_init(shape: tuple[int, ...]) -> tuple[Any, Any, Any]:
        return jnp.zeros(shape), jnp.ones(shape), jnp.float32(1e-4)

    def rms_update(rms: tuple[Any, Any, Any], x: Any) -> tuple[Any, Any, Any]:
        mean, var, count = rms
        b_mean, b_var, n = x.mean(0), x.var(0), x.shape[0]
        delta, tot = b_mean - mean, count + n
        m2 = var * count + b_var * n + delta**2 * count * n / tot
        return mean + delta * n / tot, m2 / tot, tot

    def norm_obs(st: dict[str, Any], raw: Any) -> Any:
        if not cfg.normalize_obs:
            return raw
        mean, var, _ = st["obs_rms"]
        return jnp.clip((raw - mean) / jnp.sqrt(var + 1e-8), -cfg.clip_obs, cfg.clip_obs)

    # -- envs ----------------------------------------------------------------------------------------
    def flat(obs: Any) -> Any:
        return obs.reshape(obs.shape[0], obs_dim).astype(jnp.float32)

    def reset(keys: Any) -> tuple[Any, Any]:
        obs, state = jax.vmap(env.reset_env, (0, None))(keys, env_params)
        return flat(obs), state

    def env_step(key: Any, state: Any, action: Any) -> tuple[Any, ...]:
        """gymnax's step (step_env, then reset where done) keeping the final observation and the truncation."""
        keys = jax.random.split(key, (E, 2))
        obs_st, state_st, reward, done, _ = jax.vmap(env.step_env, (0, 0, 0, None))(
            keys[:, 0], state, action, env_params
        )
        obs_re, state_re = reset(keys[:, 1])
        obs_st, done = flat(obs_st), done.astype(bool)
        trunc = done & (state_st.time >= env_params.max_steps_in_episode)

        def pick(a: Any, b: Any) -> Any:
            return jnp.where(done.reshape(done.shape + (1,) * (a.ndim - 1)), a, b)

        return (jnp.where(done[:, None], obs_re, obs_st), jax.tree_util.tree_map(pick, state_re, state_st),
                reward.astype(jnp.float32), done, trunc, obs_st)  # fmt: skip

    # -- one seed's training state ------------------------------------------------------------------------
    def init(seed: Any, lr: Any) -> dict[str, Any]:
        key = jax.random.PRNGKey(seed)
        key, k_net, k_env = jax.random.split(key, 3)
        params = init_params(k_net)
        obs, env_state = reset(jax.random.split(k_env, E))
        st = {"params": params, "opt": tx.init(params), "env": env_state, "obs": obs, "key": key,
              "ep_ret": jnp.zeros(E), "ep_len": jnp.zeros(E, jnp.int32), "it": jnp.int32(0),
              "lr": jnp.float32(lr), "disc_ret": jnp.zeros(E)}  # fmt: skip
        if cfg.normalize_obs:
            st["obs_rms"] = rms_update(rms_init((obs_dim,)), obs)
        if cfg.normalize_reward:
            st["ret_rms"] = rms_init(())
        return st

    def rollout_step(st: dict[str, Any], _: Any) -> tuple[dict[str, Any], tuple[Any, ...]]:
        p = st["params"]
        key, k_act, k_env = jax.random.split(st["key"], 3)
        obs = norm_obs(st, st["obs"])
        out = mlp(p["actor"], obs)
        if continuous:
            a = out + jnp.exp(p["log_std"]) * jax.random.normal(k_act, out.shape)
            env_a = jnp.clip(a, low, high)
        else:
            a = env_a = jax.random.categorical(k_act, out)
        logp, _ = log_prob_entropy(p, obs, a)
        v = value(p, obs)
        next_raw, env_state, r, done, trunc, final_raw = env_step(k_env, st["env"], env_a)
        st = dict(st, key=key, env=env_state, obs=next_raw)
        ep_ret, ep_len = st["ep_ret"] + r, st["ep_len"] + 1
        ended = (jnp.where(done, ep_ret, 0.0).sum(), jnp.where(done, ep_len, 0).sum(), done.sum())
        st["ep_ret"], st["ep_len"] = jnp.where(done, 0.0, ep_ret), jnp.where(done, 0, ep_len)
        r_train = r
        if cfg.normalize_reward:
            disc = st["disc_ret"] * cfg.gamma + r
            st["ret_rms"] = rms_update(st["ret_rms"], disc)
            r_train = jnp.clip(r / jnp.sqrt(st["ret_rms"][1] + 1e-8), -cfg.clip_reward, cfg.clip_reward)
            st["disc_ret"] = jnp.where(done, 0.0, disc)
        if cfg.normalize_obs:
            st["obs_rms"] = rms_update(st["obs_rms"], next_raw)
        if cfg.bootstrap_truncated:
            r_train = r_train + cfg.gamma * value(p, norm_obs(st, final_raw)) * trunc
        return st, (obs, a, logp, v, r_train, done, ended)

    def loss_fn(p: dict[str, Any], mb: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...]]:
        obs, a, old_logp, old_v, adv, ret = mb
        logp, ent = log_prob_entropy(p, obs, a)
        logratio = logp - old_logp
        ratio = jnp.exp(logratio)
        approx_kl = ((ratio - 1) - logratio).mean()
        clipfrac = (jnp.abs(ratio - 1.0) > cfg.clip_coef).mean()
        if cfg.norm_adv:
            adv = (adv - adv.mean()) / (adv.std(ddof=1) + 1e-8)
        pg = jnp.maximum(-adv * ratio, -adv * jnp.clip(ratio, 1 - cfg.clip_coef, 1 + cfg.clip_coef)).mean()
        v = value(p, obs)
        if cfg.clip_vloss:
            v_clipped = old_v + jnp.clip(v - old_v, -cfg.clip_coef, cfg.clip_coef)
            v_loss = 0.5 * jnp.maximum((v - ret) ** 2, (v_clipped - ret) ** 2).mean()
        else:
            v_loss = 0.5 * ((v - ret) ** 2).mean()
        entropy = ent.mean()
        loss = pg - cfg.ent_coef * entropy + cfg.vf_coef * v_loss
        return loss, (pg, v_loss, entropy, approx_kl, clipfrac)

    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

    def iteration(st: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        lr = st["lr"]
        if cfg.anneal_lr:
            lr = lr * jnp.maximum(1.0 - st["it"] * B / total_steps, 0.0)
        st, (obs, a, logp, v, r, done, ended) = jax.lax.scan(rollout_step, st, None, T)
        last_v = value(st["params"], norm_obs(st, st["obs"]))

        def gae(carry: tuple[Any, Any], x: tuple[Any, ...]) -> tuple[tuple[Any, Any], Any]:
            last, next_v = carry
            r_t, v_t, d_t = x
            nd = 1.0 - d_t
            delta = r_t + cfg.gamma * next_v * nd - v_t
            last = delta + cfg.gamma * cfg.gae_lambda * nd * last
            return (last, v_t), last

        _, adv = jax.lax.scan(gae, (jnp.zeros(E), last_v), (r, v, done), reverse=True)
        ret = adv + v
        batch = tuple(x.reshape(B, *x.shape[2:]) for x in (obs, a, logp, v, adv, ret))

        def epoch(carry: tuple[Any, Any, Any], _: Any) -> tuple[tuple[Any, Any, Any], Any]:
            p, opt, key = carry
            key, k = jax.random.split(key)
            perm = jax.random.permutation(k, B)
            mbs = tuple(x[perm].reshape(M, B // M, *x.shape[1:]) for x in batch)

            def minibatch(c: tuple[Any, Any], mb: tuple[Any, ...]) -> tuple[tuple[Any, Any], Any]:
                p, opt = c
                (_, stats), grads = grad_fn(p, mb)
                updates, opt = tx.update(grads, opt)
                p = jax.tree_util.tree_map(lambda w, u: w - lr * u, p, updates)
                return (p, opt), jnp.stack(stats)

            (p, opt), stats = jax.lax.scan(minibatch, (p, opt), mbs)
            return (p, opt, key), stats

        (p, opt, key), stats = jax.lax.scan(epoch, (st["params"], st["opt"], st["key"]), None,
                                            cfg.update_epochs)  # fmt: skip
        st = dict(st, params=p, opt=opt, key=key, it=st["it"] + 1)
        var_y = ret.var()
        explained = jnp.where(var_y == 0, jnp.nan, 1.0 - (ret - v).var() / var_y)
        ret_sum, len_sum, count = (x.sum() for x in ended)
        row = jnp.concatenate([stats.reshape(-1, 5).mean(0),
                               jnp.stack([lr, explained, count, ret_sum, len_sum]).astype(jnp.float32)])  # fmt: skip
        return st, row

    def evaluate(st: dict[str, Any], keys: Any) -> tuple[Any, Any]:
        """One deterministic episode per key, in lock step until every episode ended: (returns, lengths)."""
        n = keys.shape[0]
        ks = jax.vmap(jax.random.split)(keys)
        obs, state = jax.vmap(env.reset_env, (0, None))(ks[:, 0], env_params)
        obs = flat(obs)
        p = st["params"]

        def cond(c: tuple[Any, ...]) -> Any:
            return c[4].any() & (c[5] <= max_eval_steps)

        def body(c: tuple[Any, ...]) -> tuple[Any, ...]:
            state, obs, ret, length, alive, t = c
            a = deterministic(p, norm_obs(st, obs))
            step_keys = jax.vmap(jax.random.fold_in, (0, None))(ks[:, 1], t)
            obs2, state2, r, done, _ = jax.vmap(env.step_env, (0, 0, 0, None))(
                step_keys, state, a, env_params
            )
            ret = ret + jnp.where(alive, r, 0.0)
            length = length + alive
            return state2, flat(obs2), ret, length, alive & ~done.astype(bool), t + 1

        c = (state, obs, jnp.zeros(n), jnp.zeros(n, jnp.int32), jnp.ones(n, bool), jnp.int32(0))
        _, _, ret, length, _, _ = jax.lax.while_loop(cond, body, c)
        return ret, length

    def chunk(st: dict[str, Any], n: Any, eval_keys: Any) -> tuple[Any, ...]:
        rows = jnp.zeros((max_iters, len(ROW)), jnp.float32)

        def body(i: Any, c: tuple[Any, Any]) -> tuple[Any, Any]:
            st, rows = c
            st, row = iteration(st)
            return st, rows.at[i].set(row)

        st, rows = jax.lax.fori_loop(0, n, body, (st, rows))
        ret, length = evaluate(st, eval_keys)
        return st, rows, ret, length

    return Program(
        init=jax.jit(jax.vmap(init)),
        chunk=jax.jit(jax.vmap(chunk, in_axes=(0, None, 0)), donate_argnums=0),
        continuous=continuous,
        obs_dim=obs_dim,
    )
