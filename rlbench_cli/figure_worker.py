"""Figures drawn in a second process while this one computes the statistics.

``rlbench plot`` spends its time in two kinds of work: bootstraps (numpy, on threads, every core) and figures
(matplotlib: one thread, holding the GIL). Run one after the other, the figures leave every core but one idle;
run on a thread beside the bootstraps, they stall them on the GIL. A ``FigureWorker`` is a child process forked
at the start of the command: it imports matplotlib and draws a small figure (fonts, caches) while this process
reads the store, then draws each figure it is sent while this process bootstraps the next statistic.

Only what a figure needs travels: a job is a module-level function and its arguments, pickled (a score table
and small frames of intervals); the answer is the function's result, the warnings it raised and its exception,
if any. Jobs run in the order they are sent, one at a time.

The worker is an optimisation, never a dependency: ``FigureWorker.start()`` returns None (draw here) where
``fork`` is not the platform's way (not Linux), with one usable core, when threads already run in this process
(a fork would copy their locks mid-use), or with ``RLBENCH_FIGURE_PROCESS=0``; and a job whose child died
(killed, out of memory) runs here instead, once the child is gone. The child ignores Ctrl-C (this process
decides) and exits when this process closes the pipe or dies.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import threading
import traceback
import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["FigureWorker", "Job", "enabled", "running", "submit"]


def enabled() -> bool:
    """Whether a worker may be forked here: Linux, two or more usable cores, no other thread running, and
    ``$RLBENCH_FIGURE_PROCESS`` not ``0``."""
    if os.environ.get("RLBENCH_FIGURE_PROCESS", "1").strip() == "0" or not sys.platform.startswith("linux"):
        return False
    from .bootstrap import workers

    return workers(2) >= 2 and threading.active_count() == 1


class Job:
    """A figure sent to the worker (or drawn here): ``result()`` waits for it and returns what the function
    returned, re-raising its exception and re-issuing its warnings in this process."""

    def __init__(self, worker: FigureWorker | None, fn: Callable[..., Any], args: tuple, kwargs: dict):
        self._worker, self._fn, self._args, self._kwargs = worker, fn, args, kwargs
        self._done = False
        self._value: Any = None
        if worker is None:
            self._finish(*_call(fn, args, kwargs))

    def _finish(
        self, value: Any, caught: list[tuple[str, type[Warning]]], error: BaseException | None
    ) -> None:
        self._done, self._value, self._error, self._caught = True, value, error, caught

    def result(self) -> Any:
        if not self._done:
            self._worker._collect(self)  # type: ignore[union-attr]
        for message, category in self._caught:  # inside the caller's warnings.catch_warnings, if any
            warnings.warn(message, category, stacklevel=2)
        self._caught = []
        if self._error is not None:
            raise self._error
        return self._value


def submit(worker: FigureWorker | None, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Job:
    """``worker.submit(fn, *args, **kwargs)``, or, without a worker, the job run here at once."""
    return Job(None, fn, args, kwargs) if worker is None else worker.submit(fn, *args, **kwargs)


def running(warm: Callable[[], Any] | None = None) -> contextlib.AbstractContextManager[FigureWorker | None]:
    """``with running(warm) as worker:`` a started ``FigureWorker``, or None where none can run (draw here);
    the worker is closed on leaving (killed on an error)."""
    return FigureWorker.start(warm) or contextlib.nullcontext()


def _call(fn: Callable[..., Any], args: tuple, kwargs: dict) -> tuple[Any, list, BaseException | None]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value, error = fn(*args, **kwargs), None
        except Exception as e:  # noqa: BLE001 - handed to the caller, who raises it
            value, error = None, e
    return value, [(str(w.message), w.category) for w in caught], error


class FigureWorker:
    """A forked child that draws figures: ``submit(fn, *args, **kwargs)`` returns a ``Job``; ``close()`` ends
    the child. Use ``FigureWorker.start()``, which returns None where no worker can run (see the module)."""

    def __init__(self, pid: int, to_child: Any, from_child: Any):
        self._pid, self._to, self._from = pid, to_child, from_child
        self._pending: list[Job] = []
        self._alive = True

    @classmethod
    def start(cls, warm: Callable[[], Any] | None = None) -> FigureWorker | None:
        """Forks the worker; ``warm`` (a function) runs first in the child (imports, a first figure)."""
        if not enabled():
            return None
        from .allocator import tune

        tune()  # before the fork, so that the child's figures get it too
        jobs_r, jobs_w = os.pipe()
        answers_r, answers_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: never returns into the caller's code
            code = 0
            try:
                os.close(jobs_w)
                os.close(answers_r)
                _serve(jobs_r, answers_w, warm)
            except BaseException:  # noqa: BLE001 - nothing of the child may reach the parent's stack
                code = 1
            finally:
                os._exit(code)
        os.close(jobs_r)
        os.close(answers_w)
        return cls(pid, os.fdopen(jobs_w, "wb"), os.fdopen(answers_r, "rb"))

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Job:
        """Sends ``fn(*args, **kwargs)`` to the child (drawn here if the child is gone)."""
        if not self._alive:
            return Job(None, fn, args, kwargs)
        try:
            pickle.dump((fn, args, kwargs), self._to, protocol=pickle.HIGHEST_PROTOCOL)
            self._to.flush()
        except (BrokenPipeError, OSError):
            self._lost()
            return Job(None, fn, args, kwargs)
        job = Job(self, fn, args, kwargs)
        self._pending.append(job)
        return job

    def _collect(self, job: Job) -> None:
        while not job._done:
            first = self._pending[0]
            try:
                answer = pickle.load(self._from)
            except (EOFError, OSError, pickle.UnpicklingError):
                self._lost()
                continue
            self._pending.pop(0)
            first._finish(*answer)

    def _lost(self) -> None:
        """The child died: what it had not answered is drawn here, in order."""
        self._alive = False
        self._reap()
        pending, self._pending = self._pending, []
        for job in pending:
            job._finish(*_call(job._fn, job._args, job._kwargs))

    def _reap(self) -> None:
        for f in (self._to, self._from):
            try:
                f.close()
            except OSError:
                pass
        try:
            os.waitpid(self._pid, 0)
        except ChildProcessError:
            pass

    def close(self, wait: bool = True) -> None:
        """Waits for every job sent (``wait``), then ends the child; ``wait=False`` (an error, Ctrl-C) kills
        it and leaves unanswered jobs unanswered."""
        if not wait and self._alive:
            try:
                os.kill(self._pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._pending = []
        for job in list(self._pending):
            if not job._done:
                self._collect(job)
        if self._alive:
            self._alive = False
            self._reap()

    def __enter__(self) -> FigureWorker:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close(wait=exc_type is None)


def _serve(jobs_fd: int, answers_fd: int, warm: Callable[[], Any] | None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    if warm is not None:
        try:
            warm()
        except Exception:  # noqa: BLE001 - a failed warm-up only costs the first figure its caches
            pass
    jobs, answers = os.fdopen(jobs_fd, "rb"), os.fdopen(answers_fd, "wb")
    while True:
        try:
            fn, args, kwargs = pickle.load(jobs)
        except EOFError:
            return
        value, caught, error = _call(fn, args, kwargs)
        try:
            payload = pickle.dumps((value, caught, error), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - an exception or value that does not pickle: say what it was
            text = "".join(traceback.format_exception(error)) if error is not None else repr(value)
            payload = pickle.dumps((None, caught, RuntimeError(f"figure worker: {text.strip()}")))
        answers.write(payload)
        answers.flush()
