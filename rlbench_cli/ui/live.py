"""Rows a running run has written and ``rlbench run`` has not ingested yet, for ``rlbench ui``'s live views.

A run flushes its metrics to a new Parquet shard every second; the coordinator ingests the shards of running
runs once a second. Between the two, the rows are already in complete files (a shard is written whole and
renamed into place, then never changed). The UI reads them there, so a row is on screen one flush and one
poll after it is logged, not one ingest later as well, and the coordinator writes no more often for it.

Which shards are pending comes from the ``shards`` table read on the same read-only connection as the rows:
while the UI holds it, the coordinator cannot ingest, so a shard is either in ``metrics`` or read from its
file, never both. Only runs whose status is ``running`` are looked at, and at most ``MAX_RUNS`` of them per
request (a suite with more running runs shows them one ingest later, as before)."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..coordinator import runs_root
from ..runner import attempt_dir
from ..sink import SHARD_SCHEMA_COLUMNS, list_shards

MAX_RUNS = 64  # running runs whose folders one request scans at most
MAX_CACHED = 4096  # parsed shards kept (a shard never changes once in place; keyed by path, size, mtime)
_parsed: OrderedDict[Any, Any] = OrderedDict()
_grown: OrderedDict[Any, tuple[tuple[str, ...], Any]] = OrderedDict()  # attempt_rows: (folder, metric) ->
_parsed_lock = threading.Lock()


def read_shard(path: Any) -> Any:
    """A shard's rows (``step, name, value, wall_time`` as int64, string, float64, float64), parsed once per
    (path, size, mtime): the live views read the same pending shards at every refresh."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    st = os.stat(path)
    key = (str(path), st.st_size, st.st_mtime_ns)
    with _parsed_lock:
        if key in _parsed:
            _parsed.move_to_end(key)
            return _parsed[key]
    t = pq.read_table(path, columns=list(SHARD_SCHEMA_COLUMNS))
    t = t.cast(pa.schema([("step", pa.int64()), ("name", pa.string()), ("value", pa.float64()),
                          ("wall_time", pa.float64())]))  # fmt: skip
    with _parsed_lock:
        _parsed[key] = t
        while len(_parsed) > MAX_CACHED:
            _parsed.popitem(last=False)
    return t


def _running(con: Any, run_ids: Sequence[str] | None) -> list[tuple[str, str, int]]:
    """``(run_id, suite, attempt)`` of running runs (of ``run_ids``, or any), at most ``MAX_RUNS``."""
    where, params = "status = 'running' AND attempts > 0", []
    if run_ids is not None:
        where += " AND list_contains(?::VARCHAR[], run_id)"
        params.append(list(run_ids))
    return con.execute(
        f"SELECT run_id, suite, attempts FROM runs WHERE {where} ORDER BY run_id LIMIT {MAX_RUNS}", params
    ).fetchall()


def _pending_files(store: Any, con: Any, runs: list[tuple[str, str, int]]) -> list[tuple[str, Any]]:
    """``(run_id, shard path)`` of each complete shard of these runs' current attempts that is not ingested."""
    if not runs:
        return []
    ingested = {
        (r, a, s)
        for r, a, s in con.execute(
            "SELECT run_id, attempt, shard FROM shards WHERE list_contains(?::VARCHAR[], run_id)",
            [[r for r, _, _ in runs]],
        ).fetchall()
    }
    root = runs_root(store)
    out = []
    for run_id, suite, attempt in runs:
        for shard in list_shards(attempt_dir(root, suite, run_id, int(attempt)) / "metrics"):
            if (run_id, int(attempt), shard.name) not in ingested:
                out.append((run_id, shard))
    return out


def pending_rows(store: Any, con: Any, run_ids: Sequence[str] | None, metric: str | None = None) -> Any:
    """``run_id, step, name, value, wall_time`` of the pending shards of these runs (running ones only), of
    one metric or all, as a pyarrow Table (no rows when none is pending). A shard that cannot be read (the
    run's folder removed meanwhile) is skipped: the next refresh has its rows from the store."""
    import pyarrow as pa
    import pyarrow.compute as pc

    tables = []
    for run_id, shard in _pending_files(store, con, _running(con, run_ids)):
        try:
            t = read_shard(shard)
        except (OSError, pa.ArrowInvalid):
            continue
        if metric is not None:
            t = t.filter(pc.equal(t.column("name"), metric))
        tables.append(t.add_column(0, "run_id", pa.array([run_id] * t.num_rows, pa.string())))
    if not tables:
        return pa.table({"run_id": pa.array([], pa.string()), "step": pa.array([], pa.int64()),
                         "name": pa.array([], pa.string()), "value": pa.array([], pa.float64()),
                         "wall_time": pa.array([], pa.float64())})  # fmt: skip
    return pa.concat_tables(tables)


def attempt_rows(metrics: Any, metric: str) -> Any:
    """Every row of ``metric`` in an attempt's ``metrics/`` folder (``step, value, wall_time``, a pyarrow
    Table): a running run's rows, ingested or not, as the store will hold them (a run's rows are its current
    attempt's shards). Grown shard by shard: a shard is parsed and filtered once. None when a shard cannot
    be read (the folder removed meanwhile: the store has the rows)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = tuple(p.name for p in list_shards(metrics))
    key = (str(metrics), metric)
    with _parsed_lock:
        done, table = _grown.get(key, ((), None))
    if names[: len(done)] != done:  # a shard set aside: from the first again
        done, table = (), None
    parts = [] if table is None else [table]
    for name in names[len(done) :]:
        try:
            t = read_shard(Path(metrics) / name)
        except (OSError, pa.ArrowInvalid):
            return None
        parts.append(t.filter(pc.equal(t.column("name"), metric)).select(["step", "value", "wall_time"]))
    if not parts:
        return pa.table({"step": pa.array([], pa.int64()), "value": pa.array([], pa.float64()),
                         "wall_time": pa.array([], pa.float64())})  # fmt: skip
    table = pa.concat_tables(parts).combine_chunks() if len(parts) > 1 else parts[0]
    with _parsed_lock:
        _grown[key] = (names, table)
        _grown.move_to_end(key)
        while len(_grown) > 4 * MAX_RUNS:
            _grown.popitem(last=False)
    return table
