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
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["load_entrypoint"]


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
