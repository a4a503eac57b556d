"""Run a test that computes with JAX on CPU in a fresh process (forked from a server that imported JAX once, and
no XLA backend), with a deadline.

XLA's CPU runtime here (2 cores, jaxlib 0.10) sometimes wedges for ever in a vmapped program: the caller waits
in ``BlockUntilReady`` while every XLA thread is idle (seen in pytest workers, with and without
``--xla_cpu_multi_thread_eigen=false`` and with async dispatch off). It cannot be interrupted from Python, so
a test that trains in its own process would hang the whole suite. Here the test's body runs in a child
process; a child still running at the deadline is killed and the body run once more in a new one, and the
test says so on stderr. A second wedge, or any failure of the body, fails the test as usual.
"""

from __future__ import annotations

import functools
import importlib
import multiprocessing
import sys
import traceback
from collections.abc import Callable
from typing import Any

import pytest

DEADLINE_S = 150.0  # a body here takes seconds to about a minute on 2 loaded cores


def _child(module: str, name: str, args: tuple, kwargs: dict, out: Any) -> None:
    try:
        fn = getattr(importlib.import_module(module), name)
        getattr(fn, "__wrapped__", fn)(*args, **kwargs)
        out.put(None)
    except BaseException:  # the body's failure, sent back as text
        out.put(traceback.format_exc())


def _context(module: str) -> Any:
    """A fork server that imported jax, gymnax and the test module once (they start no XLA backend, so a fork
    of it is as fresh as a spawned process): each body's process starts in a fraction of a second instead of
    importing them again (about 3.5 CPU-s each). Its environment is the worker's when the first body ran."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["jax", "gymnax", module])
    return ctx


def isolated(fn: Callable[..., None] | None = None, *, deadline_s: float = DEADLINE_S) -> Any:
    """Decorate a test whose arguments are picklable (``tmp_path``, parameters; not ``monkeypatch``);
    ``@isolated(deadline_s=...)`` for a body that takes longer than ``DEADLINE_S``."""
    if fn is None:
        return functools.partial(isolated, deadline_s=deadline_s)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        ctx = _context(fn.__module__)
        for attempt in (1, 2):
            out = ctx.Queue()
            proc = ctx.Process(target=_child, args=(fn.__module__, fn.__name__, args, kwargs, out))
            proc.start()
            proc.join(deadline_s)
            if proc.is_alive():
                proc.kill()
                proc.join()
                print(f"{fn.__name__}: XLA's CPU runtime wedged (attempt {attempt}); killed", file=sys.stderr)
                continue
            error = out.get(timeout=30) if proc.exitcode == 0 else f"the child exited with {proc.exitcode}"
            if error is not None:
                pytest.fail(error, pytrace=False)
            return
        pytest.fail(f"{fn.__name__}: XLA's CPU runtime wedged twice", pytrace=False)

    return wrapper
