"""Ray executor: warm worker actors on a Ray cluster (``--executor ray [--address ...]``).

Each actor imports torch once (not at all when no run uses it) and then runs job after job (``run_one``), as a
local worker does. It reserves
``resources.cpus_per_job`` CPUs and ``resources.gpus_per_job`` GPUs for its lifetime, so Ray packs actors on
nodes (0.25 GPU: four actors share a GPU) and sets CUDA_VISIBLE_DEVICES to the GPU each one got.

Metric shards travel through Ray, never through a shared filesystem: an actor always runs its job in a
node-local temporary folder, and the coordinator pulls the shards it has not seen yet (``poll``) at least once
a second, plus the last ones with the result, writing them into ``job.folder`` on the coordinator's machine
under the same names. So ingestion is the same as for local runs, and works across machines. Checkpoints
(``budget.checkpoint_every``) travel the same way: the latest one a run saved comes back with its shards into
the run folder on the coordinator's side (``<run_id>/checkpoint/``, read before the shards are listed, so it
never arrives without the rows it continues), and an attempt that resumes is sent that checkpoint and its
earlier attempts' shards, so it goes on from there on whichever node it lands. ``resources.seeds_per_job``
packs seeds into one actor call (``packed.run_packed``), each seed still its own run and folder.

Faults: a job that raises is reported by its actor; an actor that dies (segfault, out-of-memory kill) makes
the job ``failed`` with the cause, and a fresh actor takes its place; a job past its timeout has its actor
killed. An actor lost with its node (Ray says the node died, the GCS lists it dead, or its raylet's port no
longer answers) ends the attempt ``failed`` with the cause ``node lost: Ray node <id> at <ip> ...`` (also
noted at the end of the attempt's ``output.log``) and ``result["node_lost"]`` set: the coordinator runs it
again as a new attempt on a surviving node (from its checkpoint, when it sent one) without counting it
against ``--retries``, at most ``NODE_LOSS_RETRIES`` times per run. On Ctrl-C the actors are asked to stop
(the run flushes and ends ``interrupted``), given a few seconds, then killed, after their new shards and
their ``output.log`` so far have come over. ``import ray`` happens here only, never when rlbench itself is
imported.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..packed import run_job
from .base import (
    Job,
    OnEnd,
    OnStart,
    OnTick,
    Outcome,
    Placement,
    detect_gpus,
    output_to,
    preload_worker,
    usable_cores,
)

__all__ = ["RayExecutor", "create", "RAY_ENV"]

# Without these a driver may hang (Ray rewrites 127.0.0.1 to another address, or turns token auth on after
# a local ray.init wrote ~/.ray/auth_token); set before the first `import ray`, unless the user set them.
RAY_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_AUTH_MODE": "disabled",
}
INSTALL_HINT = 'pip install "rlbench-cli[ray]"'
CONNECT_TIMEOUT_S = 3.0  # TCP check of --address
INIT_TIMEOUT_S = 30.0  # ray.init once the port answers
STOP_GRACE_S = 5.0
POLL_TIMEOUT_S = 5.0
PULL_EVERY_S = 1.0  # running jobs' new shards are pulled this often (on_tick may come more often)
KEEP_PACKED = 2  # checkpoints kept per run of a packed job on the coordinator's machine (see _write_files)
SALVAGE_TIMEOUT_S = (
    30.0  # fetching what a dead actor left on its node (a new worker process, slow on a busy node)
)
SALVAGE_ON_STOP_S = 10.0  # the same for actors that died while stopping on Ctrl-C, which should not wait long
# a dead actor's node-local folder is left this long for the coordinator's salvage (which gives up after
# SALVAGE_TIMEOUT_S) before a later actor on the node removes it
ORPHAN_AGE_S = 10 * SALVAGE_TIMEOUT_S
MAX_LOG_BYTES = 1 << 20  # output.log comes back whole up to this size, else its tail


def _import_ray() -> Any:
    for key, value in RAY_ENV.items():
        os.environ.setdefault(key, value)
    try:
        import ray
    except ImportError:
        raise UsageError(
            f"--executor ray needs Ray, which is not installed here; install it: {INSTALL_HINT}"
        ) from None
    return ray


# -- the actor ------------------------------------------------------------------------------------------
class RlbenchWorker:
    """One warm worker on a Ray node (wrapped by ``ray.remote`` in ``RayExecutor``; threaded, so ``poll``
    and ``stop`` are served while ``run`` trains).

    Args:
        threads: torch threads.
        env: RLBENCH_* variables of the coordinator, set here too.
        cwd: the coordinator's working directory; used when it exists on this node (same machine or a shared
            filesystem), so entrypoints and scripts named relative to it resolve as they do locally.
    """

    def __init__(self, threads: int, env: dict[str, str], cwd: str, preload_torch: bool = True) -> None:
        import ray

        os.environ.update(env)
        if os.path.isdir(cwd):
            os.chdir(cwd)
        # torch once per actor, not once per job (or not at all when no run uses it, unless a GPU is to be checked)
        preload_worker(threads, preload_torch=False)

        ctx = ray.get_runtime_context()
        gpus = ray.get_gpu_ids()
        self.device = "cpu"
        if gpus or preload_torch:
            import torch

            from ..runner import configure_torch

            configure_torch(torch)
            # A GPU Ray assigned but torch cannot use (declared with --num-gpus, no CUDA here): run on the CPU.
            self.device = "cuda:0" if gpus and torch.cuda.is_available() else "cpu"
        self.info = {
            "host": socket.gethostname(),
            "ip": ray.util.get_node_ip_address(),
            "node_id": ctx.get_node_id(),
            "actor_id": ctx.get_actor_id(),
            "pid": os.getpid(),
            "device": self.device,
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        }
        self.root = _actor_root()  # node-local, whatever the cluster shares
        self.info["root"] = str(self.root)
        self.stop_event = threading.Event()
        self.stopped: set[str] = set()  # jobs asked to stop, even before their run() began
        self.lock = threading.Lock()
        self.folders: list[Path] = []  # the running job's attempt folders (several for a pack of seeds)
        self.sent: list[set[str]] = []

    def where(self) -> dict[str, Any]:
        return self.info

    def run(self, spec: Any, name: Any, carry: list[list[tuple[str, bytes]]] | None = None) -> dict[str, Any]:
        """Run one job in fresh node-local folders; return its result and the files not yet polled.

        ``spec``/``name`` are one run's, or lists of them for a pack of seeds (``resources.seeds_per_job``).
        ``carry`` gives each run the files of its run folder that a resumed attempt needs (its latest
        checkpoint, the metric shards of earlier attempts), relative to that run folder."""
        specs = spec if isinstance(spec, list) else [spec]
        names = name if isinstance(name, list) else [name]
        carries = carry or [[] for _ in specs]
        folders = [self.root / n for n in names]
        sent: list[set[str]] = []
        for folder, files in zip(folders, carries):
            shutil.rmtree(folder.parent, ignore_errors=True)  # this run's folder on this node, fresh
            folder.mkdir(parents=True)
            _write_files(folder.parent, files, checkpoints_up=False)
            sent.append({f for f, _ in files if f.startswith("checkpoint/")})  # never sent back
        folder = folders[0]
        with self.lock:
            self.folders, self.sent = folders, sent
            self.stop_event = threading.Event()
            if any(n in self.stopped for n in names):
                self.stop_event.set()
        with output_to(folder / "output.log"):
            result = run_job(specs, folders, device=self.device, stop_event=self.stop_event)
        with self.lock:
            files = [self._collect(f, sent, final=True) for f, sent in zip(folders, self.sent)]
            self.folders, self.sent = [], []
        for f in folders:
            shutil.rmtree(f.parent, ignore_errors=True)
        return {"result": result, "files": files}

    def poll(self, log: bool = False) -> list[list[tuple[str, bytes]]]:
        """For each run of the running job, the shards it flushed (and the checkpoint it saved) since the
        last poll (complete files only); ``log``: also its ``output.log`` so far (the job is about to be
        killed)."""
        with self.lock:
            return [self._collect(f, sent, final=False, log=log) for f, sent in zip(self.folders, self.sent)]

    def stop(self, name: str) -> None:
        """Ask job ``name`` to stop (it flushes and ends 'interrupted'); also when its run() has not begun."""
        with self.lock:
            self.stopped.add(name)
            if self.root / name in self.folders:
                self.stop_event.set()

    @staticmethod
    def _collect(folder: Path, sent: set[str], final: bool, log: bool = False) -> list[tuple[str, bytes]]:
        # The checkpoints are read BEFORE the shards are listed: every shard they name was flushed
        # before they were saved, so the coordinator never holds a checkpoint without the rows it continues.
        ckpts = _new_checkpoints(folder.parent, sent)
        out = []
        metrics = folder / "metrics"
        names = sorted(p.name for p in metrics.glob("*.parquet")) if metrics.is_dir() else []
        for n in names:
            rel = f"metrics/{n}"
            if rel not in sent:
                out.append((rel, (metrics / n).read_bytes()))
                sent.add(rel)
        if final:
            for rel in ("spec.json", "result.json"):
                p = folder / rel
                if p.exists():
                    out.append((rel, p.read_bytes()))
        output = folder / "output.log"
        if (final or log) and output.exists():
            with open(output, "rb") as fh:
                fh.seek(max(0, output.stat().st_size - MAX_LOG_BYTES))
                out.append(("output.log", fh.read()))
        out += ckpts  # last: written after the shards they continue
        sent.update(rel for rel, _ in ckpts)
        return out


def _actor_root() -> Path:
    """This actor's node-local folder, <tmp>/rlbench-ray/<pid>; folders of actors no longer alive that nothing
    has written to for ``ORPHAN_AGE_S`` are removed on the way. A younger one may belong to an actor that has
    just died: the coordinator's salvage task (``_leftovers``) reads and removes it, and an actor starting on
    the same node meanwhile (another slot's replacement) must not take its output.log and shards first."""
    base = Path(tempfile.gettempdir()) / "rlbench-ray"
    base.mkdir(exist_ok=True)
    for old in base.iterdir():
        if (
            old.name.isdigit()
            and not Path(f"/proc/{old.name}").exists()
            and _untouched_for(old, ORPHAN_AGE_S)
        ):
            shutil.rmtree(old, ignore_errors=True)
    root = base / str(os.getpid())
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    return root


def _untouched_for(folder: Path, seconds: float) -> bool:
    """Whether nothing in ``folder`` (itself included) was modified in the last ``seconds``."""
    since = time.time() - seconds
    for where, _, files in os.walk(folder):  # every folder is a ``where`` once
        for path in [where, *(os.path.join(where, f) for f in files)]:
            try:
                if os.stat(path, follow_symlinks=False).st_mtime > since:
                    return False
            except OSError:  # removed meanwhile
                continue
    return True


def _settled(log: Path, quiet_s: float = 0.3, limit_s: float = 3.0) -> None:
    """Wait until ``log`` has stopped growing for ``quiet_s`` (at most ``limit_s``): a process that dies of a
    fatal signal is still writing its report (a symbolised stack) when Ray says it is gone."""
    import time

    deadline, last, since = time.monotonic() + limit_s, -1, time.monotonic()
    while time.monotonic() < deadline:
        size = log.stat().st_size if log.is_file() else 0
        if size != last:
            last, since = size, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        time.sleep(0.05)


def _leftovers(folder: str, have: list[str]) -> list[tuple[str, bytes]]:
    """Run as a task on the node of an actor that died under a job: the files the job wrote there that the
    coordinator does not have yet (shards flushed since the last poll, spec.json, output.log). Removes the
    folder."""
    path, out = Path(folder), []
    _settled(path / "output.log")
    ckpts = _new_checkpoints(path.parent, set(have))
    metrics = path / "metrics"
    for f in sorted(metrics.glob("*.parquet")) if metrics.is_dir() else []:
        if f"metrics/{f.name}" not in have:
            out.append((f"metrics/{f.name}", f.read_bytes()))
    for rel in ("spec.json", "result.json", "output.log"):
        p = path / rel
        if p.is_file() and rel not in have:
            data = p.read_bytes()
            out.append((rel, data[-MAX_LOG_BYTES:]))
    out += ckpts
    shutil.rmtree(path.parent, ignore_errors=True)
    return out


def _new_checkpoints(run_folder: Path, have: set[str]) -> list[tuple[str, bytes]]:
    """The run's checkpoint files on this node that ``have`` lacks, oldest first, as ("checkpoint/step-S.pt",
    bytes). A run keeps only its latest one; a seed of a packed job keeps the one before too until every seed
    has saved the new one (``algos.base.resume_together``), and that one must reach the coordinator as well:
    a poll in the middle of one pack save, then one in the middle of a later save, would otherwise bring seeds
    only checkpoints of different steps, and the pack, lost with its node, would start over."""
    from ..checkpoint import list_checkpoints

    out = []
    for _, path in reversed(list_checkpoints(run_folder / "checkpoint")):
        rel = f"checkpoint/{path.name}"
        if rel in have:
            continue
        try:
            out.append((rel, path.read_bytes()))
        except FileNotFoundError:  # pruned meanwhile: a newer one is there
            continue
    return out


def _carry(job: Job, every_checkpoint: bool = False) -> list[tuple[str, bytes]]:
    """What attempt ``job`` needs from its run folder on the coordinator's machine to resume on another
    node: the run's latest checkpoint (``every_checkpoint``: the ones kept, for a seed of a packed job, which
    resumes at the latest step all its seeds have) and the metric shards of its earlier attempts (the
    checkpoint names the shards of the attempt that saved it; without them it would start over). Relative to
    the run folder."""
    if job.attempt < 2 or job.spec.budget.get("checkpoint_every") is None:
        return []
    from ..checkpoint import list_checkpoints

    run_folder = job.folder.parent
    found = list_checkpoints(run_folder / "checkpoint")
    if not found:
        return []
    files = []
    for k in range(1, job.attempt):
        metrics = run_folder / f"attempt-{k}" / "metrics"
        for p in sorted(metrics.glob("*.parquet")) if metrics.is_dir() else []:
            files.append((f"attempt-{k}/metrics/{p.name}", p.read_bytes()))
    for _, path in found if every_checkpoint else found[:1]:
        files.append((f"checkpoint/{path.name}", path.read_bytes()))
    return files


def _write_files(
    folder: Path, files: list[tuple[str, bytes]], checkpoints_up: bool = True, keep: int = 1
) -> None:
    """Write files an actor sent into the attempt folder on this machine (atomically, same names). A
    checkpoint (``checkpoint/step-S.pt``) goes to the run folder, shared by the attempts, where the newest
    ``keep`` are kept: one, as ``checkpoint.save`` does, or for a seed of a packed job ``KEEP_PACKED`` (its
    seeds resume at a step they all have, ``algos.base.resume_together``, and the job may have been lost after
    one seed's newest checkpoint came over and before another's)."""
    for rel, data in files:
        parts = Path(rel).parts
        if not parts or any(p in ("", ".", "..") for p in parts) or Path(rel).is_absolute():
            continue  # never outside the attempt folder
        is_ckpt = checkpoints_up and parts[0] == "checkpoint" and len(parts) == 2
        dest = (folder.parent if is_ckpt else folder) / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".part")
        tmp.write_bytes(data)
        os.replace(tmp, dest)
        if is_ckpt:
            from ..checkpoint import list_checkpoints

            for _, old in list_checkpoints(dest.parent)[keep:]:
                old.unlink(missing_ok=True)


