"""The coordinator's database writes, batched: several runs' starts, shard ingests and ends in one short
transaction (at most every BATCH_S, on a connection held at most HOLD_S at a time, then left free GAP_S), so
readers (`rlbench fetch`, `plot`) get in between and a busy file never blocks the loop."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import artifacts
from ..errors import StoreBusy
from ..executors.base import Job
from ..sink import list_shards
from ..store import Store

__all__ = ["Recorder", "BATCH_S", "HOLD_S", "GAP_S"]

# The writer connection: writes queued within BATCH_S share one transaction; the file is held at most HOLD_S
# in one go, then left free at least GAP_S, so `rlbench fetch` / `plot` (which retry every <= 0.1 s) get in.
BATCH_S = 0.1
HOLD_S = 0.5
GAP_S = 0.25


@dataclass
class _Op:
    fn: Callable[[Any], None]


@dataclass
class _Ingest:
    run_id: str
    attempt: int
    metrics: Path


@dataclass
class _Start:
    run_id: str
    attempt: int
    manifest: dict[str, Any]


@dataclass
class _End:
    run_id: str
    status: str
    outcome: dict[str, Any]


_Write = _Op | _Ingest | _Start | _End


class Recorder:
    """The coordinator's writes, batched: ``start``, ``ingest`` and ``end`` queue a run's (``add(op)`` any other
    function of a writer connection); ``tick()``
    runs the queued ones in one transaction once BATCH_S has passed since the last, on a connection kept
    open across a burst of writes (no connect, schema check and close, ~60 ms, per write) and released
    after HOLD_S, then left closed for GAP_S. A reader holding the file never blocks the loop: the writes
    wait in the queue. ``eager``: every write is recorded before ``add`` returns (Slurm: a submitted job must
    be on record before anything else happens). ``close()`` records what is left, waiting for the file."""

    def __init__(self, store: Store, eager: bool = False):
        self.store = store
        self.eager = eager
        self.ops: list[tuple[_Write, Callable[[], None] | None]] = []
        self.con: Any = None
        self.opened = 0.0
        self.released = -1e9
        self.last_flush = -1e9
        self.stats = {"flushes": 0, "ops": 0, "connects": 0, "write_s": 0.0, "connect_s": 0.0, "close_s": 0.0}
        # (run_id, attempt) -> size of its artifact index when last recorded: an unchanged index is not read
        self.index_sizes: dict[tuple[str, int], int] = {}
        self._index_pending: dict[tuple[str, int], int] = {}
        # (run_id, attempt) -> names of its shards recorded by this recorder: a tick's ingest of a run whose
        # folder holds no other shard asks nothing of the database (a 2,048-seed pack is ingested every second)
        self.recorded: dict[tuple[str, int], set[str]] = {}
        self._recorded_pending: dict[tuple[str, int], list[str]] = {}

    def add(self, op: Callable[[Any], None], after: Callable[[], None] | None = None) -> None:
        """Queue ``op(con)``; ``after()`` runs once it is committed (e.g. the progress line saying so)."""
        self.ops.append((_Op(op), after))
        self._enqueued()

    def start(self, run_id: str, attempt: int, manifest: dict[str, Any],
              after: Callable[[], None] | None = None) -> None:  # fmt: skip
        """Queue ``Store.start_attempt``; the starts, ingests and ends of a transaction go in a few statements
        (``Store.start_attempts``, ``ingest_many``, ``end_attempts``), each run's in the order queued."""
        self.ops.append((_Start(run_id, attempt, manifest), after))
        self._enqueued()

    def end(
        self, run_id: str, status: str, outcome: dict[str, Any], after: Callable[[], None] | None = None
    ) -> None:
        """Queue ``Store.end_attempt`` (see ``start``)."""
        self.ops.append((_End(run_id, status, outcome), after))
        self._enqueued()

    def ingest(self, job: Job) -> None:
        """Queue the ingest of the shards in ``job``'s folder; the ingests of one transaction are one
        statement per table (``Store.ingest_many``)."""
        self.ops.append((_Ingest(job.spec.run_id, job.attempt, job.folder / "metrics"), None))
        self._enqueued()

    def _enqueued(self) -> None:
        if self.eager:  # and the file is released at once: Slurm's loop ticks only every few seconds
            self.flush(wait=True)
            self._release()
        else:
            self.tick()

    def tick(self) -> None:
        now = time.monotonic()
        if self.con is not None and now - self.opened >= HOLD_S:
            self._release()
        if (
            self.ops
            and now - self.last_flush >= BATCH_S
            and (self.con is not None or now - self.released >= GAP_S)
        ):
            self.flush(wait=False)

    def flush(self, wait: bool = True) -> None:
        """Record every queued write in one transaction. ``wait=False``: if another process holds the file,
        leave them queued for the next tick."""
        if not self.ops:
            return
        if self.con is None:
            t0 = time.monotonic()
            try:
                self.con = self.store.open_writer(migrated=True, wait=None if wait else 0)
            except StoreBusy:
                if wait:
                    raise
                return
            self.opened = time.monotonic()
            self.stats["connects"] += 1
            self.stats["connect_s"] += self.opened - t0
        ops, self.ops = self.ops, []
        t0 = time.monotonic()
        self._index_pending, self._recorded_pending = {}, {}
        try:
            with self.store.batch(self.con) as con:
                self._write(con, [op for op, _ in ops])
        except BaseException:
            self.ops = ops + self.ops  # nothing of them was recorded: still to do
            raise
        self.index_sizes.update(self._index_pending)
        for key, names in self._recorded_pending.items():
            self.recorded.setdefault(key, set()).update(names)
        self.last_flush = time.monotonic()
        self.stats["write_s"] += self.last_flush - t0
        self.stats["flushes"] += 1
        self.stats["ops"] += len(ops)
        for _, after in ops:
            if after is not None:
                after()

    def _write(self, con: Any, ops: list[_Write]) -> None:
        """Record ``ops`` in segments: a segment's starts, then its ingests, then its ends, a statement or
        three each. Writes of different runs commute, so only each run's own order matters: a run's start
        after anything else of that run (a retry's start after the last attempt's ingest and end) opens a new
        segment, as does an end of a run already ended in this one, or any other write (``add``)."""
        starts: list[_Start] = []
        ingests: list[_Ingest] = []
        ends: list[_End] = []
        seen: set[str] = set()
        ended: set[str] = set()

        def segment() -> None:
            self.store.start_attempts(con, [(o.run_id, o.attempt, o.manifest) for o in starts])
            if ingests:
                self.store.ingest_many(con, self._new_shards(ingests))
                self.store.ingest_artifacts(con, self._changed_indexes(ingests))
            self.store.end_attempts(con, [(o.run_id, o.status, o.outcome) for o in ends])
            for done in (starts, ingests, ends, seen, ended):
                done.clear()

        for op in ops:
            if isinstance(op, _Op):
                segment()
                op.fn(con)
                continue
            if op.run_id in (seen if isinstance(op, _Start) else ended if isinstance(op, _End) else ()):
                segment()
            if isinstance(op, _Start):
                starts.append(op)
            elif isinstance(op, _Ingest):
                ingests.append(op)
            else:
                ends.append(op)
                ended.add(op.run_id)
            seen.add(op.run_id)
        segment()

    def _new_shards(self, ingests: list[_Ingest]) -> list[tuple[str, int, list[Path]]]:
        """(run_id, attempt, shards) of each ingested attempt whose folder holds shards this recorder has not
        recorded (the database still skips any recorded before, by another coordinator)."""
        out = []
        for i in ingests:
            key = (i.run_id, i.attempt)
            done = self.recorded.get(key, ())
            new = [p for p in list_shards(i.metrics) if p.name not in done]
            if new:
                out.append((i.run_id, i.attempt, new))
                self._recorded_pending.setdefault(key, []).extend(p.name for p in new)
        return out

    def _changed_indexes(self, ingests: list[_Ingest]) -> list[tuple[str, list[dict[str, Any]]]]:
        """The current artifacts (``artifacts.current``) of each ingested attempt whose index has grown since
        it was last recorded (a size check per attempt; the index is read only when it changed)."""
        out = []
        for i in ingests:
            key, folder = (i.run_id, i.attempt), i.metrics.parent
            try:
                size = (folder / artifacts.INDEX).stat().st_size
            except OSError:
                continue
            if self.index_sizes.get(key) == size or self._index_pending.get(key) == size:
                continue
            out = [item for item in out if item[0] != i.run_id]  # a run's newest attempt wins
            out.append((i.run_id, artifacts.current(artifacts.read_index(folder))))
            self._index_pending[key] = size
        return out

    def _release(self) -> None:
        if self.con is None:
            return
        t0 = time.monotonic()
        try:
            self.con.close()
        finally:
            self.con = None
            self.released = time.monotonic()
            self.stats["close_s"] += self.released - t0

    def close(self) -> None:
        try:
            self.flush(wait=True)
        finally:
            if self.con is not None:
                self._release()
