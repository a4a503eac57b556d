"""What every executor shares: jobs, outcomes, and the pure device-assignment logic."""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from ..suite.grid import RunSpec

__all__ = [
    "Job", "Outcome", "Placement", "Executor", "OnStart", "OnEnd", "OnTick",
    "plan_devices", "usable_cores", "detect_gpus", "signal_name", "hostname", "output_to", "NODE_LOSS_RETRIES",
    "set_parent_death_signal", "preload_worker",
]  # fmt: skip

# An attempt whose node died under it (``Outcome.result["node_lost"]``) is run again without counting against
# --retries (not the run's fault), at most this many times per run, so a flapping cluster cannot loop forever.
NODE_LOSS_RETRIES = 3


@dataclass
class Job:
    spec: RunSpec
    folder: Path  # the attempt folder on the coordinator's machine: shards and result.json end up here
    attempt: int
    # resources.seeds_per_job: the runs (seeds of one cell) trained together in this job, each its own Job
    # (spec, folder, attempt); ``spec``/``folder``/``attempt`` are then the first member's. Empty: one run.
    pack: list[Job] = field(default_factory=list)

    @property
    def members(self) -> list[Job]:
        """The runs this job trains: its pack, or itself."""
        return self.pack or [self]


@dataclass
class Outcome:
    status: str  # finished | failed | interrupted
    exit_code: int | None
    error: str | None
    duration_s: float
    result: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Placement:
    """Where one attempt runs, as ``status`` shows it: the same fields whichever executor placed it."""

    device: str  # torch device string inside the job: cpu, cuda:0
    host: str
    executor: str  # local | ray | slurm
    job_id: str | None = None  # worker pid (local), actor / node (ray), Slurm job id (slurm)


OnStart = Callable[[Job, Placement], None]
OnEnd = Callable[[Job, Outcome], "Job | None"]
OnTick = Callable[[list[Job]], None]


class Executor(Protocol):
    """Places jobs and hands back outcomes and metric shards; never opens the database.

    The contract every executor keeps, so the coordinator (the single writer) treats them all alike:

    - ``on_start(job, placement)`` before a job's first step; ``on_end(job, outcome)`` exactly once per
      started job, and a job it returns is queued again (a retry, as a new attempt).
    - By the time ``on_end`` is called for a job, every metric shard the job has flushed is under
      ``job.folder / "metrics"`` on the coordinator's machine (an executor whose workers share no filesystem
      copies them there), and its ``result.json`` too, when the run wrote one; at ``on_tick`` (every
      ``tick_every`` seconds) those it flushed up to a second before.
    - A job that raises, segfaults, is killed or loses its worker ends ``failed`` with the cause as its error;
      one that overruns ``timeout`` seconds is killed and ends ``failed``. One whose node was lost also sets
      ``outcome.result["node_lost"]`` (the node's id): it is retried apart from --retries.
    - When ``stop`` is set (checked at least twice a second) or on KeyboardInterrupt, running jobs are asked
      to stop, given a few seconds, then killed; each ends ``interrupted``; then KeyboardInterrupt is raised.
    """

    name: ClassVar[str]

    def describe(self) -> str:
        """One line for the progress output, e.g. '2 workers on cpu, 1 torch thread(s) each'."""
        ...

    def run(
        self,
        jobs: list[Job],
        on_start: OnStart,
        on_end: OnEnd,
        on_tick: OnTick = lambda running: None,
        tick_every: float = 1.0,
        stop: threading.Event | None = None,
    ) -> None: ...


def hostname() -> str:
    return socket.gethostname()


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def detect_gpus() -> int:
    """Number of visible NVIDIA GPUs, without importing torch (CUDA_VISIBLE_DEVICES is honoured)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [v for v in visible.split(",") if v.strip() and v.strip() != "-1"]
        return len(ids)
    if not shutil.which("nvidia-smi"):
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))


def plan_devices(n_gpus: int, gpus_per_job: float, workers: int) -> list[tuple[str | None, str]]:
    """Give each worker slot a device: (CUDA_VISIBLE_DEVICES value or None, torch device string).

    gpus_per_job 0 or no GPUs: every worker runs on the CPU. A fraction packs floor(1/f) jobs on each GPU
    (0.25: four per GPU); 1 or more gives each job that many whole GPUs. With GPUs, the number of workers is
    capped at what the GPUs hold.
    """
    if workers < 1:
        raise ValueError("workers must be at least 1")
    if gpus_per_job <= 0 or n_gpus <= 0:
        return [(None, "cpu")] * workers
    if gpus_per_job < 1:
        per_gpu = max(1, math.floor(1 / gpus_per_job + 1e-9))
        slots = [(str(g), "cuda:0") for _ in range(per_gpu) for g in range(n_gpus)]
    else:
        k = math.ceil(gpus_per_job)
        slots = [(",".join(str(g) for g in range(i * k, (i + 1) * k)), "cuda:0") for i in range(n_gpus // k)]
        if not slots:
            return [(None, "cpu")] * workers
    return slots[:workers]


def signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


def preload_worker(threads: int, preload_torch: bool) -> None:
    """What a worker (a local one, or its zygote once for all; a Ray actor) imports before its first job, with
    ``threads`` for the math libraries."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RLBENCH_TORCH_THREADS"):
        os.environ[var] = str(threads)
    # no progress bars in a job: transformers' save_pretrained drew one through tqdm, whose first bar makes a
    # multiprocessing lock that a worker, ended by os._exit, never released (a "leaked semaphore" warning at
    # the end of every text suite); a bar in output.log says nothing the metrics do not
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from .. import algos, sink, sysmon  # noqa: F401 - what every run uses: gymnasium, pyarrow, the registry
    from ..algos import base  # noqa: F401

    if preload_torch:  # once per worker, not once per job; else by the first run that uses it, if any
        import torch  # noqa: F401


def set_parent_death_signal() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (a local worker: kill -9 of the coordinator, or
    of the zygote it was forked from, leaves no orphans)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:  # pragma: no cover
        pass


@contextlib.contextmanager
def output_to(path: str | Path) -> Iterator[None]:
    """This process's stdout and stderr appended to ``path`` (a job's ``output.log``; ``os.devnull``) for the
    block, at the file descriptors, so what libraries' native code prints goes there too; then back."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "ab", buffering=0) as out:
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
