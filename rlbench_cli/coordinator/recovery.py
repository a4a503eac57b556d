"""Crash recovery and re-attaching: what a dead coordinator left, and jobs that outlive their coordinator.

Nothing a worker writes depends on the database: shards and ``result.json`` are on disk before their record.
So the next ``rlbench run`` of a suite first recovers: runs left 'running' (or whose newest attempt folder
this database's coordinator started, ``started.json``, without recording it) whose worker wrote
``result.json`` are ingested and closed with that result (no re-run); the others are closed 'interrupted'
and restarted as a new attempt. Runs on an executor whose jobs outlive the coordinator (Slurm; the table's
``outlives_coordinator``) are asked for where they stand instead (``recover_detached``): a later run waits
for the ones still alive there, ``rlbench status`` shows them, ``rlbench cancel`` stops them.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

from .. import artifacts
from ..executors import EXECUTORS
from ..runner import attempt_dir, read_result
from ..sink import list_shards
from ..store import Store

__all__ = [
    "runs_root",
    "mark_started",
    "set_aside",
    "recover",
    "detached_rows",
    "recover_detached",
    "started_at",
    "STARTED",
]


def runs_root(store: Store) -> Path:
    """Run folders live next to the database: results/runs/<suite>/<run_id>/attempt-N/."""
    return store.path.parent / "runs"


STARTED = "started.json"  # in an attempt folder: which database's coordinator started it (before its record)


def mark_started(folder: Path, store: Store) -> None:
    """Note in an attempt folder, before its job is sent, that this database's coordinator started it: so
    the next ``rlbench run`` recovers it even if the start never reached the database (``recover``)."""
    (folder / STARTED).write_text(json.dumps({"db": str(store.path.resolve())}))


def _unrecorded_attempt(store: Store, root: Path, r: dict[str, Any]) -> int | None:
    """The newest attempt of a run this database's coordinator started beyond what the database says (it
    was killed before it recorded the start): its number, or None. Folders another database's runs left
    (two files next to each other share the runs folder) are not this database's."""
    n, found = (r["attempts"] or 0) + 1, None
    mine = str(store.path.resolve())
    while (folder := attempt_dir(root, r["suite"], r["run_id"], n)).is_dir():
        try:
            if json.loads((folder / STARTED).read_text()).get("db") == mine:
                found = n
        except (OSError, ValueError, AttributeError):
            pass
        n += 1
    return found


def set_aside(folder: Path) -> Path | None:
    """Rename an attempt folder that already holds files, before its attempt starts, to a name beside it
    (``attempt-N.stale-<time>``; nothing is deleted), and return the new path; None if it is empty or absent.
    An attempt starts in an empty folder, so no shard left there by another database's run (two database
    files next to each other share the runs folder) is ingested as this attempt's; and a first attempt
    finds no checkpoint to resume (``checkpoint.stale-<time>``). This database's own started-but-unrecorded
    attempts were recovered before (``recover``), so they are never planned again."""
    try:
        next(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError, StopIteration):
        return None
    stamp = time.strftime("%Y%m%dT%H%M%S")
    dest, n = folder.with_name(f"{folder.name}.stale-{stamp}"), 1
    while dest.exists():
        n += 1
        dest = folder.with_name(f"{folder.name}.stale-{stamp}-{n}")
    folder.rename(dest)
    return dest


def started_at(placement: dict[str, Any] | None) -> float | None:
    """When a job found where it was sent started running (its placement.json's wall-clock time), None while
    queued."""
    if placement is None:
        return None
    t = placement.get("started_at")
    return float(t) if isinstance(t, (int, float)) else time.time()


def _detached(r: dict[str, Any]) -> bool:
    """Whether the store says run ``r``'s newest attempt went to an executor whose jobs outlive the
    coordinator (with its job id): such a run is asked for, never closed as a dead coordinator's."""
    kind = EXECUTORS.get(r.get("executor") or "")
    return kind is not None and kind.outlives_coordinator and bool(r.get("job_id"))


