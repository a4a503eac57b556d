"""A kept policy of ``ppo_jax`` or ``pqn_jax`` (``algos.keep``): one seed's slice of the part of the training
state its program acts with (``Program.policy``: ppo's actor and observation statistics, pqn's Q-network),
saved as ``policy.npz`` with what rebuilds it (the program, the run's params, the env), and rebuilt by
``load_policy`` for ``rlbench enjoy``.

Rebuilt, it plays two ways: ``play(seeds)`` runs the program's own evaluation episodes in gymnax (JAX, the
same keys as the run's evaluations: ``PRNGKey(eval_seeds(seed)[i])``, so the final policy's first
``eval_episodes`` returns are those its last evaluation logged), and called on a batch of observations it acts
through a NumPy forward pass of the same weights (deterministic: argmax, the Gaussian's mean clipped), which is
how it plays in gymnasium's version of a classic-control task, where frames can be drawn. Imports no JAX until
``play``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["GymnaxPolicy", "flatten", "load_policy", "unflatten"]

META = "__meta__"


def flatten(tree: Any, prefix: str = "") -> dict[str, np.ndarray]:
    """A tree of dicts, lists and tuples of arrays as {"a/0/1": array}."""
    if isinstance(tree, dict):
        items: Any = tree.items()
    elif isinstance(tree, (list, tuple)):
        items = enumerate(tree)
    else:
        return {prefix: np.asarray(tree)}
    out: dict[str, np.ndarray] = {}
    for k, v in items:
        out.update(flatten(v, f"{prefix}/{k}" if prefix else str(k)))
    return out


def unflatten(flat: dict[str, np.ndarray]) -> Any:
    """``flatten``'s inverse (tuples come back as lists)."""
    root: dict[str, Any] = {}
    for name, value in flat.items():
        node = root
        *parents, leaf = name.split("/")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value

    def lists(node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        if node and all(k.isdigit() for k in node):
            return [lists(node[str(i)]) for i in range(len(node))]
        return {k: lists(v) for k, v in node.items()}

    return lists(root)


class GymnaxPolicy:
    """One seed's policy of a program on a gymnax task. ``meta``: program (ppo, pqn), params, env_id, seed
    and, for a Box action space, its bounds; ``arrays``: the flattened policy state, or ``fetch()`` giving
    it (training: read from the pack's state only when a policy is saved)."""

    loader = "gymnax.policy:load_policy"
    policy_file = "policy.npz"

    def __init__(self, meta: dict[str, Any], arrays: dict[str, np.ndarray] | None = None,
                 fetch: Callable[[], dict[str, np.ndarray]] | None = None):  # fmt: skip
        self.meta, self._arrays, self._fetch = meta, arrays, fetch
        self._host: tuple[Any, Any] | None = None  # (config, tree) of the NumPy forward pass, built once

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        if self._arrays is None:
            assert self._fetch is not None
            self._arrays = self._fetch()
        return self._arrays

    def config(self) -> Any:
        from .ppo_config import PPOJaxConfig
        from .pqn_config import PQNJaxConfig

        cls = PPOJaxConfig if self.meta["program"] == "ppo" else PQNJaxConfig
        return cls.from_params(self.meta["params"], continuous=bool(self.meta.get("continuous")))

    def detach(self) -> GymnaxPolicy:
        """This policy with its own copy of its arrays (read now), holding nothing of the pack's."""
        return GymnaxPolicy(self.meta, arrays={k: np.array(v, copy=True) for k, v in self.arrays.items()})

    def save(self, path: str | Path) -> None:
        with open(path, "wb") as f:  # a file object: np.savez adds no suffix
            np.savez(f, **{META: np.array(json.dumps(self.meta))}, **self.arrays)

    # -- acting in gymnasium (NumPy) ------------------------------------------------------------------
    def __call__(self, obs: np.ndarray) -> np.ndarray:
        if self._host is None:
            self._host = (self.config(), unflatten(self.arrays))
        cfg, tree = self._host
        x = np.asarray(obs, np.float32).reshape(len(obs), -1)
        if self.meta["program"] == "ppo":
            if "obs_rms" in tree:
                mean, var = tree["obs_rms"][0], tree["obs_rms"][1]
                x = np.clip((x - mean) / np.sqrt(var + 1e-8), -cfg.clip_obs, cfg.clip_obs).astype(np.float32)
            act = np.tanh if cfg.activation == "tanh" else _relu
            out = _mlp(tree["params"]["actor"], x, act, None)
        else:
            out = _mlp(tree["params"], x, _relu, _layer_norm if cfg.layer_norm else None)
        if self.meta.get("continuous"):
            return np.clip(
                out, np.asarray(self.meta["low"], np.float32), np.asarray(self.meta["high"], np.float32)
            )
        return out.argmax(-1)

    # -- playing in gymnax (JAX) ----------------------------------------------------------------------
    def play(self, seeds: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """One episode per seed in gymnax, as the run's evaluations play them: (returns, lengths)."""
        import importlib
        import os

        from ...envs.gymnax import make, set_xla_flags

        set_xla_flags()  # before JAX starts (``loop.prepare_jax``'s flags, without the compilation cache)
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        import jax  # heavy: for a rebuilt policy only

        build = importlib.import_module(f"{__package__}.{self.meta['program']}").build
        prog = build(self.config(), *make(self.meta["env_id"]), 1, 1)  # nothing compiled but evaluate
        keys = np.asarray(jax.vmap(jax.random.PRNGKey)(np.asarray(seeds)))
        tree = jax.tree_util.tree_map(lambda a: a[None], unflatten(self.arrays))
        ret, length = prog.evaluate(tree, keys[None])
        return np.asarray(ret[0], np.float64), np.asarray(length[0])


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0)


def _layer_norm(h: np.ndarray) -> np.ndarray:
    return (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-6)


def _mlp(layers: list[Any], x: np.ndarray, act: Callable[[np.ndarray], np.ndarray],
         norm: Callable[[np.ndarray], np.ndarray] | None) -> np.ndarray:  # fmt: skip
    """``common.mlp`` in NumPy."""
    for W, b in layers[:-1]:
        h = x @ W + b
        x = act(norm(h) if norm is not None else h)
    W, b = layers[-1]
    return x @ W + b


def load_policy(path: str | Path, device: str = "cpu") -> GymnaxPolicy:
    """The policy ``GymnaxPolicy.save`` wrote at ``path`` (``device`` is the CPU's: JAX's own)."""
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays.pop(META)))
    return GymnaxPolicy(meta, arrays)
