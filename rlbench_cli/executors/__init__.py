"""Executors place RunSpecs on workers and report what happened to each. They never touch the store.

``make_executor`` picks one by name: ``local`` (a pool of worker processes here), ``ray`` (warm actors on a
Ray cluster) or ``slurm`` (job arrays through submitit). Each is built, and checked (extra installed, cluster
reachable, resources satisfiable), before anything is recorded or submitted, so bad input changes nothing.
"""

from __future__ import annotations

from typing import Any

from ..errors import UsageError
from .base import Executor, Job, Outcome, Placement, detect_gpus, plan_devices, usable_cores

__all__ = ["Executor", "Job", "Outcome", "Placement", "make_executor", "plan_devices", "usable_cores"]


def make_executor(
    name: str, suite: Any, n_jobs: int, workers: int | None = None, timeout: float | None = None,
    options: dict[str, Any] | None = None,
) -> Executor:  # fmt: skip
    """The executor ``name`` for ``n_jobs`` runs of ``suite``.

    Args:
        name: local | ray | slurm.
        suite: the Suite (its ``resources`` say what each run needs).
        n_jobs: how many runs will be launched (caps the local pool).
        workers: --workers: parallel runs (local: processes; ray: actors).
        timeout: seconds before a run is killed.
        options: executor flags from the command line, overriding the suite's ``resources.<name>``.
    """
    options = options or {}
    res = suite.resources
    if name == "local":
        from .local import LocalExecutor

        cores = usable_cores()
        n_workers = max(1, min(workers or cores, n_jobs))
        devices = plan_devices(detect_gpus(), res.gpus_per_job, n_workers)
        threads = res.threads_per_job or max(1, cores // len(devices))
        return LocalExecutor(devices, threads=threads, timeout=timeout)
    if name == "ray":
        from .ray import create

        return create(suite, n_jobs, workers, timeout, options)
    if name == "slurm":
        from .slurm import create

        return create(suite, n_jobs, workers, timeout, options)
    raise UsageError(f"--executor {name!r}: choose one of local, ray, slurm")
