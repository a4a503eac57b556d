"""The local pool's zygote: one process that imports what every run uses (gymnasium, pyarrow, the algorithm
registry, torch) once, then forks the pool's workers from itself. A pool of N workers pays one torch import
instead of N (about 2 s of CPU each), its workers share those pages, and a worker replacing one that crashed or
overran its timeout starts warm in milliseconds.

Only for pools whose workers all run on the CPU, on Linux (pidfds): CUDA must not be initialised before a fork,
and the zygote never touches it, but GPU pools keep spawning each worker (``LocalExecutor``), as before.
``RLBENCH_WORKER_START=spawn`` spawns every worker.

The coordinator holds a pidfd per forked worker (sent by the zygote right after the fork, so it cannot name a
reused pid): readable when the worker exits, the ``sentinel`` ``multiprocessing.connection.wait`` watches.
The zygote reaps its children and reports each exit code, as ``multiprocessing.Process.exitcode`` gives it
(minus the signal for a worker killed by one). If the coordinator dies the zygote is killed (parent-death signal),
and then its workers are (theirs)."""

from __future__ import annotations

import os
import select
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from multiprocessing import reduction
from multiprocessing.connection import Connection, wait
from typing import Any

from .base import set_parent_death_signal

__all__ = ["Zygote", "ForkedProcess", "usable"]

READY_TIMEOUT_S = 300.0  # the zygote's imports (torch on a loaded machine); past it the pool spawns instead
EXIT_REPORT_TIMEOUT_S = 5.0


def usable(devices: list[str]) -> bool:
    """Whether a pool on ``devices`` forks its workers from a zygote (see the module docstring)."""
    if os.environ.get("RLBENCH_WORKER_START", "fork") == "spawn":
        return False
    return (
        sys.platform.startswith("linux")
        and hasattr(os, "pidfd_open")
        and hasattr(signal, "pidfd_send_signal")
        and all(d == "cpu" for d in devices)
    )


def _readable(fd: int, timeout: float = 0.0) -> bool:
    return bool(select.select([fd], [], [], timeout)[0])


class ForkedProcess:
    """A worker forked by the zygote, seen from the coordinator: what ``LocalExecutor`` uses of
    ``multiprocessing.Process`` (pid, sentinel, is_alive, exitcode, kill, terminate, join, close)."""

    def __init__(self, pid: int, pidfd: int, zygote: Zygote):
        self.pid, self.sentinel, self._zygote = pid, pidfd, zygote
        self._code: int | None = None

    def is_alive(self) -> bool:
        return self.sentinel >= 0 and not _readable(self.sentinel)

    @property
    def exitcode(self) -> int | None:
        if self._code is None and not self.is_alive():
            self._code = self._zygote.exit_code(self.pid)
        return self._code

    def _signal(self, sig: int) -> None:
        if self.sentinel >= 0:
            try:
                signal.pidfd_send_signal(self.sentinel, sig)
            except ProcessLookupError:  # already exited
                pass

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def join(self, timeout: float | None = None) -> None:
        if self.sentinel >= 0:
            select.select([self.sentinel], [], [], timeout)

    def close(self) -> None:
        """Release the pidfd (the process has exited or been killed)."""
        if self.sentinel >= 0:
            os.close(self.sentinel)
            self.sentinel = -1