def recover(store: Store, con: Any, root: Path, rows: list[dict[str, Any]]) -> tuple[int, list[Any]]:
    """Close runs a dead coordinator left 'running'. Returns how many had in fact finished, and the runs
    still queued or running where they were sent (``recover_detached``: those are left 'running', not
    interrupted)."""
    recovered, live = recover_detached(store, con, root, rows)
    for r in rows:
        if r["status"] not in ("running", "finished") and not _detached(r):
            n = _unrecorded_attempt(store, root, r)
            if n is not None:  # started, its start not yet recorded: recorded now, then closed as below
                result = read_result(attempt_dir(root, r["suite"], r["run_id"], n)) or {}
                store.start_attempt(con, r["run_id"], n, {
                    "started_at": result.get("started_at") or time.time(), "device": result.get("device"),
                    "host": socket.gethostname()})  # fmt: skip
                r["status"], r["attempts"] = "running", n
        if r["status"] != "running" or _detached(r):
            continue
        folder = attempt_dir(root, r["suite"], r["run_id"], r["attempts"])
        store.ingest_shards(con, r["run_id"], r["attempts"], list_shards(folder / "metrics"))
        store.ingest_artifacts(con, [(r["run_id"], artifacts.current(artifacts.read_index(folder)))])
        result = read_result(folder)
        if result is not None:
            store.end_attempt(con, r["run_id"], result["status"], result)
            r["status"] = result["status"]
            recovered += result["status"] == "finished"
        else:
            store.end_attempt(con, r["run_id"], "interrupted",
                              {"error": "the coordinator stopped before this run ended"})  # fmt: skip
            r["status"] = "interrupted"
    return recovered, live


def detached_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs the store says are queued or running on an executor whose jobs outlive the coordinator."""
    return [r for r in rows if r["status"] == "running" and _detached(r)]


def recover_detached(store: Store, con: Any, root: Path, rows: list[dict[str, Any]]) -> tuple[int, list[Any]]:
    """Re-attach to runs whose jobs outlive the coordinator (after --detach, or a coordinator killed with -9):
    ask their executor (its module's ``survey``) where each stands, record a requeue as the new attempt it
    is, the node once the job has started, ingest every shard written so far, and close the runs that have
    ended with their result or the executor's cause.

    Returns (how many had finished, the surveys of runs still queued or running there; each names its
    ``executor``). ``rows`` are updated in place. Without the executor's commands (Slurm's on PATH) it raises
    UsageError and changes nothing."""
    todo = detached_rows(rows)
    if not todo:
        return 0, []
    by_id = {r["run_id"]: r for r in todo}
    surveys = []
    for name in dict.fromkeys(r["executor"] for r in todo):
        surveys += EXECUTORS[name].module().survey(root, [r for r in todo if r["executor"] == name])
    finished, live = 0, []
    for s in surveys:
        r = by_id[s.run_id]
        p = s.placement
        if s.attempt != r["attempts"] or (p is not None and not r.get("host")):
            store.start_attempt(con, s.run_id, s.attempt, {
                "started_at": (p or {}).get("started_at") or time.time(), "host": (p or {}).get("host") or "",
                "device": (p or {}).get("device") or "", "executor": s.executor, "job_id": s.job_id,
                "git_commit": r.get("git_commit"), "git_dirty": r.get("git_dirty"), "python": r.get("python"),
                "packages": json.loads(r["packages"]) if isinstance(r.get("packages"), str) else r.get("packages") or {},
            })  # fmt: skip
            r["attempts"], r["host"] = s.attempt, (p or {}).get("host") or ""
        store.ingest_shards(con, s.run_id, s.attempt, list_shards(s.folder / "metrics"))
        store.ingest_artifacts(con, [(s.run_id, artifacts.current(artifacts.read_index(s.folder)))])
        if s.outcome is None:
            live.append(s)
            continue
        o = s.outcome
        store.end_attempt(con, s.run_id, o.status, {"exit_code": o.exit_code, "error": o.error,
                                                   "duration_s": o.duration_s, "ended_at": time.time()})  # fmt: skip
        r["status"] = o.status
        finished += o.status == "finished"
    return finished, live
