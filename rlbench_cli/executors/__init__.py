"""Executors place RunSpecs on workers and report what happened to each. They never touch the store.

``EXECUTORS`` is the one table of them: ``local`` (a pool of worker processes here), ``ray`` (warm actors on
a Ray cluster) and ``slurm`` (job arrays through submitit), each with where its code lives and the facts the
coordinator acts on, so that the coordinator never asks for an executor by name. ``make_executor`` builds
one, and checks it (extra installed, cluster reachable, resources satisfiable), before anything is recorded or
submitted, so bad input changes nothing.

A new executor is a module with ``create(suite, n_jobs, workers, timeout, options)`` returning an object
that keeps ``base.Executor``'s contract, and one row here. Importing this package imports no executor (and
nothing of rlbench_cli but ``errors``), so ``spec`` may read ``NAMES``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ..errors import UsageError

__all__ = ["EXECUTORS", "NAMES", "ExecutorKind", "executor_kind", "make_executor"]


@dataclass(frozen=True)
class ExecutorKind:
    """One executor: where it lives and what the coordinator needs to know of it.

    Attributes:
        name: what ``--executor`` and ``resources.executor`` call it.
        target: ``"module:function"`` that checks and builds it: ``create(suite, n_jobs, workers, timeout,
            options)``, imported only when it is used.
        label: how messages name the place its runs are in ("Slurm").
        outlives_coordinator: its jobs run on when the coordinator stops (``--detach``, a kill): each start
            is recorded before anything else happens (no batching), ``--detach`` is allowed, and ``rlbench
            run``, ``status`` and ``cancel`` find its jobs again through its module's ``survey(runs_root,
            rows)``, ``peek(rows)`` and ``cancel(runs_root, rows, settle_s)``; its executor has ``adopt``.
        shared_filesystem: its workers write straight into the attempt folders, on a filesystem shared with
            the coordinator's machine: it gets the absolute runs folder as ``options["runs_root"]``.
        checks_params: its ``check(specs, stop)`` checks the runs' algorithm params where the runs will
            import their adapters anyway; otherwise the coordinator checks them in-process before building it.
        mps: rlbench starts CUDA MPS for it (``resources.mps``, ``--mps``); elsewhere MPS is the cluster's.
        takes_address: ``rlbench run --address`` names the cluster it sends runs to (``options["address"]``).
    """

    name: str
    target: str
    label: str
    outlives_coordinator: bool = False
    shared_filesystem: bool = False
    checks_params: bool = False
    mps: bool = False
    takes_address: bool = False

    def module(self) -> ModuleType:
        """The executor's module (imported now)."""
        return importlib.import_module(self.target.partition(":")[0])

    def create(self, *args: Any) -> Any:
        """``target(*args)``: the executor, built and checked."""
        return getattr(self.module(), self.target.partition(":")[2])(*args)


EXECUTORS: dict[str, ExecutorKind] = {
    e.name: e
    for e in (
        ExecutorKind(
            "local", "rlbench_cli.executors.local:create", "this machine", checks_params=True, mps=True
        ),
        ExecutorKind("ray", "rlbench_cli.executors.ray:create", "Ray", takes_address=True),
        ExecutorKind(
            "slurm",
            "rlbench_cli.executors.slurm:create",
            "Slurm",
            outlives_coordinator=True,
            shared_filesystem=True,
        ),  # fmt: skip
    )
}
NAMES: tuple[str, ...] = tuple(EXECUTORS)


def executor_kind(name: str) -> ExecutorKind:
    """The table's row for ``name``; UsageError naming the choices when there is none."""
    try:
        return EXECUTORS[name]
    except KeyError:
        raise UsageError(f"--executor {name!r}: choose one of {', '.join(NAMES)}") from None


def make_executor(
    name: str, suite: Any, n_jobs: int, workers: int | None = None, timeout: float | None = None,
    options: dict[str, Any] | None = None,
) -> Any:  # fmt: skip
    """The executor ``name`` for ``n_jobs`` runs of ``suite`` (a ``base.Executor``).

    Args:
        name: a name of ``EXECUTORS``.
        suite: the Suite (its ``resources`` say what each run needs).
        n_jobs: how many runs will be launched (caps the local pool).
        workers: --workers: parallel runs (local: processes; ray: actors).
        timeout: seconds before a run is killed.
        options: executor flags from the command line, overriding the suite's ``resources.<name>``.
    """
    kind = executor_kind(name)
    options = options or {}
    mps = suite.resources.mps if options.get("mps") is None else options["mps"]
    if mps and not kind.mps:
        ours = ", ".join(f"--executor {e.name}" for e in EXECUTORS.values() if e.mps)
        raise UsageError(f"resources.mps / --mps: rlbench starts CUDA MPS for {ours} only; on {name} "
                         "nodes MPS is the cluster's to run (Slurm: --sbatch gres=mps:N); pass --no-mps")  # fmt: skip
    return kind.create(suite, n_jobs, workers, timeout, {**options, "mps": mps})
