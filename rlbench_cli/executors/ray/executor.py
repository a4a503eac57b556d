"""The scheduler: ``RayExecutor`` keeps one warm actor per slot busy with the queue's jobs, pulls their files
once a second, kills a job past its timeout, replaces dead actors (salvaging what they left, or retrying a
job whose node was lost), and stops them on Ctrl-C; ``create`` builds one after its checks.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ...algos.base import PRUNE_FILE
from ...errors import UsageError, error_line
from ..base import Job, OnEnd, OnStart, OnTick, Outcome, Placement, detect_gpus, usable_cores
from .actor import RlbenchWorker
from .cluster import (
    check_reachable,
    fit,
    import_ray,
    init_ray,
    kill_monitor,
    rays_own_start,
    start_local,
    too_big,
)
from .failures import death_cause, lost_cause, node_gone, says_node_died
from .transfer import KEEP_PACKED, note, receive, resume_files, salvage, write_files

STOP_GRACE_S = 5.0
POLL_TIMEOUT_S = 5.0
PULL_EVERY_S = 1.0  # running jobs' new shards are pulled this often (on_tick may come more often)


@dataclass
class _Slot:
    index: int
    actor: Any = None
    ready_ref: Any = None
    info: dict[str, Any] | None = None
    job: Job | None = None
    run_ref: Any = None
    started: float = 0.0
    remote_folders: list[str] | None = None  # the job's node-local attempt folders, on the actor's node
    job_name: str = ""  # <suite>/<run_id>/attempt-N: the job's (first run's) folder under the actor's root
    names: list[str] = field(default_factory=list)  # every run's folder under the actor's root
    signalled: set[str] = field(default_factory=set)  # runs whose PRUNE file went to the actor


class RayExecutor:
    """Runs jobs on ``n_actors`` warm Ray actors.

    Args:
        address: the cluster (auto | HOST:PORT | ray://HOST:PORT), or None to start a local Ray instance for
            the duration of ``run`` (with ``local_cpus`` CPUs and ``local_gpus`` GPUs).
        n_actors: parallel runs.
        cpus, gpus: what each actor reserves (``resources.cpus_per_job`` / ``gpus_per_job``).
        threads: torch threads per actor.
        timeout: seconds a job may run before its actor is killed (None: no limit).
        connected: whether ``create`` already connected this process to ``address``.
    """

    name = "ray"

    def __init__(self, address: str | None, n_actors: int, cpus: float, gpus: float, threads: int,
                 timeout: float | None = None, local_cpus: int = 1, local_gpus: int = 0,
                 connected: bool = False) -> None:  # fmt: skip
        self.address = address
        self._gcs: str | None = None  # the address of the cluster connected to, once connected
        self.n_actors = n_actors
        self.cpus = cpus
        self.gpus = gpus
        self.threads = threads
        self.timeout = timeout
        self.local_cpus = local_cpus
        self.local_gpus = local_gpus
        self._connected = connected
        self._started_local = False
        self._actor_cls: Any = None
        self._spawn_failures = 0
        self._ray: Any = None  # the ray module once connected (``start``)
        self._preload_torch = True
        self.slots: list[_Slot] = []

    def describe(self) -> str:
        where = f"the Ray cluster at {self.address}" if self.address else "a local Ray instance"
        if self.address and self._gcs and self._gcs != self.address:  # --address auto: which cluster it found
            where += f" ({self._gcs})"
        gpu = f", {self.gpus:g} GPU" if self.gpus else ""
        return (f"{self.n_actors} Ray actors on {where} ({self.cpus:g} CPU{gpu} each), "
                f"{self.threads} torch thread(s) each")  # fmt: skip

    # -- cluster and actors ---------------------------------------------------------------------------
    def _connect(self) -> Any:
        ray = import_ray()
        if not ray.is_initialized():
            if self.address:
                init_ray(ray, self.address)
            else:
                start_local(ray, self.local_cpus, self.local_gpus)
                self._started_local = True
        # On rlbench's own instance the actors' calls record no task events (for Ray's state API and dashboard,
        # which nothing there reads; they cost the actor, the driver and the GCS CPU on every call); a
        # cluster's dashboard shows them.
        lean = self._started_local and not rays_own_start()
        remote = ray.remote(max_concurrency=4, num_cpus=self.cpus, num_gpus=self.gpus or None, max_restarts=0,
                            enable_task_events=not lean)  # fmt: skip
        self._actor_cls = remote(RlbenchWorker)
        try:
            self._gcs = ray.get_runtime_context().gcs_address
        except Exception:  # noqa: BLE001 - only said in the run's first lines
            self._gcs = None
        return ray

    def _spawn(self, slot: _Slot) -> None:
        env = {k: v for k, v in os.environ.items() if k.startswith("RLBENCH_")}
        slot.actor = self._actor_cls.remote(self.threads, env, os.getcwd(), self._preload_torch)
        slot.ready_ref, slot.info, slot.job, slot.run_ref = slot.actor.where.remote(), None, None, None

    def _kill(self, ray: Any, slot: _Slot) -> None:
        if slot.actor is not None:
            try:
                ray.kill(slot.actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        slot.actor = slot.ready_ref = slot.info = slot.run_ref = None

    def start(self, n_jobs: int | None = None, preload_torch: bool = True) -> Any:
        """Connect (or start the local Ray instance) and start the actors, which import torch meanwhile
        (``preload_torch=False``: no run of these jobs uses it, ``runner.uses_torch``); ``run`` does it if not
        yet done. Returns the ray module."""
        if self._ray is None:
            self._preload_torch = preload_torch
            self._ray = self._connect()
            self.slots = [_Slot(i) for i in range(max(1, min(self.n_actors, n_jobs or self.n_actors)))]
            for s in self.slots:
                self._spawn(s)
        return self._ray

    def close(self) -> None:
        """Kill the actors and disconnect (also when ``run`` was never called)."""
        if self._ray is not None:
            self._shutdown(self._ray)

    def _shutdown(self, ray: Any) -> None:
        self._ray = None
        for s in self.slots:
            self._kill(ray, s)
        if self._started_local:
            kill_monitor(ray)
        if self._started_local or self._connected or self.address:
            ray.shutdown()  # disconnect (and stop the local instance when this process started it)

    def _placement(self, s: _Slot) -> Placement:
        info = s.info or {}
        job_id = f"{str(info.get('actor_id', ''))[:8]}@{str(info.get('node_id', ''))[:8]}"
        host = info.get("host") or info.get("ip") or "?"
        return Placement(info.get("device", "cpu"), host, self.name, job_id)

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
        """Run every job on warm actors; see the package's docstring and ``Executor``."""
        ray = self.start(len(jobs))
        queue: deque[Job] = deque(jobs)
        last_tick = last_pull = time.monotonic()
        try:
            while queue or any(s.job for s in self.slots):
                if stop is not None and stop.is_set():
                    raise KeyboardInterrupt
                for s in self.slots:
                    if s.info is not None and s.job is None and queue:
                        job = queue.popleft()
                        s.job, s.started = job, time.monotonic()
                        for m in job.members:
                            m.folder.mkdir(parents=True, exist_ok=True)
                        on_start(job, self._placement(s))
                        names = [f"{m.spec.suite}/{m.spec.run_id}/{m.folder.name}" for m in job.members]
                        carry = [resume_files(m, every_checkpoint=bool(job.pack)) for m in job.members]
                        if job.pack:
                            s.run_ref = s.actor.run.remote([m.spec for m in job.pack], names, carry)
                        else:
                            s.run_ref = s.actor.run.remote(job.spec, names[0], carry)
                        s.job_name, s.names, s.signalled = names[0], names, set()
                        s.remote_folders = [f"{(s.info or {}).get('root')}/{n}" for n in names]
                pending = {s.run_ref: s for s in self.slots if s.run_ref is not None}
                pending.update(
                    {s.ready_ref: s for s in self.slots if s.info is None and s.ready_ref is not None}
                )
                if pending:
                    refs = list(pending)
                    until_tick = max(0.0, tick_every - (time.monotonic() - last_tick))
                    ray.wait(refs, num_returns=1, timeout=min(0.5, until_tick))
                    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
                    for ref in ready:
                        s = pending[ref]
                        if ref is s.ready_ref:
                            self._on_ready(ray, s)
                        else:
                            self._on_result(ray, s, queue, on_end)
                for s in self.slots:
                    if s.job is not None and self.timeout and time.monotonic() - s.started > self.timeout:
                        self._pull(ray, [s])
                        node = (s.info or {}).get("node_id")  # _kill forgets the actor's info, not its job
                        self._kill(ray, s)
                        # its output.log (where it hung) and what it flushed since the pull, as local keeps them
                        salvage(ray, [(s.job, node, s.remote_folders)])
                        self._finish(s, queue, on_end, Outcome(
                            "failed", None, f"timeout: killed after {self.timeout:g}s (--timeout / budget.timeout)",
                            time.monotonic() - s.started))  # fmt: skip
                        self._spawn(s)
                if time.monotonic() - last_tick >= tick_every:
                    busy = [s for s in self.slots if s.job is not None]
                    if time.monotonic() - last_pull >= PULL_EVERY_S:  # a round trip per actor: once a second
                        self._pull(ray, busy)
                        last_pull = time.monotonic()
                    on_tick([s.job for s in busy if s.job is not None])
                    self._signal(busy)
                    last_tick = time.monotonic()
        except KeyboardInterrupt:
            self._interrupt(ray, on_end)
            raise
        finally:
            self._shutdown(ray)

    def _on_ready(self, ray: Any, s: _Slot) -> None:
        try:
            s.info = ray.get(s.ready_ref)
            self._spawn_failures = 0
        except Exception as e:  # noqa: BLE001 - the actor could not start on its node
            self._spawn_failures += 1
            if self._spawn_failures > 3 * len(self.slots):
                first = error_line(e, last=True)
                raise RuntimeError(f"Ray actors keep failing to start ({first}); is rlbench-cli installed on "
                                   "every node, in the same Python environment?") from None  # fmt: skip
            self._kill(ray, s)
            self._spawn(s)

    def _on_result(self, ray: Any, s: _Slot, queue: deque[Job], on_end: OnEnd) -> None:
        assert s.job is not None
        try:
            reply = ray.get(s.run_ref)
        except ray.exceptions.RayActorError as e:  # the actor died under the job
            info = s.info
            node = (info or {}).get("node_id")
            lost = says_node_died(e) or node_gone(ray, node)
            self._kill(ray, s)
            if lost:  # nothing to salvage on a node that is gone; a retry that is not the run's fault
                cause, code, result = lost_cause(e, info), None, {"node_lost": node or "?"}
                for m in s.job.members:
                    note(m.folder / "output.log", cause)
                for other in self.slots:  # idle actors on that node are gone too: replace them now, or the
                    if other is not s and other.job is None and (other.info or {}).get("node_id") == node:
                        self._kill(ray, other)  # retry lands on one of them and is lost a second time
                        self._spawn(other)
            else:
                salvage(ray, [(s.job, node, s.remote_folders)])
                (cause, code), result = death_cause(e, s.job.folder / "output.log"), {}
            self._finish(
                s, queue, on_end, Outcome("failed", code, cause, time.monotonic() - s.started, result)
            )
            self._spawn(s)
            return
        except Exception as e:  # noqa: BLE001 - Ray could not run the task (it did not reach run_one)
            s.run_ref = None
            lines = str(e).strip().splitlines()
            self._finish(s, queue, on_end, Outcome("failed", None, f"Ray task failed: {lines[-1] if lines else e}",
                                                   time.monotonic() - s.started))  # fmt: skip
            return
        s.run_ref = None
        receive(s.job, reply)
        r = reply["result"]
        self._finish(s, queue, on_end, Outcome(r["status"], r.get("exit_code"), r.get("error"),
                                               r.get("duration_s", 0.0), r))  # fmt: skip
        if r.get("restart_worker"):  # the job left its actor unfit for another (a wedged JAX runtime)
            self._kill(ray, s)
            self._spawn(s)

    def _pull(self, ray: Any, slots: list[_Slot], log: bool = False) -> None:
        """Copy the shards these slots' jobs flushed since the last pull into their attempt folders (``log``:
        with their output so far, before the jobs are killed)."""
        asks = [(s, s.actor.poll.remote(log)) for s in slots if s.actor is not None and s.job is not None]
        if not asks:
            return
        ray.wait([ref for _, ref in asks], num_returns=len(asks), timeout=POLL_TIMEOUT_S)
        for s, ref in asks:
            try:
                files = ray.get(ref, timeout=0)
            except Exception:  # noqa: BLE001 - dead or busy actor: its run reference tells what happened
                continue
            if s.job is not None:
                for m, got in zip(s.job.members, files):
                    write_files(m.folder, got, keep=KEEP_PACKED if s.job.pack else 1)

    def _signal(self, slots: list[_Slot]) -> None:
        """A ``PRUNE`` file that ``rlbench tune``'s pruner (``on_tick``) wrote into a running job's attempt
        folder on this side goes to its actor, into the run's node-local folder, where the run looks for it:
        pruning works on Ray as it does locally, from the evaluations the pulls brought in."""
        for s in slots:
            if s.job is None or s.actor is None:
                continue
            for m, name in zip(s.job.members, s.names):
                marker = m.folder / PRUNE_FILE
                if name not in s.signalled and marker.is_file():
                    s.actor.signal.remote(name, PRUNE_FILE, marker.read_bytes())
                    s.signalled.add(name)

    def _finish(self, s: _Slot, queue: deque[Job], on_end: OnEnd, outcome: Outcome) -> None:
        job, s.job, s.run_ref = s.job, None, None
        assert job is not None
        again = on_end(job, outcome)
        if again is not None:
            queue.append(again)

    def _interrupt(self, ray: Any, on_end: OnEnd) -> None:
        busy = [s for s in self.slots if s.job is not None and s.run_ref is not None]
        for s in busy:
            try:
                s.actor.stop.remote(s.job_name)
            except Exception:  # noqa: BLE001
                pass
        deadline = time.monotonic() + STOP_GRACE_S
        died: list[tuple[_Slot, Job]] = []  # the slot keeps its actor's node and folders: it is not killed
        while any(s.job for s in busy) and time.monotonic() < deadline:
            pending = {s.run_ref: s for s in busy if s.job is not None}
            ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0.2)
            for ref in ready:
                s = pending[ref]
                job, s.job = s.job, None
                assert job is not None
                try:
                    reply = ray.get(ref)
                except Exception:  # noqa: BLE001 - the actor (or the local Ray instance) died while stopping
                    died.append((s, job))
                    continue
                receive(job, reply)
                r = reply["result"]
                status = "finished" if r["status"] == "finished" else "interrupted"
                on_end(job, Outcome(status, r.get("exit_code"), r.get("error"), r.get("duration_s", 0.0), r))
        deaf = [s for s in self.slots if s.job is not None]  # did not stop when asked
        self._pull(ray, deaf, log=True)  # what they flushed and printed, in one round trip for all of them
        for s in deaf:
            self._kill(ray, s)
            job, s.job = s.job, None
            assert job is not None
            on_end(job, Outcome("interrupted", None, f"interrupted: killed after {STOP_GRACE_S:g}s",
                                time.monotonic() - s.started))  # fmt: skip
        # an actor that died while stopping left its last shards, output.log and checkpoint on its node, as
        # the local pool's worker leaves them on disk: fetched for all of them at once
        dead = [(job, (s.info or {}).get("node_id"), s.remote_folders) for s, job in died]
        salvage(ray, dead)  # as long as for a crash: a new worker for the task can be slow on a busy node
        for s, job in died:
            on_end(job, Outcome("interrupted", None, "interrupted", time.monotonic() - s.started))


