"""Local executor: a pool of persistent worker processes on this machine.

Each worker imports torch once (not at all when no run uses it) and then runs job after job, so the per-job
start-up cost is near zero. A pool on the CPU (Linux) forks its workers from a zygote that did those imports
once for all of them (``zygote.py``), also the worker that replaces one that died; a GPU pool spawns each.
A job that raises is reported by its worker, which carries on. A worker that dies (segfault, SIGKILL from the
out-of-memory killer) or overruns its timeout is replaced, and its job is reported failed with the cause.
Workers ignore SIGINT: on Ctrl-C the coordinator asks them to stop (SIGTERM sets their stop flag, so the run
flushes its metrics and ends as 'interrupted'), waits a few seconds, then kills what is left.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from ..packed import run_job
from . import zygote
from .base import (
    Job,
    OnEnd,
    OnStart,
    OnTick,
    Outcome,
    Placement,
    detect_gpus,
    hostname,
    output_to,
    plan_devices,
    preload_worker,
    set_parent_death_signal,
    signal_name,
    usable_cores,
)

__all__ = ["LocalExecutor", "create"]

STOP_GRACE_S = 5.0


def _worker_main(
    conn: Any,
    parent_pid: int,
    cuda_visible: str | None,
    device: str,
    threads: int,
    preload_torch: bool = True,
    env: dict[str, str] | None = None,
) -> None:
    set_parent_death_signal()
    if os.getppid() != parent_pid:  # parent already gone before prctl took effect
        os._exit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if cuda_visible is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = cuda_visible
    os.environ.update(env or {})  # e.g. the CUDA MPS daemon to connect to (before CUDA is initialised)
    preload_worker(threads, preload_torch)  # nothing left to import in a worker forked from the zygote
    if preload_torch:
        import torch

        from ..runner import configure_torch

        configure_torch(torch)

    conn.send(("ready", os.getpid()))
    while not stop.is_set():
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            break
        if msg[0] == "check":  # the params of the runs about to be recorded (LocalExecutor.check)
            conn.send(("checked", _check_params(msg[1])))
            continue
        if msg[0] != "job":
            break
        spec, folder = msg[1], msg[2]
        folders = [Path(f) for f in folder] if isinstance(folder, list) else [Path(folder)]
        for f in folders:
            f.mkdir(parents=True, exist_ok=True)
        specs = spec if isinstance(spec, list) else [spec]  # a list: a pack (resources.seeds_per_job)
        with output_to(folders[0] / "output.log"):
            result = run_job(specs, folders, device=device, stop_event=stop)
        try:
            conn.send(("done", result))
        except (BrokenPipeError, OSError):
            break
        if result.get("restart_worker"):  # a wedged JAX runtime: the pool starts a fresh worker instead
            break
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # nothing left to save: skip the interpreter's teardown of torch & co. (~1 s under load)


def _check_params(specs: list[Any]) -> str | None:
    """``algos.first_refusal(specs)`` here, where the runs will import the adapters anyway; what the imports
    print (library warnings) goes nowhere rather than onto the coordinator's terminal."""
    from ..algos import first_refusal

    with output_to(os.devnull):
        return first_refusal(specs)


@dataclass
class _Slot:
    index: int
    cuda_visible: str | None
    device: str
    proc: Any = None
    conn: Any = None
    job: Job | None = None
    started: float = 0.0
    ready: bool = False