def _ray_says(err: BaseException) -> str:
    text = str(err)
    detail = (
        text.split("Worker exit detail:", 1)[1].strip().split(". ")[0].strip()
        if "Worker exit detail:" in text
        else ""
    )
    return f"Ray: {type(err).__name__}" + (f": {detail}" if detail else "")


def _says_node_died(err: BaseException) -> bool:
    """Whether Ray's error tells that the actor died with its node (not that its worker process died)."""
    low = str(err).lower()
    return (
        "node" in low
        and ("died" in low or "dead" in low or "lost" in low)
        and "worker process has died" not in low
    )


def _node_gone(ray: Any, node_id: str | None) -> bool:
    """Whether node ``node_id`` is gone: the cluster's GCS lists it dead (or no longer knows it), or its
    raylet no longer answers on its port. The GCS declares a node dead only after missed health checks (15 s
    and more by default) and meanwhile an actor of a SIGKILLed node reports ``ActorUnavailableError``
    ("Socket closed"), so the raylet's port is what tells at once."""
    if not node_id:
        return False
    try:
        nodes = ray.nodes()
    except Exception:  # noqa: BLE001 - the GCS itself is unreachable: not a node loss we can name
        return False
    for n in nodes:
        if n.get("NodeID") == node_id:
            if not n.get("Alive", True):
                return True
            host, port = n.get("NodeManagerAddress"), n.get("NodeManagerPort")
            if not host or not port:
                return False
            try:
                socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
            except OSError:
                return True
            return False
    return bool(nodes)


