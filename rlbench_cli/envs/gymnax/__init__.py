"""gymnax's environments as suite tasks: ``gymnax/<Name>`` (``gymnax/CartPole-v1``,
``gymnax/Breakout-MinAtar``, ``gymnax/Catch-bsuite``), so a suite says which simulator it means.

They are JAX functions, not gymnasium envs: only an algorithm marked ``jax`` in ``algos.registry``
(``ppo_jax``, ``pqn_jax``) runs on them, stepping them inside its compiled program (jit over the training,
vmap over the envs and the seeds of a job). Nothing here imports jax or gymnax until an env is made
(``make``); the ``jax`` extra installs them (``pip install "rlbench-cli[jax]"``). gymnax 0.0.9's ``step``
returns (obs, state, reward, done, info), with the time limit inside ``done``; a truncation is told apart
by the state's ``time`` reaching ``max_steps_in_episode``.
"""

from __future__ import annotations

import difflib
import importlib.util
import os
import sys
import types
from typing import Any

__all__ = ["CONTINUOUS", "GYMNASIUM", "GYMNAX_ENVS", "NAMESPACE", "PIP", "check_kwargs", "drawn_in", "make",
           "missing", "register", "unknown"]  # fmt: skip

NAMESPACE = "gymnax"
PIP = 'pip install "rlbench-cli[jax]"'

# suite id -> gymnax's name: classic control, MinAtar, and the bsuite tasks gymnax has (MNISTBandit-bsuite
# downloads MNIST when made: left out)
_NAMES = (
    "CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1", "MountainCarContinuous-v0",
    "Asterix-MinAtar", "Breakout-MinAtar", "Freeway-MinAtar", "SpaceInvaders-MinAtar",
    "Catch-bsuite", "DeepSea-bsuite", "DiscountingChain-bsuite", "MemoryChain-bsuite", "SimpleBandit-bsuite",
    "UmbrellaChain-bsuite",
)  # fmt: skip
GYMNAX_ENVS: dict[str, str] = {f"{NAMESPACE}/{n}": n for n in _NAMES}
# gymnasium's env simulating the same task, where gymnax's has one (classic control: the same observations and
# actions): where a gymnax policy's frames are drawn (gymnax draws none): ``drawn_in``
GYMNASIUM: dict[str, str] = {f"{NAMESPACE}/{n}": n for n in _NAMES[:5]}
# the tasks with a Box action space (every other one is discrete)
CONTINUOUS = frozenset({"gymnax/Pendulum-v1", "gymnax/MountainCarContinuous-v0"})


def drawn_in(env_id: str) -> str:
    """The env whose frames show a policy of ``env_id`` (``rlbench enjoy --video``, ``budget.video_every``):
    a gymnax task's gymnasium version (``GYMNASIUM``), any other env itself.

    Raises:
        ValueError: a gymnax task without a gymnasium version (one line, for the caller to name its setting).
    """
    if env_id not in GYMNAX_ENVS:
        return env_id
    if env_id not in GYMNASIUM:
        raise ValueError(f"gymnax draws no frames and {env_id} has no gymnasium version to draw them in (those "
                         f"with one: {', '.join(GYMNASIUM)})")  # fmt: skip
    return GYMNASIUM[env_id]


def register() -> None:
    """Nothing to register: gymnax's envs are not gymnasium envs (``envs.known_env`` asks this family)."""


def missing() -> str | None:
    """What is missing to run gymnax tasks (jax, gymnax or optax, with the pip command), or None."""
    lacking = [m for m in ("jax", "gymnax", "optax") if importlib.util.find_spec(m) is None]
    if not lacking:
        return None
    return f"gymnax tasks need {', '.join(lacking)}; install them with: {PIP}"


def unknown(env_id: str) -> str:
    """The one-line problem with an id in the ``gymnax/`` namespace that is not one of its tasks."""
    name = env_id.removeprefix(f"{NAMESPACE}/")
    close = [f"{NAMESPACE}/{n}" for n in difflib.get_close_matches(name, _NAMES, n=3, cutoff=0.6)]
    hint = f"did you mean {', '.join(close)}?" if close else f"gymnax has: {', '.join(GYMNAX_ENVS)}"
    return f"unknown gymnax environment {env_id!r}; {hint}"


def check_kwargs(env_id: str, kwargs: dict[str, Any]) -> str | None:
    """A problem with a gymnax task in a suite: its packages missing, or kwargs (gymnax tasks take none)."""
    if env_id not in GYMNAX_ENVS:
        return None
    problem = missing()
    if problem:
        return problem
    if kwargs:
        return f"{env_id} takes no kwargs (got {', '.join(sorted(kwargs))}); remove them"
    return None


# XLA's multi-threaded Eigen pool on CPU can wedge for ever on vmapped programs (every XLA thread idle, the
# caller in BlockUntilReady: 2 of 9 runs here with the default flags, a pytest worker too); single-threaded
# Eigen avoids it. Set before JAX starts in a process: a process keeps the flags of its first computation.
XLA_FLAG = "--xla_cpu_multi_thread_eigen=false"


def set_xla_flags() -> None:
    """``XLA_FLAGS`` gets ``XLA_FLAG`` unless it already says how Eigen threads; call before importing jax."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_multi_thread_eigen" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {XLA_FLAG}".strip()


# imported by gymnax's package for its envs' rendering only (gymnax.environments.misc.pong): deferred to their
# first use, they cost a JAX job nothing before it starts (about 1.4 of gymnax's 2.6 s of import here)
RENDERING_ONLY = ("seaborn", "matplotlib.pyplot")


class _Deferred(types.ModuleType):
    """Stands in ``sys.modules`` for a module not imported yet: the first attribute it lacks imports the real
    one (which then replaces it in ``sys.modules``) and is read from it, as is every later one. (importlib's
    LazyLoader does not defer here: an ``import`` statement reads its module's ``__spec__`` and loads it.)"""

    def __getattr__(self, attr: str) -> Any:
        name = self.__name__
        if sys.modules.get(name) is self:
            del sys.modules[name]
        real = importlib.import_module(name)  # importlib: bound by ``import importlib.util``
        return getattr(real, attr)


def _defer(name: str) -> None:
    """``_Deferred`` in ``sys.modules`` for ``name`` (and its parent package imported), unless it is imported
    already or not installed."""
    if name in sys.modules:
        return
    try:
        if importlib.util.find_spec(name) is None:
            return
    except (ImportError, ValueError):
        return
    stand_in = _Deferred(name)
    stand_in.__spec__ = None
    sys.modules[name] = stand_in
    parent, _, child = name.rpartition(".")
    if parent and parent in sys.modules:  # ``import a.b as c`` reads b off a
        setattr(sys.modules[parent], child, stand_in)


def make(env_id: str) -> tuple[Any, Any]:
    """gymnax's (env, default params) for a ``gymnax/<Name>`` id; imports gymnax (and jax), with
    ``set_xla_flags`` first so whatever steps the env in this process runs with them, and gymnax's
    rendering-only imports (``RENDERING_ONLY``) deferred to their first use."""
    set_xla_flags()
    for name in RENDERING_ONLY:
        _defer(name)
    import gymnax  # heavy (jax): only where a run steps the env

    return gymnax.make(GYMNAX_ENVS[env_id])
