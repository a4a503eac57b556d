"""What ``rlbench status`` and ``rlbench cancel`` do, as library calls that return data: both re-attach to
jobs that outlive their coordinator (Slurm's) and, when no ``rlbench run`` of their suite holds it (the
suite's run lock), record what became of them; while one does, they only look (that run records)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError
from ..executors import EXECUTORS
from ..store import Store
from .recovery import detached_rows, recover_detached, runs_root
from .runlock import unless_running

__all__ = ["CancelResult", "Snapshot", "cancel", "snapshot", "live_states", "SYS_COLUMNS", "SETTLE_S"]

SETTLE_S = 20.0  # how long cancel waits for cancelled jobs to leave the queue and write their last metrics
# the latest value of these per run, shown beside each run (system metrics: while it runs, and after)
SYS_COLUMNS = ("sys/steps_per_second", "sys/cpu_percent", "sys/rss_mb", "sys/gpu_util", "sys/gpu_mem_mb")


def _by_executor(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(r["executor"], []).append(r)
    return out


@dataclass
class CancelResult:
    """What ``cancel`` did: the job ids it cancelled, those that had already ended (recorded as they ended,
    not as cancelled), and, when an ``rlbench run`` holds the database and records the ends itself, why
    (StoreBusy's message); None when they were recorded here."""

    suite: str
    cancelled: list[str] = field(default_factory=list)
    already_ended: list[str] = field(default_factory=list)
    recorded_by: str | None = None


def cancel(store: Store, suite: str, settle_s: float = SETTLE_S) -> CancelResult:
    """Cancel ``suite``'s runs that are queued or running on an executor whose jobs outlive the coordinator
    (scancel); they end 'interrupted', what they wrote so far kept. Waits up to ``settle_s`` seconds for them
    to go, then, unless an ``rlbench run`` holds the database (it records them), ingests and closes them.
    Raises UnknownName for a suite the store does not have, UsageError without the executor's commands."""
    root = runs_root(store)
    with store.reader() as con:
        store.require_suite(con, suite)
        rows = detached_rows(store.runs(con, suite))
    result = CancelResult(suite)
    for name, group in _by_executor(rows).items():
        ids, ended = EXECUTORS[name].module().cancel(root, group, settle_s)
        result.cancelled += ids
        result.already_ended += ended
    with unless_running(store.path, suite) as busy:
        result.recorded_by = busy
        if busy is None:
            time.sleep(
                1.0 if result.cancelled else 0
            )  # their SIGTERM handlers write last shards, result.json
            with store.writer() as con:
                recover_detached(store, con, root, store.runs(con, suite))
    return result


def live_states(store: Store, suite: str | None) -> dict[str, str]:
    """Runs the store says are on an executor whose jobs outlive the coordinator: ask it. For each suite
    (``suite``, or every suite with such runs) that no ``rlbench run`` holds, ingest what they wrote and close
    the ones that ended (``recover_detached``); of a suite one holds, only look. Returns {run_id: queued |
    running} for the runs still there. Raises UsageError without the executor's commands (Slurm's on PATH),
    having changed nothing."""
    with store.reader() as con:
        suites = sorted({r["suite"] for r in detached_rows(store.runs(con, suite))})
    states: dict[str, str] = {}
    for name in suites:
        with unless_running(store.path, name) as busy:
            if busy is not None:  # a coordinator is attached and records them: only look
                with store.reader() as con:
                    rows = detached_rows(store.runs(con, name))
                for executor, group in _by_executor(rows).items():
                    states.update(EXECUTORS[executor].module().peek(group))
                continue
            with store.writer() as con:
                live = recover_detached(store, con, runs_root(store), store.runs(con, name))[1]
        states.update({s.run_id: s.shown for s in live})
    return states


@dataclass
class Snapshot:
    """One consistent read of what ``rlbench status`` shows. ``runs``: the store's rows (a run on an
    executor that outlives the coordinator shows its word for it: queued or running); ``latest``: {run_id:
    {metric: latest value}} of eval/return and SYS_COLUMNS (for one suite only); ``counts``: {suite:
    {status: runs}}; ``note``: why the executor could not be asked (the store is shown as it is), or None."""

    runs: list[dict[str, Any]]
    latest: dict[str, dict[str, float]]
    counts: dict[str, dict[str, int]]
    note: str | None = None


def snapshot(store: Store, suite: str | None) -> Snapshot:
    """What ``rlbench status`` shows of ``suite`` (None: every suite), after re-attaching (``live_states``)."""
    note = None
    try:
        states = live_states(store, suite)
    except UsageError as err:
        where = " or ".join(e.label for e in EXECUTORS.values() if e.outlives_coordinator)
        states, note = {}, f"cannot ask {where} about its runs ({err}); showing the database as it is"
    with store.reader() as con:
        if suite is not None:
            store.require_suite(con, suite)
        runs = store.runs(con, suite)
        latest = store.latest_values(con, suite, ["eval/return", *SYS_COLUMNS]) if suite is not None else {}
    for r in runs:
        if r["status"] == "running" and r["run_id"] in states:
            r["status"] = states[r["run_id"]]
    counts: dict[str, dict[str, int]] = {}
    for r in runs:
        c = counts.setdefault(r["suite"], {})
        c[r["status"]] = c.get(r["status"], 0) + 1
    return Snapshot(runs, latest, counts, note)