def _lost_cause(err: BaseException, info: dict[str, Any] | None) -> str:
    """The cause recorded for an attempt whose Ray node died or left the cluster under it."""
    info = info or {}
    node = str(info.get("node_id") or "?")[:12]
    where = info.get("ip") or info.get("host") or "?"
    return f"node lost: Ray node {node} at {where} died or left the cluster; {_ray_says(err)}"


def _death_cause(err: BaseException, log: Path) -> tuple[str, int | None]:
    """(one clear line, exit code) for an actor that died under a job, from Ray's error and the fatal-signal
    report the process left in the job's ``output.log`` (Ray's workers print one on SIGSEGV, SIGABRT, ...)."""
    ray_says = _ray_says(err)
    try:
        with open(log, "rb") as fh:
            fh.seek(max(0, log.stat().st_size - 64 * 1024))
            tail = fh.read().decode(errors="replace")
    except OSError:
        tail = ""
    m = re.search(r"\*\*\* (SIG[A-Z]+) received", tail)
    if m:
        name = m.group(1)
        what = {"SIGSEGV": "segmentation fault in native code", "SIGABRT": "aborted in native code",
                "SIGBUS": "bus error in native code", "SIGFPE": "arithmetic error in native code"}  # fmt: skip
        code = getattr(signal, name, None)
        return f"worker killed by {name} ({what.get(name, 'fatal signal')}); {ray_says}", -int(
            code
        ) if code else None
    if _says_node_died(err):
        return f"node lost: the Ray node running this job died or left the cluster; {ray_says}", None
    return (
        "worker died: the Ray actor's process exited without a fatal-signal report (killed with SIGKILL, e.g. "
        f"by the out-of-memory killer, or by hand?); {ray_says}",
        None,
    )