def create(suite: Any, n_jobs: int, workers: int | None, timeout: float | None,
           options: dict[str, Any]) -> RayExecutor:  # fmt: skip
    """A RayExecutor for ``n_jobs`` runs of ``suite``, after checking (before anything is recorded) that Ray is
    installed, the cluster answers and some node can hold one run. Raises UsageError naming the fix."""
    res = suite.resources
    address = options.get("address") or res.ray.address
    gpus = float(res.gpus_per_job)
    cpus = float(res.cpus_per_job or res.threads_per_job or 1)
    threads = res.threads_per_job or max(1, math.floor(cpus))
    if gpus > 1 and not float(gpus).is_integer():
        raise UsageError(f"resources.gpus_per_job={gpus:g}: Ray shares a GPU only below 1; use a fraction "
                         "(0.5, 0.25) or a whole number of GPUs")  # fmt: skip
    ray = import_ray()
    if address:
        check_reachable(address)
        init_ray(ray, address)
        nodes = [{k: float(v) for k, v in n["Resources"].items()} for n in ray.nodes() if n.get("Alive")]
        where = f"the Ray cluster at {address}"
        local_cpus, local_gpus = 0, 0
    else:
        local_cpus, local_gpus = usable_cores(), detect_gpus()
        nodes = [{"CPU": float(local_cpus), "GPU": float(local_gpus)}]
        where = "this machine (a local Ray instance; pass --address to use a cluster)"
    capacity = sum(fit(n, cpus, gpus) for n in nodes)
    if capacity < 1:
        if address:
            ray.shutdown()
        raise too_big(cpus, gpus, where, nodes)
    n_actors = max(1, min(workers or capacity, n_jobs))
    return RayExecutor(address, n_actors, cpus, gpus, threads, timeout, local_cpus, local_gpus,
                       connected=bool(address))  # fmt: skip
