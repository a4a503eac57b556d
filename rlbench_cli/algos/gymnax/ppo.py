"""ppo_jax's compiled program: PPO over one seed's gymnax envs as pure JAX functions, vmapped over the seeds
of a job and jit-compiled once per (pack size, chunk length).

``build(...)`` returns a ``common.Program``: ``init(seeds, learning_rates)`` -> the training state of every
seed, and ``chunk(state, n, eval_keys)`` -> (state after ``n`` more iterations, one row per iteration
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
from typing import Any

import jax
import jax.numpy as jnp
import optax

from .common import Envs, Program, epochs, mlp, mlp_init, program, rms_init, rms_update
from .ppo_config import PPOJaxConfig

__all__ = ["ROW", "build"]

# a row's metrics: losses as torch ppo logs them (means over the iteration's minibatches), the learning rate,
# the explained variance (then common.EPISODE_COLUMNS)
ROW = ("train/loss/policy", "train/loss/value", "train/entropy", "train/approx_kl", "train/clipfrac",
       "train/learning_rate", "train/explained_variance")  # fmt: skip
LOG2PI = math.log(2 * math.pi)


def build(cfg: PPOJaxConfig, env: Any, env_params: Any, total_steps: int, max_iters: int) -> Program:
    """The program for ``env`` and ``cfg`` over a budget of ``total_steps`` env steps per seed, whose chunks
    run at most ``max_iters`` iterations."""
    envs = Envs(env, env_params, cfg.num_envs)
    continuous, n_act, low, high, obs_dim = envs.continuous, envs.n_act, envs.low, envs.high, envs.obs_dim
    E, T, B = cfg.num_envs, cfg.num_steps, cfg.batch_size
    M = cfg.num_minibatches
    act_fn = jnp.tanh if cfg.activation == "tanh" else jax.nn.relu
    tx = optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm), optax.scale_by_adam(eps=1e-5))
    dims = [obs_dim, *cfg.hidden_sizes]

    # -- networks --------------------------------------------------------------------------------------
    def init_params(key: Any) -> dict[str, Any]:
        ka, kc = jax.random.split(key)
        p = {"actor": mlp_init(ka, [*dims, n_act], 0.01), "critic": mlp_init(kc, [*dims, 1], 1.0)}
        if continuous:
            p["log_std"] = jnp.full((n_act,), cfg.init_log_std, jnp.float32)
        return p

    def value(p: dict[str, Any], obs: Any) -> Any:
        return mlp(p["critic"], obs, act_fn)[..., 0]

    def log_prob_entropy(p: dict[str, Any], obs: Any, a: Any) -> tuple[Any, Any]:
        out = mlp(p["actor"], obs, act_fn)
        if continuous:
            log_std = jnp.broadcast_to(p["log_std"], out.shape)
            lp = -0.5 * ((a - out) / jnp.exp(log_std)) ** 2 - log_std - 0.5 * LOG2PI
            return lp.sum(-1), (0.5 + 0.5 * LOG2PI + log_std).sum(-1)
        logp = jax.nn.log_softmax(out)
        lp = jnp.take_along_axis(logp, a[..., None], -1)[..., 0]
        return lp, -(jnp.exp(logp) * logp).sum(-1)

    def norm_obs(st: dict[str, Any], raw: Any) -> Any:
        if not cfg.normalize_obs:
            return raw
        mean, var, _ = st["obs_rms"]
        return jnp.clip((raw - mean) / jnp.sqrt(var + 1e-8), -cfg.clip_obs, cfg.clip_obs)

    # -- one seed's training state ------------------------------------------------------------------------
    def init(seed: Any, lr: Any) -> dict[str, Any]:
        key = jax.random.PRNGKey(seed)
        key, k_net, k_env = jax.random.split(key, 3)
        params = init_params(k_net)
        obs, env_state = envs.reset(jax.random.split(k_env, E))
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
        out = mlp(p["actor"], obs, act_fn)
        if continuous:
            a = out + jnp.exp(p["log_std"]) * jax.random.normal(k_act, out.shape)
            env_a = jnp.clip(a, low, high)
        else:
            a = env_a = jax.random.categorical(k_act, out)
        logp, _ = log_prob_entropy(p, obs, a)
        v = value(p, obs)
        next_raw, env_state, r, done, trunc, final_raw = envs.step(k_env, st["env"], env_a)
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

        st, stats = epochs(st, batch, loss_fn, tx, lr, cfg.update_epochs, M)
        st["it"] = st["it"] + 1
        var_y = ret.var()
        explained = jnp.where(var_y == 0, jnp.nan, 1.0 - (ret - v).var() / var_y)
        ret_sum, len_sum, count = (x.sum() for x in ended)
        row = jnp.concatenate([stats.reshape(-1, 5).mean(0),
                               jnp.stack([lr, explained, count, ret_sum, len_sum]).astype(jnp.float32)])  # fmt: skip
        return st, row

    def evaluate(st: dict[str, Any], keys: Any) -> tuple[Any, Any]:
        def act(obs: Any) -> Any:  # deterministic: the Gaussian's mean (clipped), the most likely action
            out = mlp(st["params"]["actor"], norm_obs(st, obs), act_fn)
            return jnp.clip(out, low, high) if continuous else jnp.argmax(out, -1)

        return envs.evaluate(act, keys)

    def policy(st: dict[str, Any]) -> dict[str, Any]:  # what evaluate reads: the actor, the obs statistics
        kept = {"params": {"actor": st["params"]["actor"]}}
        if cfg.normalize_obs:
            kept["obs_rms"] = st["obs_rms"]
        return kept

    return program(init, iteration, evaluate, max_iters, ROW, ROW[:3], policy)