# -- the driver side --------------------------------------------------------------------------------------
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
        ray = _import_ray()
        if not ray.is_initialized():
            if self.address:
                _init(ray, self.address)
            else:
                _start_local(ray, self.local_cpus, self.local_gpus)
                self._started_local = True
        # On rlbench's own instance the actors' calls record no task events (for Ray's state API and dashboard,
        # which nothing there reads; they cost the actor, the driver and the GCS CPU on every call); a
        # cluster's dashboard shows them.
        lean = self._started_local and not _rays_own_start()
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
            _kill_monitor(ray)
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
        """Run every job on warm actors; see the module docstring and ``Executor``."""
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
                        carry = [_carry(m, every_checkpoint=bool(job.pack)) for m in job.members]
                        if job.pack:
                            s.run_ref = s.actor.run.remote([m.spec for m in job.pack], names, carry)
                        else:
                            s.run_ref = s.actor.run.remote(job.spec, names[0], carry)
                        s.job_name = names[0]
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
                        self._salvage(ray, [(s.job, node, s.remote_folders)])
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
                first = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
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
            lost = _says_node_died(e) or _node_gone(ray, node)
            self._kill(ray, s)
            if lost:  # nothing to salvage on a node that is gone; a retry that is not the run's fault
                cause, code, result = _lost_cause(e, info), None, {"node_lost": node or "?"}
                for m in s.job.members:
                    _note(m.folder / "output.log", cause)
                for other in self.slots:  # idle actors on that node are gone too: replace them now, or the
                    if other is not s and other.job is None and (other.info or {}).get("node_id") == node:
                        self._kill(ray, other)  # retry lands on one of them and is lost a second time
                        self._spawn(other)
            else:
                self._salvage(ray, [(s.job, node, s.remote_folders)])
                (cause, code), result = _death_cause(e, s.job.folder / "output.log"), {}
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
        _receive(s.job, reply)
        r = reply["result"]
        self._finish(s, queue, on_end, Outcome(r["status"], r.get("exit_code"), r.get("error"),
                                               r.get("duration_s", 0.0), r))  # fmt: skip

    def _salvage(self, ray: Any, dead: list[tuple[Job, str | None, list[str] | None]],
                 timeout: float = SALVAGE_TIMEOUT_S) -> None:  # fmt: skip
        """Fetch what dead actors' jobs flushed after the last poll (shards, output.log, the latest
        checkpoint), with a task on each one's node, all at once (a node that is gone, or does not answer
        within ``timeout``, keeps it). ``dead``: (job, the actor's node id, the job's folders there)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        asks = []
        for job, node_id, folders in dead:
            if not node_id or not folders:
                continue
            task = ray.remote(num_cpus=0, max_retries=0)(_leftovers).options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)
            )
            for m, folder in zip(job.members, folders):
                metrics, ckpts = m.folder / "metrics", m.folder.parent / "checkpoint"
                have = [f"metrics/{p.name}" for p in metrics.glob("*.parquet")] if metrics.is_dir() else []
                have += [f"checkpoint/{p.name}" for p in ckpts.glob("step-*.pt")] if ckpts.is_dir() else []
                try:
                    asks.append((m, KEEP_PACKED if job.pack else 1, task.remote(folder, have)))
                except Exception:  # noqa: BLE001 - the local Ray instance itself is going down
                    pass
        deadline = time.monotonic() + timeout
        for m, keep, ref in asks:
            try:
                _write_files(m.folder, ray.get(ref, timeout=max(0.1, deadline - time.monotonic())), keep=keep)
            except Exception:  # noqa: BLE001 - node lost or too slow: what was pulled before is what we have
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001
                    pass

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
                    _write_files(m.folder, got, keep=KEEP_PACKED if s.job.pack else 1)

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
                _receive(job, reply)
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
        self._salvage(ray, dead, timeout=SALVAGE_ON_STOP_S)
        for s, job in died:
            on_end(job, Outcome("interrupted", None, "interrupted", time.monotonic() - s.started))


def _note(log: Path, line: str) -> None:
    """Append rlbench's own line to an attempt's ``output.log`` on the coordinator's side (why it ended)."""
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a") as fh:
            fh.write(f"\n[rlbench] {line}\n")
    except OSError:
        pass


