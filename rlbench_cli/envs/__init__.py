"""Environment factory: gymnasium ids with kwargs and wrappers, made with a seed. gymnasium is imported on
first use.

A wrapper is ``{"name": ..., "kwargs": {...}}``: a class of ``gymnasium.wrappers`` by name (``TimeLimit``,
``ClipAction``, ``RescaleAction``, ``NormalizeObservation``, ``FrameStackObservation``, ...), one of rlbench's
realism wrappers (``Delay``, ``Disturbance``, ``SafetyCost``: ``envs.wrappers``) or your own as
``"package.module:Class"``; wrappers are applied in the order given, to training and evaluation envs alike.
"""

from __future__ import annotations

import difflib
from typing import Any

from .families import family_of, namespace_problem, register_all

__all__ = ["known_env", "known_wrapper", "make_env", "env_ids", "wrapper_class", "wrapper_kwargs_problem"]


# The ids gymnasium 1.0 registers itself (pyproject pins it; tests/unit/test_spec.py checks each is still
# registered): a suite of these, or of rlbench's own families, is checked without importing gymnasium (0.4 s of
# every `rlbench run`'s coordinator, which never makes an env). Any other id is looked up in the registry.
GYMNASIUM_IDS = frozenset(
    f"{name}-v{v}"
    for name, versions in {
        "Acrobot": "1", "CartPole": "01", "MountainCar": "0", "MountainCarContinuous": "0", "Pendulum": "1",
        "Blackjack": "1", "CliffWalking": "0", "FrozenLake": "1", "FrozenLake8x8": "1", "Taxi": "3",
        "LunarLander": "3", "LunarLanderContinuous": "3", "BipedalWalker": "3", "BipedalWalkerHardcore": "3",
        "CarRacing": "3", "Ant": "2345", "HalfCheetah": "2345", "Hopper": "2345", "Humanoid": "2345",
        "HumanoidStandup": "245", "InvertedDoublePendulum": "245", "InvertedPendulum": "245", "Pusher": "245",
        "Reacher": "245", "Swimmer": "2345", "Walker2d": "2345",
    }.items()
    for v in versions
)  # fmt: skip


def env_ids() -> list[str]:
    import gymnasium

    register_all()

    return sorted(gymnasium.envs.registry.keys())


def known_env(env_id: str) -> str | None:
    """None if ``env_id`` is registered with gymnasium or is an env of a family that is not gymnasium's
    (``gymnax/...``), else a one-line problem with a suggestion."""
    family = family_of(env_id)
    # one of a family's envs (registered when made), or one of gymnasium's own
    if family is not None or env_id in GYMNASIUM_IDS:
        return None
    problem = namespace_problem(env_id)
    if problem:
        return problem
    ids = env_ids()
    if env_id in ids:
        return None
    close = difflib.get_close_matches(env_id, ids, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else "; use a gymnasium id such as CartPole-v1"
    return f"unknown gymnasium environment {env_id!r}{hint}"


def wrapper_class(name: str) -> Any:
    """The wrapper class ``name`` names: ``gymnasium.wrappers.<name>`` or ``package.module:Class``."""
    import importlib

    import gymnasium.wrappers

    if ":" in name:
        module, _, cls = name.partition(":")
        return getattr(importlib.import_module(module), cls)
    from .wrappers import WRAPPERS

    if name in WRAPPERS:
        return WRAPPERS[name]
    return getattr(gymnasium.wrappers, name)


def known_wrapper(name: str) -> str | None:
    """None if ``name`` is a wrapper class, else a one-line problem with a suggestion."""
    try:
        cls = wrapper_class(name)
    except (ImportError, AttributeError, ValueError):
        cls = None
    if isinstance(cls, type):
        return None
    if ":" in name:
        return f"cannot import wrapper {name!r}; check the module is importable and the class name"
    import gymnasium.wrappers

    names = [n for n in dir(gymnasium.wrappers) if n[:1].isupper()]
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    hint = (
        f"; did you mean {', '.join(close)}?"
        if close
        else "; name a gymnasium.wrappers class or 'pkg.mod:Class'"
    )
    return f"unknown wrapper {name!r}{hint}"


def wrapper_kwargs_problem(name: str, kwargs: dict[str, Any]) -> str | None:
    """None if the wrapper ``name`` (a known one) takes ``kwargs``, else a one-line problem naming it and the key."""
    from .wrappers import check_kwargs

    problem = check_kwargs(wrapper_class(name), kwargs)
    return f"wrapper {name}: {problem}" if problem else None


def make_env(
    env_id: str,
    kwargs: dict[str, Any] | None = None,
    seed: int | None = None,
    wrappers: list[dict[str, Any]] | None = None,
) -> Any:
    """A gymnasium env with its wrappers, reset once with ``seed`` so its RNG (and its action space's) are
    seeded."""
    import gymnasium

    family = family_of(env_id)
    if family is not None and family.jax:
        raise ValueError(f"{env_id} is a JAX env ({family.name}), not a gymnasium env: it runs inside an "
                         "algorithm marked jax in algos.registry, which steps it itself")  # fmt: skip
    register_all()
    env = gymnasium.make(env_id, **(kwargs or {}))
    for w in wrappers or []:
        env = wrapper_class(w["name"])(env, **(w.get("kwargs") or {}))
    if seed is not None:
        env.reset(seed=seed)
        env.action_space.seed(seed)
        env.observation_space.seed(seed)
    return env
