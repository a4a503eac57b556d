"""What every algorithm's compiled program on gymnax tasks shares (``ppo.py``, ``pqn.py``): the envs of one
seed stepped in lock step with same-step reset, the seeded evaluation episodes, MLPs, running statistics and
the chunk (``n`` iterations then an evaluation, one jitted call per evaluation interval). Imports JAX."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["EPISODE_COLUMNS", "Envs", "Program", "epochs", "make_chunk", "program", "mlp", "mlp_init", "orthogonal",
           "rms_init", "rms_update"]  # fmt: skip

# the last columns of every iteration's row: the training episodes that ended in it (count, sums)
EPISODE_COLUMNS = ("episodes", "return_sum", "length_sum")


class Program(NamedTuple):
    """An algorithm's program: ``init(seeds, learning_rates)`` -> every seed's state; ``chunk(state, n,
    eval_keys)`` -> (state, rows (max_iters x (len(row) + 3)), eval returns, eval lengths), vmapped over
    seeds; ``row``: the metric names of a row's first columns, ``losses``: those whose non-finite value
    fails a seed; ``policy(state)``: the part of a state the policy acts with (a seed's or the pack's: what
    a kept policy saves), and ``evaluate(policy, eval_keys)`` the chunk's evaluation episodes of it, vmapped
    over seeds (``policy.GymnaxPolicy.play`` replays a kept policy with it)."""

    init: Callable[..., Any]
    chunk: Callable[..., Any]
    row: tuple[str, ...]
    losses: tuple[str, ...]
    policy: Callable[[Any], Any]
    evaluate: Callable[..., Any]


class Envs:
    """``num_envs`` copies of one gymnax env for one seed, flat float observations."""

    def __init__(self, env: Any, env_params: Any, num_envs: int):
        from gymnax.environments import spaces  # heavy (jax): the caller imported jax already

        self.env, self.params, self.n = env, env_params, num_envs
        space = env.action_space(env_params)
        self.continuous = isinstance(space, spaces.Box)
        self.n_act = int(np.prod(space.shape)) if self.continuous else int(space.n)
        self.low = jnp.asarray(space.low, jnp.float32) if self.continuous else None
        self.high = jnp.asarray(space.high, jnp.float32) if self.continuous else None
        self.obs_dim = int(np.prod(env.observation_space(env_params).shape))
        self.max_steps = int(env_params.max_steps_in_episode)

    def flat(self, obs: Any) -> Any:
        return obs.reshape(obs.shape[0], self.obs_dim).astype(jnp.float32)

    def reset(self, keys: Any) -> tuple[Any, Any]:
        obs, state = jax.vmap(self.env.reset_env, (0, None))(keys, self.params)
        return self.flat(obs), state

    def step(self, key: Any, state: Any, action: Any) -> tuple[Any, ...]:
        """gymnax's step (step_env, then reset where done) keeping what it drops: (next obs, state, reward,
        done, truncated, the final obs). A truncation is the state's ``time`` reaching the time limit."""
        keys = jax.random.split(key, (self.n, 2))
        obs_st, state_st, reward, done, _ = jax.vmap(self.env.step_env, (0, 0, 0, None))(
            keys[:, 0], state, action, self.params
        )
        obs_re, state_re = self.reset(keys[:, 1])
        obs_st, done = self.flat(obs_st), done.astype(bool)
        trunc = done & (state_st.time >= self.params.max_steps_in_episode)

        def pick(a: Any, b: Any) -> Any:
            return jnp.where(done.reshape(done.shape + (1,) * (a.ndim - 1)), a, b)

        return (jnp.where(done[:, None], obs_re, obs_st), jax.tree_util.tree_map(pick, state_re, state_st),
                reward.astype(jnp.float32), done, trunc, obs_st)  # fmt: skip

    def evaluate(self, act: Callable[[Any], Any], keys: Any) -> tuple[Any, Any]:
        """One episode per key acting by ``act(obs)``, in lock step until every one ended: (returns,
        lengths). Episode i resets from ``keys[i]`` and steps with keys folded from it."""
        n = keys.shape[0]
        ks = jax.vmap(jax.random.split)(keys)
        obs, state = jax.vmap(self.env.reset_env, (0, None))(ks[:, 0], self.params)

        def cond(c: tuple[Any, ...]) -> Any:
            return c[4].any() & (c[5] <= self.max_steps)

        def body(c: tuple[Any, ...]) -> tuple[Any, ...]:
            state, obs, ret, length, alive, t = c
            step_keys = jax.vmap(jax.random.fold_in, (0, None))(ks[:, 1], t)
            obs2, state2, r, done, _ = jax.vmap(self.env.step_env, (0, 0, 0, None))(
                step_keys, state, act(obs), self.params
            )
            ret = ret + jnp.where(alive, r, 0.0)
            return state2, self.flat(obs2), ret, length + alive, alive & ~done.astype(bool), t + 1

        c = (state, self.flat(obs), jnp.zeros(n), jnp.zeros(n, jnp.int32), jnp.ones(n, bool), jnp.int32(0))
        _, _, ret, length, _, _ = jax.lax.while_loop(cond, body, c)
        return ret, length