def _receive(job: Job, reply: dict[str, Any]) -> None:
    """Write what an actor sent with a job's result into its runs' attempt folders; a run that finished
    needs its checkpoint no more (``run_one`` removes it where it ran; this is the coordinator's copy)."""
    results = reply["result"].get("pack_results") or [reply["result"]]
    for m, files, r in zip(job.members, reply["files"], results):
        _write_files(m.folder, files, keep=KEEP_PACKED if job.pack else 1)
        if r.get("status") == "finished":
            shutil.rmtree(m.folder.parent / "checkpoint", ignore_errors=True)


# -- building one, with the checks first -------------------------------------------------------------------
def _host_port(address: str) -> tuple[str, int]:
    rest = address.removeprefix("ray://")
    default = 10001 if address.startswith("ray://") else 6379
    host, sep, port = rest.rpartition(":")
    if not sep:
        return rest, default
    try:
        return host.strip("[]"), int(port)
    except ValueError:
        raise UsageError(f"--address {address}: expected auto, HOST:PORT or ray://HOST:PORT") from None


def _resolve_auto() -> str:
    """What ``--address auto`` means to Ray: $RAY_ADDRESS, else the cluster `ray start` left on this machine."""
    env = os.environ.get("RAY_ADDRESS")
    if env and env != "auto":
        return env
    current = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
    try:
        found = current.read_text().strip()
    except OSError:
        found = ""
    if not found:
        raise UsageError("--address auto: no Ray cluster is running on this machine; start one with "
                         "`ray start --head`, or pass --address HOST:PORT")  # fmt: skip
    return found


