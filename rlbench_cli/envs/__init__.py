"""Environment factory: gymnasium ids with kwargs, made with a seed. gymnasium is imported on first use."""

from __future__ import annotations

import difflib
from typing import Any

__all__ = ["known_env", "make_env", "env_ids"]


def env_ids() -> list[str]:
    import gymnasium

    return sorted(gymnasium.envs.registry.keys())


def known_env(env_id: str) -> str | None:
    """None if ``env_id`` is registered with gymnasium, else a one-line problem with a suggestion."""
    ids = env_ids()
    if env_id in ids:
        return None
    close = difflib.get_close_matches(env_id, ids, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else "; use a gymnasium id such as CartPole-v1"
    return f"unknown gymnasium environment {env_id!r}{hint}"


def make_env(env_id: str, kwargs: dict[str, Any] | None = None, seed: int | None = None) -> Any:
    """A gymnasium env, reset once with ``seed`` so its RNG (and its action space's) are seeded."""
    import gymnasium

    env = gymnasium.make(env_id, **(kwargs or {}))
    if seed is not None:
        env.reset(seed=seed)
        env.action_space.seed(seed)
        env.observation_space.seed(seed)
    return env