def orthogonal(key: Any, shape: tuple[int, int], gain: float) -> Any:
    """``jax.nn.initializers.orthogonal(gain)(key, shape, float32)`` without LAPACK: the same normal draws,
    and the Q of their QR with R's diagonal positive (which is what jax's sign correction gives), by
    Gram-Schmidt with a second pass (equal to jax's up to rounding).

    Why not jax's: on CPU, jaxlib 0.10's batched LAPACK kernels (its QR, vmapped over a pack's seeds) split
    their batch over XLA's intra-op thread pool and block until the pieces are done; when as many of them run
    at once as the pool has threads (one per core: 2 here), every thread waits for pieces no thread is free to
    run, and the init hangs for ever (seen in gdb: both ``tf_XLAEigen`` threads in ``jax::ParallelBatchMap``,
    under ``lapack_sgeqrf_ffi`` and ``lapack_sorgqr_ffi``; 256 seeds hung 2 runs of 2, 8 seeds did not)."""
    rows, cols = shape
    m, n = max(rows, cols), min(rows, cols)
    a = jax.random.normal(key, (m, n), jnp.float32)
    mask = jnp.arange(n)

    def column(j: Any, q: Any) -> Any:
        v, earlier = q[:, j], (mask < j).astype(q.dtype)
        for _ in range(2):  # twice: orthogonal to working precision
            v = v - q @ ((q.T @ v) * earlier)
        return q.at[:, j].set(v / jnp.linalg.norm(v))

    q = jax.lax.fori_loop(0, n, column, a)
    return gain * (q.T if rows < cols else q)


def mlp_init(key: Any, dims: list[int], head_gain: float) -> list[tuple[Any, Any]]:
    """Orthogonal weights (gain sqrt 2, the last layer ``head_gain``; ``orthogonal``), zero biases: CleanRL's
    layer_init."""
    keys = jax.random.split(key, len(dims) - 1)
    layers = []
    for j, (k, a, b) in enumerate(zip(keys, dims[:-1], dims[1:])):
        gain = head_gain if j == len(dims) - 2 else math.sqrt(2)
        layers.append((orthogonal(k, (a, b), gain), jnp.zeros(b)))
    return layers


def mlp(layers: list[tuple[Any, Any]], x: Any, act: Callable[[Any], Any],
        norm: Callable[[Any], Any] | None = None) -> Any:  # fmt: skip
    """The MLP's output: hidden layers ``act(norm(x W + b))`` (``norm`` None: none), a linear last one."""
    for W, b in layers[:-1]:
        h = x @ W + b
        x = act(norm(h) if norm is not None else h)
    W, b = layers[-1]
    return x @ W + b


# running statistics, torch ppo's RunningMeanStd: mean 0, var 1, count 1e-4, Chan et al.'s parallel update
def rms_init(shape: tuple[int, ...]) -> tuple[Any, Any, Any]:
    return jnp.zeros(shape), jnp.ones(shape), jnp.float32(1e-4)