class LocalExecutor:
    """Runs jobs on ``len(devices)`` worker processes on this machine (the default executor).

    Args:
        devices: one (CUDA_VISIBLE_DEVICES, torch device) pair per worker, from ``plan_devices``.
        threads: torch threads per worker.
        timeout: seconds a job may run before it is killed (None: no limit).
        mps: a CUDA MPS daemon (``rlbench_cli.mps``) that ``start`` starts before the workers, which connect
            to it, and ``close`` stops after them; ``mps_note``: what ``describe`` says of MPS.
    """

    def __init__(self, devices: list[tuple[str | None, str]], threads: int = 1, timeout: float | None = None,
                 poll: float = 0.5, mps: Any = None, mps_note: str = ""):  # fmt: skip
        self.slots = [_Slot(i, cv, dev) for i, (cv, dev) in enumerate(devices)]
        self.mps, self.mps_note = mps, mps_note
        self.threads = threads
        self.timeout = timeout
        self.poll = poll
        self._ctx = mp.get_context("spawn")
        self._spawn_failures = 0
        self._host = hostname()
        self._started = False
        self._preload_torch = True
        self._zygote: zygote.Zygote | None = None

    name = "local"

    def describe(self) -> str:
        devices = ", ".join(sorted({s.device for s in self.slots}))
        return f"{len(self.slots)} local workers on {devices}, {self.threads} torch thread(s) each{self.mps_note}"

    # -- worker management --------------------------------------------------------------------------
    def _spawn(self, slot: _Slot) -> None:
        """Start ``slot``'s worker: forked from the zygote where the pool has one, else a fresh process."""
        if slot.proc is not None:
            try:
                slot.proc.close()  # the one it replaces: dead or killed
            except ValueError:  # a spawned process that outlived its kill: the OS reaps it
                pass
        args = (slot.cuda_visible, slot.device, self.threads, self._preload_torch,
                self.mps.env if self.mps is not None else {})  # fmt: skip
        forked = self._zygote.fork(args) if self._zygote is not None else None
        if forked is not None:
            slot.proc, parent = forked
        else:
            parent, child = self._ctx.Pipe()
            proc = self._ctx.Process(target=_worker_main, args=(child, os.getpid(), *args),
                                     name=f"rlbench-worker-{slot.index}", daemon=True)  # fmt: skip
            proc.start()
            child.close()
            slot.proc = proc
        slot.conn, slot.job, slot.ready = parent, None, False

    def _kill(self, slot: _Slot) -> None:
        if slot.proc is not None and slot.proc.is_alive():
            slot.proc.kill()
        if slot.proc is not None:
            slot.proc.join(timeout=5)

    def start(self, preload_torch: bool = True) -> None:
        """Start the worker processes (their imports run meanwhile); ``run`` starts them if not yet done.
        ``preload_torch=False``: no run of these jobs uses torch (``runner.uses_torch``), so workers skip it.
        A CPU pool starts its zygote here and forks the workers after ``check`` (or in ``run``), so that they
        find the adapters the check imported already imported."""
        if not self._started:
            self._preload_torch = preload_torch
            if self.mps is not None:  # before the workers, which connect to it when they first use CUDA
                how = "started" if self.mps.start() else "left by an earlier run"
                self.mps_note = f", under CUDA MPS (a daemon {how} in {self.mps.folder})"
            if zygote.usable([s.device for s in self.slots]):  # one import of torch & co. for the pool
                self._zygote = zygote.Zygote(
                    self._ctx, preload_worker, (self.threads, preload_torch), _worker_main, _check_params
                )
            else:
                self._spawn_missing()
            self._started = True

    def _spawn_missing(self) -> None:
        for s in self.slots:
            if s.proc is None:
                self._spawn(s)

    def check(self, specs: list[Any], stop: threading.Event | None = None) -> str | None:
        """``algos.first_refusal(specs)`` in the zygote, or else the first worker ready (either imports the
        runs' adapters for them anyway, so the check costs this process no import): the first refusal, or
        None. In this process when every worker died first; None when ``stop`` is set meanwhile (the run then
        stops as it starts)."""
        self.start()
        if self._zygote is not None:
            checked = self._zygote.check(specs, stop)
            if stop is not None and stop.is_set():
                return None
            if checked is not None and checked[0] is not None:
                return checked[0]
            self._spawn_missing()  # forked now, finding the adapters imported (or spawned: no zygote)
            if checked is not None:
                return None
        asked: _Slot | None = None
        while True:
            if stop is not None and stop.is_set():
                return None
            if asked is None:
                asked = next((s for s in self.slots if s.ready and s.job is None), None)
                if asked is not None:
                    try:
                        asked.conn.send(("check", specs))
                    except OSError:  # it died since it said it was ready: the check below sees that
                        pass
            alive = [s for s in self.slots if s.proc.is_alive()]
            if asked is not None and asked not in alive or not alive:
                from ..algos import first_refusal

                return first_refusal(specs)  # run() reports and replaces the dead workers
            ready = set(wait([s.conn for s in alive] + [s.proc.sentinel for s in alive], timeout=self.poll))
            for s in alive:
                if s.conn not in ready:
                    continue
                try:
                    msg = s.conn.recv()
                except (EOFError, OSError):
                    continue  # its sentinel reports the death
                if msg[0] == "ready":
                    self._ready(s)
                elif msg[0] == "checked" and s is asked:
                    return msg[1]

    def close(self) -> None:
        """Stop the workers (also when ``run`` was never called), then the MPS daemon they used."""
        if self._started:
            self._shutdown()
        if self.mps is not None:
            self.mps.stop()

    def _shutdown(self) -> None:
        self._started = False
        for s in self.slots:
            if s.conn is not None:
                try:
                    s.conn.send(("stop",))
                except (BrokenPipeError, OSError):
                    pass
        deadline = time.monotonic() + 2
        for s in self.slots:
            if s.proc is not None:
                s.proc.join(timeout=max(0.0, deadline - time.monotonic()))
                self._kill(s)
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None

    # -- the loop -------------------------------------------------------------------------------------
    def run(
        self,
        jobs: list[Job],
        on_start: OnStart,
        on_end: OnEnd,
        on_tick: OnTick = lambda running: None,
        tick_every: float = 1.0,
        stop: threading.Event | None = None,
    ) -> None:
        """Run every job; ``on_end`` may return a job to queue again (a retry). Raises KeyboardInterrupt
        after stopping the workers if interrupted, or once ``stop`` is set (checked twice a second, so a
        signal handler only sets it and never interrupts a database write half way)."""
        queue: deque[Job] = deque(jobs)
        self.start()
        self._spawn_missing()
        last_tick = time.monotonic()
        try:
            while queue or any(s.job for s in self.slots):
                if stop is not None and stop.is_set():  # Ctrl-C / SIGTERM, acted on between DB writes
                    raise KeyboardInterrupt
                for s in self.slots:
                    if s.ready and s.job is None and queue:
                        job = queue.popleft()
                        s.job, s.started = job, time.monotonic()
                        for m in job.members:
                            m.folder.mkdir(parents=True, exist_ok=True)
                        on_start(job, Placement(s.device, self._host, self.name, str(s.proc.pid)))
                        msg = (
                            ("job", [m.spec for m in job.pack], [str(m.folder) for m in job.pack])
                            if job.pack
                            else ("job", job.spec, str(job.folder))
                        )
                        try:
                            s.conn.send(msg)
                        except OSError:  # it died since it said it was ready: its sentinel reports the job
                            pass
                waitables = [s.conn for s in self.slots] + [s.proc.sentinel for s in self.slots]
                # woken by a message or a death at once; the timeout only paces ticks, timeouts and `stop`
                until_tick = max(0.0, tick_every - (time.monotonic() - last_tick))
                ready = set(wait(waitables, timeout=min(self.poll, until_tick)))
                for s in self.slots:
                    if s.conn in ready:
                        self._receive(s, queue, on_end)
                for s in self.slots:
                    if s.proc.sentinel in ready and not s.proc.is_alive():
                        self._died(s, queue, on_end)
                    elif s.job is not None and self.timeout and time.monotonic() - s.started > self.timeout:
                        self._kill(s)
                        self._finish(s, queue, on_end, Outcome(
                            "failed", None, f"timeout: killed after {self.timeout:g}s (--timeout / budget.timeout)",
                            time.monotonic() - s.started))  # fmt: skip
                        self._spawn(s)
                if time.monotonic() - last_tick >= tick_every:
                    on_tick([s.job for s in self.slots if s.job is not None])
                    last_tick = time.monotonic()
        except KeyboardInterrupt:
            self._interrupt(on_end)
            raise
        finally:
            self._shutdown()

    def _receive(self, s: _Slot, queue: deque[Job], on_end: OnEnd) -> None:
        try:
            msg = s.conn.recv()
        except (EOFError, OSError):
            return  # the sentinel will report the death
        if msg[0] == "ready":
            self._ready(s)
        elif msg[0] == "done" and s.job is not None:
            r = msg[1]
            self._finish(s, queue, on_end, Outcome(r["status"], r.get("exit_code"), r.get("error"),
                                                   r.get("duration_s", 0.0), r))  # fmt: skip
            if r.get("restart_worker"):  # it ends itself (a wedged JAX runtime): a fresh one takes the next
                self._kill(s)
                self._spawn(s)

    def _ready(self, s: _Slot) -> None:
        """A worker said it is ready (its imports done): it may take a job, and spawning works again."""
        s.ready = True
        self._spawn_failures = 0

    def _died(self, s: _Slot, queue: deque[Job], on_end: OnEnd) -> None:
        code = s.proc.exitcode
        if s.job is not None:
            if code is not None and code < 0:
                cause = f"worker killed by {signal_name(-code)}"
                if -code == signal.SIGKILL:
                    cause += " (out of memory, or killed by hand?)"
                elif -code == signal.SIGSEGV:
                    cause += " (segmentation fault in native code)"
            else:
                cause = f"worker exited with code {code}"
            self._finish(s, queue, on_end, Outcome("failed", code, cause, time.monotonic() - s.started))
        else:
            self._spawn_failures += 1
            if self._spawn_failures > 3 * len(self.slots):
                raise RuntimeError(f"worker processes keep dying at start-up (exit code {code})")
        self._spawn(s)

    def _finish(self, s: _Slot, queue: deque[Job], on_end: OnEnd,
                outcome: Outcome) -> None:  # fmt: skip
        job, s.job = s.job, None
        assert job is not None
        again = on_end(job, outcome)
        if again is not None:
            queue.append(again)

    def _interrupt(self, on_end: OnEnd) -> None:
        busy = [s for s in self.slots if s.job is not None]
        for s in busy:
            if s.proc.is_alive():
                s.proc.terminate()
        deadline = time.monotonic() + STOP_GRACE_S
        while any(s.job for s in busy) and time.monotonic() < deadline:
            ready = set(wait([s.conn for s in busy if s.job] + [s.proc.sentinel for s in busy if s.job],
                             timeout=0.2))  # fmt: skip
            for s in busy:
                if s.job is not None and s.conn in ready:
                    try:
                        msg = s.conn.recv()
                    except (EOFError, OSError):
                        msg = None
                    if msg and msg[0] == "done":
                        r = msg[1]
                        status = "interrupted" if r["status"] != "finished" else "finished"
                        job, s.job = s.job, None
                        on_end(
                            job,
                            Outcome(status, r.get("exit_code"), r.get("error"), r.get("duration_s", 0), r),
                        )
                elif s.job is not None and s.proc.sentinel in ready:
                    job, s.job = s.job, None
                    on_end(job, Outcome("interrupted", None, "interrupted", time.monotonic() - s.started))
        for s in busy:
            if s.job is not None:
                self._kill(s)
                job, s.job = s.job, None
                on_end(job, Outcome("interrupted", None, f"interrupted: killed after {STOP_GRACE_S:g}s",
                                    time.monotonic() - s.started))  # fmt: skip