class Zygote:
    """Started by ``LocalExecutor.start`` for a CPU pool; ``check`` runs ``check`` (the runs' params check,
    which imports their adapters) in it; ``fork`` gives a worker running
    ``worker_main(conn, parent_pid, *args)`` with ``conn`` its end of a new pipe, or None once the zygote cannot fork
    (it died, or never became ready): the pool then spawns its workers."""

    def __init__(
        self,
        ctx: Any,
        preload: Callable[..., None],
        preload_args: tuple,
        worker_main: Callable[..., None],
        check: Callable[[Any], Any] | None = None,
    ):
        self._ctx = ctx
        self.conn, child = ctx.Pipe()
        args = (child, os.getpid(), preload, preload_args, worker_main, check)
        self.proc = ctx.Process(target=_zygote_main, args=args, name="rlbench-zygote", daemon=True)
        self.proc.start()
        child.close()
        self._ready = False
        self._broken = False
        self._exits: dict[int, int] = {}

    def _recv(self, timeout: float) -> tuple | None:
        """The zygote's next message (an exit report is kept aside), or None on a timeout or its death."""
        try:
            if not self.conn.poll(timeout):
                return None
            msg = self.conn.recv()
        except (EOFError, OSError):
            self._broken = True
            return None
        if msg[0] == "exit":
            self._exits[msg[1]] = msg[2]
        elif msg[0] == "ready":
            self._ready = True
        return msg

    def _wait_ready(self, stop: Any = None) -> bool:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self._ready and not self._broken:
            if stop is not None and stop.is_set():
                return False
            if time.monotonic() > deadline:
                self._broken = True  # never got ready: the pool spawns instead
            else:
                self._recv(0.2)
        return self._ready and not self._broken

    def check(self, what: Any, stop: Any = None) -> tuple[Any] | None:
        """``(check(what),)`` computed in the zygote (whose forks then find what it imported imported), or None
        when it cannot say (dead, never ready) or ``stop`` (a ``threading.Event``) was set meanwhile."""
        if not self._wait_ready(stop):
            return None
        try:
            self.conn.send(("check", what))
        except OSError:
            self._broken = True
            return None
        while not self._broken and not (stop is not None and stop.is_set()):
            msg = self._recv(0.2)
            if msg is not None and msg[0] == "checked":
                return (msg[1],)
        return None

    def fork(self, args: tuple) -> tuple[ForkedProcess, Connection] | None:
        """A new worker and the coordinator's end of its pipe; waits for the zygote's imports the first time."""
        if not self._wait_ready():
            return None
        parent, child = self._ctx.Pipe()
        try:
            self.conn.send(("fork", args))
            reduction.send_handle(self.conn, child.fileno(), self.proc.pid)
            while True:
                msg = self._recv(READY_TIMEOUT_S)
                if msg is None:
                    self._broken = True
                    parent.close()
                    return None
                if msg[0] == "forked":
                    return ForkedProcess(msg[1], reduction.recv_handle(self.conn), self), parent
        except OSError:
            self._broken = True
            parent.close()
            return None
        finally:
            child.close()

    def exit_code(self, pid: int) -> int | None:
        """The exit code the zygote reaped for ``pid`` (it reports it as soon as the worker exits); a worker
        whose zygote is gone was killed with it."""
        deadline = time.monotonic() + EXIT_REPORT_TIMEOUT_S
        while pid not in self._exits and not self._broken and time.monotonic() < deadline:
            self._recv(max(0.0, deadline - time.monotonic()))
        if pid not in self._exits and self._broken:
            return -signal.SIGKILL
        return self._exits.pop(pid, None)

    def close(self) -> None:
        try:
            self.conn.send(("stop",))
        except OSError:
            pass
        self.proc.join(timeout=2)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)
        self.conn.close()


def _zygote_main(conn: Connection, parent_pid: int, preload: Callable[..., None], preload_args: tuple,
                 worker_main: Callable[..., None], check: Callable[[Any], Any] | None) -> None:  # fmt: skip
    """The zygote: ``preload(*preload_args)``, then fork a worker per request (and run ``check`` on what it is
    sent) until told to stop."""
    set_parent_death_signal()
    if os.getppid() != parent_pid:
        os._exit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the coordinator handles it
    preload(*preload_args)
    conn.send(("ready",))
    children: dict[int, int] = {}  # pidfd -> pid
    while True:
        for ready in wait([conn, *children]):
            if ready is conn:
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    os._exit(0)
                if msg[0] == "check" and check is not None:
                    conn.send(("checked", check(msg[1])))
                    continue
                if msg[0] != "fork":
                    os._exit(0)
                fd = reduction.recv_handle(conn)
                me = os.getpid()
                sys.stdout.flush()  # nothing buffered here is written again by every child
                sys.stderr.flush()
                with warnings.catch_warnings():  # Python 3.12+ warns of any fork with threads; the zygote's
                    warnings.simplefilter("ignore", DeprecationWarning)  # are BLAS's and arrow's idle pools
                    pid = os.fork()
                if pid == 0:
                    _child(conn, list(children), fd, (me, *msg[1]), worker_main)
                os.close(fd)
                pidfd = os.pidfd_open(pid)
                children[pidfd] = pid
                conn.send(("forked", pid))
                reduction.send_handle(conn, pidfd, parent_pid)
            else:  # a worker exited: reap it, say how
                pid = children.pop(ready)
                os.close(ready)
                _, status = os.waitpid(pid, 0)
                try:
                    conn.send(("exit", pid, os.waitstatus_to_exitcode(status)))
                except OSError:
                    os._exit(0)


def _child(
    zconn: Connection, pidfds: list[int], fd: int, args: tuple, worker_main: Callable[..., None]
) -> None:
    """In the forked worker: drop the zygote's descriptors, run ``worker_main(conn, zygote_pid, *args)``;
    never return into the zygote's loop."""
    code = 1
    try:
        set_parent_death_signal()  # the zygote's death (after the coordinator's) kills its workers
        if os.getppid() != args[0]:
            os._exit(1)
        zconn.close()
        for p in pidfds:
            os.close(p)
        worker_main(Connection(fd), *args)
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)