def rms_update(rms: tuple[Any, Any, Any], x: Any) -> tuple[Any, Any, Any]:
    mean, var, count = rms
    b_mean, b_var, n = x.mean(0), x.var(0), x.shape[0]
    delta, tot = b_mean - mean, count + n
    m2 = var * count + b_var * n + delta**2 * count * n / tot
    return mean + delta * n / tot, m2 / tot, tot


def program(init: Callable[..., Any], iteration: Callable[[Any], tuple[Any, Any]],
            evaluate: Callable[[Any, Any], tuple[Any, Any]], max_iters: int, row: tuple[str, ...],
            losses: tuple[str, ...], policy: Callable[[Any], Any]) -> Program:  # fmt: skip
    """One seed's ``init(seed, lr)``, ``iteration(state) -> (state, row)`` and ``evaluate(state, keys)`` as
    a ``Program``: vmapped over seeds and jit-compiled, the chunk taking the state's buffers over.
    ``policy(state)``: the entries of a state that ``evaluate`` reads (it is called with them alone)."""
    chunk = make_chunk(iteration, evaluate, max_iters, len(row) + len(EPISODE_COLUMNS))
    return Program(init=jax.jit(jax.vmap(init)), row=row, losses=losses, policy=policy,
                   chunk=jax.jit(jax.vmap(chunk, in_axes=(0, None, 0)), donate_argnums=0),
                   evaluate=jax.jit(jax.vmap(evaluate)))  # fmt: skip


def make_chunk(iteration: Callable[[Any], tuple[Any, Any]], evaluate: Callable[[Any, Any], tuple[Any, Any]],
               max_iters: int, width: int) -> Callable[..., Any]:  # fmt: skip
    """One seed's chunk: ``n`` (traced) iterations, each giving a row of ``width`` numbers, then the
    evaluation episodes; the rows of a chunk of ``max_iters`` at most."""

    def chunk(st: Any, n: Any, eval_keys: Any) -> tuple[Any, ...]:
        rows = jnp.zeros((max_iters, width), jnp.float32)

        def body(i: Any, c: tuple[Any, Any]) -> tuple[Any, Any]:
            st, rows = c
            st, row = iteration(st)
            return st, rows.at[i].set(row)

        st, rows = jax.lax.fori_loop(0, n, body, (st, rows))
        ret, length = evaluate(st, eval_keys)
        return st, rows, ret, length

    return chunk


def epochs(st: dict[str, Any], batch: tuple[Any, ...], loss: Callable[..., Any], tx: Any, lr: Any,
           num_epochs: int, num_minibatches: int) -> tuple[dict[str, Any], Any]:  # fmt: skip
    """``num_epochs`` passes over ``batch`` (arrays with a leading batch axis), each in ``num_minibatches``
    minibatches of a fresh permutation drawn from the state's key; one step of ``tx`` then ``-lr`` a
    minibatch. ``loss(params, minibatch) -> (loss, tuple of statistics)``. Returns the state with its new
    params, optimiser state and key, and the statistics (epochs x minibatches x len(statistics))."""
    size = batch[0].shape[0]
    grad_fn = jax.value_and_grad(loss, has_aux=True)

    def epoch(carry: tuple[Any, Any, Any], _: Any) -> tuple[tuple[Any, Any, Any], Any]:
        p, opt, key = carry
        key, k = jax.random.split(key)
        perm = jax.random.permutation(k, size)
        mbs = tuple(x[perm].reshape(num_minibatches, size // num_minibatches, *x.shape[1:]) for x in batch)

        def minibatch(c: tuple[Any, Any], mb: tuple[Any, ...]) -> tuple[tuple[Any, Any], Any]:
            p, opt = c
            (_, stats), grads = grad_fn(p, mb)
            updates, opt = tx.update(grads, opt)
            p = jax.tree_util.tree_map(lambda w, u: w - lr * u, p, updates)
            return (p, opt), jnp.stack(stats)

        (p, opt), stats = jax.lax.scan(minibatch, (p, opt), mbs)
        return (p, opt, key), stats

    (p, opt, key), stats = jax.lax.scan(epoch, (st["params"], st["opt"], st["key"]), None, num_epochs)
    return dict(st, params=p, opt=opt, key=key), stats