def create(suite: Any, n_jobs: int, workers: int | None, timeout: float | None,
           options: dict[str, Any]) -> LocalExecutor:  # fmt: skip
    """A LocalExecutor for ``n_jobs`` runs of ``suite``: ``workers`` processes (default: the usable cores),
    at most one per job, each with its device from ``plan_devices``; ``options["mps"]``: under CUDA MPS,
    the daemon of the suite's runs on the store ``options["db"]``."""
    res = suite.resources
    cores = usable_cores()
    n_workers = max(1, min(workers or cores, n_jobs))
    devices = plan_devices(detect_gpus(), res.gpus_per_job, n_workers)
    threads = res.threads_per_job or max(1, cores // len(devices))
    daemon, note = _mps(bool(options.get("mps")), devices, options.get("db"), suite.name)
    return LocalExecutor(devices, threads=threads, timeout=timeout, mps=daemon, mps_note=note)


def _mps(wanted: bool, devices: list[tuple[str | None, str]], db: str | None, suite: str) -> tuple[Any, str]:
    """The local pool's CUDA MPS: the daemon of ``suite``'s runs on the store to start (or None) and what
    ``describe`` says of it. Without MPS, a daemon a killed coordinator of the suite left there is stopped
    (never one of another suite's coordinator, which may be running)."""
    from .. import mps

    where = Path(db) if db else Path.cwd() / "rlbench.duckdb"
    if not wanted:
        mps.stop_left_behind(where, suite)
        return None, ""
    mps.require_control()  # asked for: its absence is an error even where no run uses a GPU
    if all(dev == "cpu" for _, dev in devices):
        return None, ", no CUDA MPS (no run uses a GPU here)"
    theirs = mps.user_daemon()
    if theirs is not None:
        return None, f", under the CUDA MPS daemon already running ({theirs})"
    return mps.store_daemon(where, suite), ""
