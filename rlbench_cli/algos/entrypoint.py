"""Your own training code as an algorithm: ``entrypoint: "package.module:function"`` in a suite.

The function is called inside the worker with the run's ``RunContext`` (see ``algos.base``): ``ctx.params``,
``ctx.seed``, ``ctx.steps``, ``ctx.device``, ``ctx.make_env()``, ``ctx.maybe_evaluate(step, policy)``,
``ctx.finish(step, policy)``, ``ctx.sink.log(step, **metrics)`` and ``ctx.should_stop()``. The module must be
importable in the worker (installed, or on PYTHONPATH / in the directory ``rlbench run`` is started from).
Example::

    def train(ctx):
        env = ctx.make_env()
        policy = lambda obs: np.zeros(len(obs), dtype=int)
        for step in range(0, ctx.steps + 1, 1000):
            ctx.maybe_evaluate(step, policy)
        ctx.finish(ctx.steps, policy)

Several seeds in one call: a function marked with ``@rlbench_cli.seeds_per_job`` (or with the attribute
``fn.rlbench_packed = True``) takes a LIST of contexts, one per seed, all of one (algorithm, task, params)
cell; with ``resources.seeds_per_job: N`` in the suite, rlbench hands it up to N seeds per job (with 1, or
without the setting, a list of one). Each context is its own run as usual: its own seed, sink, run folder,
``evaluate`` / ``maybe_evaluate`` / ``finish``, checkpoints and result. A seed that fails alone is marked
with ``ctx.fail(reason)`` (a message, or the exception that ended it; a NaN loss, say): it is recorded as
failed with that reason, its metrics stay, its ``should_stop()`` turns true, and the other seeds go on. An
exception that escapes the function fails every seed of the job that had not failed already. Example::

    import rlbench_cli

    @rlbench_cli.seeds_per_job
    def train(ctxs):
        envs = [ctx.make_env() for ctx in ctxs]
        ...  # train len(ctxs) policies together, stacked along a seed axis
        for ctx, policy in zip(ctxs, policies):
            ctx.finish(ctx.steps, policy)

``examples/packed_entrypoint.py`` is a worked example (a vectorised torch policy, N seeds trained at once).
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["entrypoint_packs", "load_entrypoint", "seeds_per_job", "takes_seeds"]

F = TypeVar("F", bound=Callable[..., Any])


def seeds_per_job(fn: F) -> F:
    """Mark an entrypoint function as taking a list of ``RunContext`` (one per seed) instead of one."""
    fn.rlbench_packed = True  # type: ignore[attr-defined]
    return fn


def takes_seeds(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` was marked with ``seeds_per_job`` (``fn.rlbench_packed = True``)."""
    return getattr(fn, "rlbench_packed", False) is True


@functools.cache
def entrypoint_packs(target: str) -> bool:
    """Whether the entrypoint ``package.module:function`` takes several seeds. False when it cannot be
    imported here: its runs then go one per job, and each reports the import error itself."""
    try:
        return takes_seeds(load_entrypoint(target))
    except Exception:  # noqa: BLE001 - the run records the error; planning must not fail on it
        return False


def load_entrypoint(target: str) -> Callable[[Any], Any]:
    """Import ``package.module:function`` (the working directory is on the path, as for ``python -m``)."""
    module_name, _, func_name = target.partition(":")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ImportError(f"entrypoint {target!r}: cannot import {module_name!r} ({e})") from e
    func = getattr(module, func_name, None)
    if not callable(func):
        raise AttributeError(f"entrypoint {target!r}: {module_name} has no function {func_name!r}")
    return func