def _check_reachable(address: str) -> None:
    target = _resolve_auto() if address == "auto" else address
    host, port = _host_port(target)
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as e:
        raise UsageError(
            f"--address {address}: no Ray cluster answers at {host}:{port} ({e.strerror or e}); start one there "
            f"with `ray start --head --port {port}`, or fix the host and port"
        ) from None


def _quiet_driver(ray: Any) -> None:
    """Keep Ray from printing worker deaths on the driver's stdout (it would break ``--json`` output):
    rlbench reports them as the failed run's error instead. Private to Ray, hence guarded."""
    mod = getattr(getattr(ray, "_private", None), "worker", None)
    orig = getattr(mod, "print_to_stdstream", None)
    if orig is None or getattr(orig, "_rlbench_quiet", False):
        return

    def filtered(data: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        if data.get("pid") != "raylet":
            orig(data, *args, **kwargs)

    filtered._rlbench_quiet = True  # type: ignore[attr-defined]
    mod.print_to_stdstream = filtered


def _kill_monitor(ray: Any) -> None:
    """SIGKILL the autoscaler monitor of the Ray instance this process started, before ``ray.shutdown``: it
    sits out the whole second of grace ``ray.shutdown`` gives it after SIGTERM (of 1.4 s that shutdown takes,
    measured), and holds nothing a finished run needs. Ray's own process table is used (a private API: if it
    changes, ``ray.shutdown`` alone stops the monitor, as before)."""
    try:
        node = ray._private.worker._global_node
        if node is not None:
            node._kill_process_type("monitor", allow_graceful=False, check_alive=False, wait=False)
    except Exception:  # noqa: BLE001 - only a faster path to what ray.shutdown does anyway
        pass


def _start_local(ray: Any, cpus: int, gpus: int) -> None:
    """Start a Ray instance on this machine for this run, in the main thread (Ray ties its daemons' lives to
    the thread that starts them), keeping the signal handlers of ``rlbench run``."""
    import logging

    logging.getLogger("ray").setLevel(logging.ERROR)
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    _quiet_driver(ray)
    try:
        with _lean_start(ray):
            ray.init(address="local", num_cpus=cpus, num_gpus=gpus, include_dashboard=False,
                     log_to_driver=False, configure_logging=False)  # fmt: skip
    finally:
        for sig, handler in saved.items():
            if handler is not None:
                signal.signal(sig, handler)


@contextlib.contextmanager
def _lean_start(ray: Any) -> Iterator[None]:
    """While ``ray.init`` starts rlbench's own short-lived instance, three of Ray's start-up costs go, none of
    which the executor needs (it uses only actors, ``ray.wait`` / ``ray.get`` and the GCS):

    - no API-server ("dashboard") process: ``include_dashboard=False`` still starts one (for Ray's job and
      state APIs) and waits for it to register, a second or more of every start here;
    - the raylet's agents start in Ray's "minimal" mode, and the driver skips importing the dashboard's web
      stack (aiohttp, ~0.3 s) only to find out whether they could do more;
    - the driver waits for its raylet to register with the GCS by asking every 20 ms, where Ray's own wait
      answers only at whole seconds (the raylet registers ~1 s after it starts, once its agents are up, so
      the start often took up to a second longer than needed).

    Private hooks of Ray, hence guarded: where one has changed, Ray does that part as before.
    ``RLBENCH_RAY_API_SERVER=1`` keeps Ray's own start as it is."""
    if _rays_own_start():
        yield
        return
    private = getattr(ray, "_private", None)
    node_cls = getattr(getattr(private, "node", None), "Node", None)
    utils, services = getattr(private, "utils", None), getattr(private, "services", None)
    original: dict[str, Any] = {}

    def skip_api_server(self: Any, *args: Any, **kwargs: Any) -> None:
        self._webui_url = None

    def minimal_agents() -> str:
        return "rlbench starts Ray's agents in minimal mode"

    def get_node_when_registered(gcs_address: str, node_id: str) -> Any:
        _wait_registered(gcs_address, node_id)
        return original["get_node"](gcs_address, node_id)

    patched = ((node_cls, "start_api_server", skip_api_server),
               (utils, "get_dashboard_dependency_error", minimal_agents),
               (services, "get_node", get_node_when_registered))  # fmt: skip
    for owner, name, replacement in patched:
        if callable(getattr(owner, name, None)):
            original[name] = getattr(owner, name)
            setattr(owner, name, replacement)
    try:
        yield
    finally:
        for owner, name, _ in patched:
            if name in original:
                setattr(owner, name, original[name])


def _rays_own_start() -> bool:
    """``RLBENCH_RAY_API_SERVER=1``: rlbench's own Ray instance starts as Ray starts it (see ``_lean_start``)."""
    return os.environ.get("RLBENCH_RAY_API_SERVER") == "1"


def _wait_registered(gcs_address: str, node_id: str, limit_s: float = 30.0, every_s: float = 0.02) -> None:
    """Return once the GCS at ``gcs_address`` lists node ``node_id`` (the raylet has registered), asking every
    ``every_s``; after ``limit_s``, or if the GCS client is not what this expects, return and let Ray's own
    wait decide."""
    try:
        from ray._raylet import GcsClient

        client = GcsClient(address=gcs_address)
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            if any(
                (k.hex() if hasattr(k, "hex") else str(k)) == node_id
                for k in client.get_all_node_info(timeout=5)
            ):
                return
            time.sleep(every_s)
    except Exception:  # noqa: BLE001 - only a faster path to Ray's own wait
        return


def _init(ray: Any, address: str) -> None:
    """``ray.init``, given up after INIT_TIMEOUT_S instead of hanging. It runs in a thread, which also keeps
    Ray from replacing the SIGTERM handler of ``rlbench run`` (a stop request, not an exit)."""
    import logging

    logging.getLogger("ray").setLevel(logging.ERROR)  # e.g. "SIGTERM handler is not set ...": meant so
    box: dict[str, BaseException | None] = {"err": None}
    _quiet_driver(ray)

    def connect() -> None:
        try:
            ray.init(address=address, ignore_reinit_error=True, log_to_driver=False, include_dashboard=False,
                     configure_logging=False)  # fmt: skip
        except BaseException as e:  # noqa: BLE001 - reported below
            box["err"] = e

    t = threading.Thread(target=connect, name="rlbench-ray-init", daemon=True)
    t.start()
    t.join(INIT_TIMEOUT_S)
    if t.is_alive():
        raise UsageError(f"--address {address}: the port answers but Ray did not connect within "
                         f"{INIT_TIMEOUT_S:g}s; is it a Ray head (`ray start --head`) of the same Ray version?")  # fmt: skip
    if box["err"] is not None:
        first = (
            str(box["err"]).strip().splitlines()[0] if str(box["err"]).strip() else type(box["err"]).__name__
        )
        raise UsageError(f"--address {address}: cannot connect to Ray ({first}); check that a head runs there "
                         "(`ray start --head`) with the same Ray and Python versions")  # fmt: skip


def _fit(node: dict[str, float], cpus: float, gpus: float) -> int:
    """How many actors needing cpus/gpus one node holds."""
    n = math.floor(node.get("CPU", 0.0) / cpus + 1e-9) if cpus > 0 else 10**6
    if gpus > 0:
        n = min(n, math.floor(node.get("GPU", 0.0) / gpus + 1e-9))
    return n


def _too_big(cpus: float, gpus: float, where: str, nodes: list[dict[str, float]]) -> UsageError:
    best = max(nodes, key=lambda n: (n.get("GPU", 0.0), n.get("CPU", 0.0))) if nodes else {}
    return UsageError(
        f"resources.cpus_per_job={cpus:g}, resources.gpus_per_job={gpus:g}: no node of {where} has that much "
        f"(largest node: {best.get('CPU', 0.0):g} CPUs, {best.get('GPU', 0.0):g} GPUs); lower them in the "
        "suite's resources, or add a bigger node"
    )


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
    ray = _import_ray()
    if address:
        _check_reachable(address)
        _init(ray, address)
        nodes = [{k: float(v) for k, v in n["Resources"].items()} for n in ray.nodes() if n.get("Alive")]
        where = f"the Ray cluster at {address}"
        local_cpus, local_gpus = 0, 0
    else:
        local_cpus, local_gpus = usable_cores(), detect_gpus()
        nodes = [{"CPU": float(local_cpus), "GPU": float(local_gpus)}]
        where = "this machine (a local Ray instance; pass --address to use a cluster)"
    capacity = sum(_fit(n, cpus, gpus) for n in nodes)
    if capacity < 1:
        if address:
            ray.shutdown()
        raise _too_big(cpus, gpus, where, nodes)
    n_actors = max(1, min(workers or capacity, n_jobs))
    return RayExecutor(address, n_actors, cpus, gpus, threads, timeout, local_cpus, local_gpus,
                       connected=bool(address))  # fmt: skip
