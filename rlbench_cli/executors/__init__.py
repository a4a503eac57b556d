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
    mps = res.mps if options.get("mps") is None else options["mps"]
    if mps and name != "local":
        raise UsageError(f"resources.mps / --mps: rlbench starts CUDA MPS for --executor local only; on {name} "
                         "nodes MPS is the cluster's to run (Slurm: --sbatch gres=mps:N); pass --no-mps")  # fmt: skip
    if name == "local":
        from .local import LocalExecutor

        cores = usable_cores()
        n_workers = max(1, min(workers or cores, n_jobs))
        devices = plan_devices(detect_gpus(), res.gpus_per_job, n_workers)
        threads = res.threads_per_job or max(1, cores // len(devices))
        daemon, note = _mps(mps, devices, options.get("db"))
        return LocalExecutor(devices, threads=threads, timeout=timeout, mps=daemon, mps_note=note)
    if name == "ray":
        from .ray import create

        return create(suite, n_jobs, workers, timeout, options)
    if name == "slurm":
        from .slurm import create

        return create(suite, n_jobs, workers, timeout, options)
    raise UsageError(f"--executor {name!r}: choose one of local, ray, slurm")


def _mps(wanted: bool, devices: list[tuple[str | None, str]], db: str | None) -> tuple[Any, str]:
    """The local pool's CUDA MPS: the store's daemon to start (or None) and what ``describe`` says of it.
    Without MPS, a daemon a killed coordinator left for this store is stopped."""
    from pathlib import Path

    from .. import mps

    where = Path(db) if db else Path.cwd() / "rlbench.duckdb"
    if not wanted:
        mps.stop_left_behind(where)
        return None, ""
    mps.require_control()  # asked for: its absence is an error even where no run uses a GPU
    if all(dev == "cpu" for _, dev in devices):
        return None, ", no CUDA MPS (no run uses a GPU here)"
    theirs = mps.user_daemon()
    if theirs is not None:
        return None, f", under the CUDA MPS daemon already running ({theirs})"
    return mps.store_daemon(where), ""
