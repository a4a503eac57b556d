"""The metric path inside a worker: buffered logging into append-only Parquet shards.

A run never opens the database. ``ShardSink.log`` appends to an in-memory list (about a microsecond a
scalar); a background thread writes the buffer to a new shard file once a second has passed since the last
one: at most one shard a second while rows keep coming, and the first row after a quiet second on disk within
``WAKE_S`` (a run's evaluation, logged now and then, is not held back by the clock). Each shard is
written to a temporary name and renamed, so a shard on disk is always complete: a killed worker loses at
most its last unflushed second. The coordinator ingests shards idempotently (``store``).

The background thread is a ``Flusher``: each sink has its own, or the sinks of a pack share one
(``ShardSink(..., flusher=shared)``: one thread for a job's N seeds, and at most ``FLUSH_WORKERS`` more
writing the shards of seeds due at once, each still flushed into its own shards by the same rule).

Shard layout: ``<run_dir>/attempt-<N>/metrics/<seq:08d>.parquet`` with columns
step (int64), name (string), value (float64), wall_time (float64, Unix seconds).
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from collections.abc import Mapping
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import Any, Protocol

from .arrowbuf import numbers, strings

__all__ = ["MetricSink", "ShardSink", "Flusher", "list_shards", "SHARD_SCHEMA_COLUMNS"]

SHARD_SCHEMA_COLUMNS = ("step", "name", "value", "wall_time")
WAKE_S = 0.1  # the flusher looks at the buffer this often (at most), and flushes when the interval is over
FLUSH_WORKERS = 4  # at most this many threads write the shards of sinks due at once (Flusher)


class MetricSink(Protocol):
    """What an algorithm sees: cheap per call, buffered."""

    def log(self, step: int, **values: float) -> None: ...

    def log_many(self, step: int, values: Mapping[str, float]) -> None: ...


class ShardSink:
    """Buffers metrics and flushes them to a Parquet shard once ``flush_interval`` seconds have passed since
    the last shard (looking every ``WAKE_S``), so rows logged after a quiet spell are written at once.

    The looking is done by a background ``Flusher``: the sink's own (``background``), one shared with other
    sinks (``flusher``: a pack's seeds), or none (``background=False``: only ``flush`` and ``close`` write).
    Thread-safe for one logging thread plus the flusher: the buffer is one list for the sink's life; a flush
    takes its first n rows (``_take``) and leaves rows appended meanwhile for the next. (Swapping in a new list
    lost rows: a logging call that had read ``self._buf`` before the swap appended to the old list after the
    flush had read it, about one step in four million-scalar runs of benchmarks/metric_throughput.py.)
    """

    def __init__(self, directory: str | Path, flush_interval: float = 1.0, background: bool = True,
                 flusher: Flusher | None = None):  # fmt: skip
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        import pyarrow.parquet  # noqa: F401  - imported here once, not on the first flush mid-training

        existing = list_shards(self.directory)
        self._seq = (int(existing[-1].stem) + 1) if existing else 0
        self._buf: list[tuple[int, float, dict[str, float]]] = []
        self._lock = threading.Lock()  # serialises flushes, never taken by log()
        self._interval = flush_interval
        self._last_flush = -float("inf")  # time.monotonic() of the last shard written
        self._closed = False
        self.rows_written = 0
        self._own: Flusher | None = None  # a flusher of its own, stopped by close()
        self._flusher = flusher
        if flusher is None and background:
            self._flusher = self._own = Flusher()
        if self._flusher is not None:
            self._flusher.add(self)

    # -- logging ---------------------------------------------------------------------------------
    # One tuple per call (not per scalar): the hot path is an append; columns are built at flush time.
    def log(self, step: int, **values: float) -> None:
        self._buf.append((step, time.time(), values))

    def log_many(self, step: int, values: Mapping[str, float]) -> None:
        self._buf.append((step, time.time(), dict(values)))

    def log_scalar(self, step: int, name: str, value: float) -> None:
        self._buf.append((step, time.time(), {name: value}))

    def log_columns(self, step: int, names: tuple[str, ...], values: Any) -> None:
        """The columnar call, for loops that log the same names every step (vectorised agents): ``names``
        a tuple built once and passed again each call, ``values`` a sequence or 1-D array of as many
        numbers. No dict is built per call; the flush stacks the values of calls with the same names."""
        if len(values) != len(names):
            raise ValueError(f"log_columns: {len(names)} names but {len(values)} values")
        if type(values) is list:
            # a tuple keeps the values of this call (the caller may reuse its list) and, holding only numbers,
            # is untracked by the garbage collector, like log_many's dicts: a buffer of lists would be
            # rescanned by every collection while it grows (3-4x the cost of the call itself)
            values = tuple(values)
        self._buf.append((step, time.time(), names, values))

    def log_block(self, steps: Any, names: tuple[str, ...], values: Any, mask: Any = None) -> None:
        """Many steps' rows in one call (a compiled program's rows for an evaluation interval): ``steps`` a
        1-D array of n steps, ``values`` an n x len(``names``) array, ``mask`` (optional, the same shape)
        which of its entries to write (an iteration in which no episode ended has no episode columns).
        The arrays are copied: the caller may reuse them."""
        import numpy as np

        steps = np.array(steps, np.int64, copy=True).reshape(-1)
        values = np.array(values, np.float64, copy=True)
        if values.shape != (len(steps), len(names)):
            raise ValueError(f"log_block: {len(steps)} steps x {len(names)} names but values of shape "
                             f"{values.shape}")  # fmt: skip
        if mask is not None:
            mask = np.array(mask, bool, copy=True)
            if mask.shape != values.shape:
                raise ValueError(f"log_block: mask of shape {mask.shape}, values of shape {values.shape}")
        if len(steps):
            self._buf.append((steps, time.time(), tuple(names), values, mask))

    # -- flushing --------------------------------------------------------------------------------
    def due(self) -> bool:
        """Whether the flusher should write a shard now: rows waiting, and the interval over since the last."""
        return bool(self._buf) and time.monotonic() - self._last_flush >= self._interval

    def flush(self) -> int:
        """Write everything buffered so far to one new shard. Returns rows written."""
        with self._lock:
            buf = self._take()
            if not buf:
                return 0
            return self._write(_to_table(buf))

    def _take(self) -> list[Any]:
        """The rows buffered so far, removed from the buffer. The buffer is never replaced, so a logging call
        that read ``self._buf`` before this appends after the rows taken, and the next flush writes it (the
        slice and the ``del`` are each one call under the GIL; an append between them lands past ``n``)."""
        buf = self._buf
        n = len(buf)
        rows = buf[:n]
        del buf[:n]
        return rows

    def write_table(self, table: Any) -> int:
        """Write rows that are already a table (the shard columns) as the next shard, after everything
        buffered so far: a resumed run's earlier rows. Returns rows written."""
        with self._lock:
            buf = self._take()
            n = self._write(_to_table(buf)) if buf else 0
            return n + self._write(table.select(list(SHARD_SCHEMA_COLUMNS)))

    def _write(self, table: Any) -> int:
        if table.num_rows == 0:
            return 0
        import pyarrow.parquet as pq

        final = self.directory / f"{self._seq:08d}.parquet"
        tmp = final.with_suffix(".tmp")
        pq.write_table(table, tmp, compression="snappy", use_dictionary=["name"])
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, final)
        self._last_flush = time.monotonic()
        self._seq += 1
        self.rows_written += table.num_rows
        return table.num_rows

    def close(self) -> None:
        """Leave the flusher (stopping it if it is the sink's own) and write what is left."""
        if self._closed:
            return
        self._closed = True
        if self._own is not None:
            self._own.close()
        elif self._flusher is not None:
            self._flusher.discard(self)
        self.flush()


class Flusher:
    """ONE background thread that looks after any number of sinks (a pack's seeds share one): every ``WAKE_S``
    (or a sink's shorter interval) it flushes each sink that is ``due``, each into its own folder. When several
    are due at once they are written by at most ``workers`` helper threads, started when first needed: a
    shard's fsync waits on the disk, which takes several at once (256 shards took 1.1-1.5 s one by one here,
    0.25-0.6 s four at a time), so a pack's rows are not held in memory longer than one seed's are. A sink whose
    flush raises leaves the flusher (as the thread of a sink of its own would have died): its rows wait for
    ``close``, whose flush raises to its run; the other sinks go on. The thread starts with the first sink
    added and stops with ``close``."""

    def __init__(self, name: str = "rlbench-sink", workers: int = FLUSH_WORKERS):
        self.name = name
        self.workers = workers
        self._sinks: list[ShardSink] = []  # replaced, never mutated: the thread iterates a snapshot
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pool: Any = None  # the helpers' ThreadPoolExecutor, once two sinks were due at once

    def add(self, sink: ShardSink) -> None:
        with self._guard:
            self._sinks = [*self._sinks, sink]
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
                self._thread.start()

    def discard(self, sink: ShardSink) -> None:
        with self._guard:
            self._sinks = [s for s in self._sinks if s is not sink]

    def __len__(self) -> int:
        return len(self._sinks)

    def _wait(self) -> float:
        return min([WAKE_S, *(s._interval for s in self._sinks)])

    def _loop(self) -> None:
        while not self._stop.wait(self._wait()):
            due = [s for s in self._sinks if s.due()]
            if len(due) > 1 and self.workers > 1:
                if self._pool is None:
                    from concurrent.futures import ThreadPoolExecutor

                    self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix=f"{self.name}-io")
                try:
                    list(self._pool.map(self._flush, due))  # all written before the next look
                except RuntimeError:  # the interpreter is exiting and takes no new work: write them here
                    for sink in due:
                        self._flush(sink)
            else:
                for sink in due:
                    self._flush(sink)

    def _flush(self, sink: ShardSink) -> None:
        try:
            sink.flush()
        except Exception:  # noqa: BLE001 - one sink's disk trouble is its run's, not the pack's
            self.discard(sink)
            traceback.print_exc()

    def close(self) -> None:
        """Stop the threads (within ``WAKE_S`` and the flushes under way); the sinks' ``close`` writes what
        they hold."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._pool is not None:
            self._pool.shutdown(wait=True)


def _to_table(buf: list[tuple[Any, ...]]) -> Any:
    """Columns from buffered calls: steps and times repeated per value, values flattened, names
    dictionary-encoded per distinct set of keys (a training loop logs the same keys again and again).
    Entries are ``(step, time, {name: value})`` from ``log``/``log_many``, ``(step, time, names, values)``
    from ``log_columns`` or ``(steps, time, names, values, mask)`` from ``log_block``."""
    import numpy as np
    import pyarrow as pa

    mapping = [c for c in buf if len(c) == 3]
    blocks = [c for c in buf if len(c) == 5]
    columnar = [c for c in buf if len(c) == 4] if mapping or blocks else buf  # only log_columns: no split
    parts = []
    if mapping:
        parts.append(_mapping_columns(mapping))
    if columnar:
        parts.append(_columnar_columns(columnar))
    parts.extend(_block_columns(b) for b in blocks)
    names: dict[str, int] = {}
    cols: dict[str, list[Any]] = {"step": [], "name": [], "value": [], "wall_time": []}
    for steps, keys, idx, values, times in parts:
        remap = np.array([names.setdefault(k, len(names)) for k in keys], np.int32)
        cols["step"].append(steps)
        cols["name"].append(remap[idx] if len(idx) else idx.astype(np.int32))
        cols["value"].append(values)
        cols["wall_time"].append(times)
    if len(parts) == 1:
        steps, name_idx, values, times = (cols[k][0] for k in ("step", "name", "value", "wall_time"))
    else:
        steps, name_idx, values, times = (
            np.concatenate(cols[k]) for k in ("step", "name", "value", "wall_time")
        )
    # from buffers: pa.array / pa.table of numpy arrays import pandas (a run's first flush, see arrowbuf)
    name_col = pa.DictionaryArray.from_arrays(numbers(np.asarray(name_idx, np.int32)), strings(list(names)))
    columns = [numbers(np.asarray(steps, np.int64)), name_col, numbers(np.asarray(values, np.float64)),
               numbers(np.asarray(times, np.float64))]  # fmt: skip
    return pa.Table.from_arrays(columns, names=list(SHARD_SCHEMA_COLUMNS))


def _mapping_columns(buf: list[tuple[int, float, dict[str, float]]]) -> tuple[Any, list[str], Any, Any, Any]:
    """(steps, names, name index per row, values, times) of ``log``/``log_many`` entries."""
    import numpy as np

    n_calls = len(buf)
    keysets: dict[tuple[str, ...], int] = {}
    kid = np.fromiter((keysets.setdefault(tuple(c[2]), len(keysets)) for c in buf), np.int64, n_calls)
    names: dict[str, int] = {}
    codes = [np.array([names.setdefault(k, len(names)) for k in ks], np.int32) for ks in keysets]
    sizes = np.array([len(c) for c in codes], np.int64)
    counts = sizes[kid]
    total = int(counts.sum())
    if len(codes) == 1:
        name_idx = np.tile(codes[0], n_calls)
    else:
        name_idx = np.concatenate([codes[k] for k in kid]) if total else np.zeros(0, np.int32)
    steps = np.repeat(np.fromiter((c[0] for c in buf), np.int64, n_calls), counts)
    times = np.repeat(np.fromiter((c[1] for c in buf), np.float64, n_calls), counts)
    try:
        values = np.fromiter(chain.from_iterable(c[2].values() for c in buf), np.float64, total)
    except (TypeError, ValueError):  # tensors and other number-likes: convert one by one
        values = np.array([float(v) for c in buf for v in c[2].values()], np.float64)
    return steps, list(names), name_idx, values, times


def _columnar_columns(
    buf: list[tuple[int, float, tuple[str, ...], Any]],
) -> tuple[Any, list[str], Any, Any, Any]:
    """(steps, names, name index per row, values, times) of ``log_columns`` entries, in call order."""
    import numpy as np

    n_calls = len(buf)
    keysets: dict[tuple[str, ...], int] = {}
    ids = np.fromiter(map(id, map(itemgetter(2), buf)), np.int64, n_calls)
    if (ids == ids[0]).all():  # one names tuple passed again and again (the usual loop): no per-call work
        keysets[tuple(buf[0][2])] = 0
        kid = np.zeros(n_calls, np.int64)
    else:
        by_id: dict[int, int] = {}  # group by identity first, then by the names themselves
        kid = np.empty(n_calls, np.int64)
        for i, c in enumerate(buf):
            k = by_id.get(id(c[2]))
            if k is None:
                k = by_id[id(c[2])] = keysets.setdefault(tuple(c[2]), len(keysets))
            kid[i] = k
    names: dict[str, int] = {}
    codes = [np.array([names.setdefault(k, len(names)) for k in ks], np.int32) for ks in keysets]
    sizes = np.array([len(c) for c in codes], np.int64)
    counts = sizes[kid]
    total = int(counts.sum())
    name_idx = np.tile(codes[0], n_calls) if len(codes) == 1 else np.concatenate([codes[k] for k in kid])
    try:
        values = np.fromiter(chain.from_iterable(c[3] for c in buf), np.float64, total)
    except (TypeError, ValueError):  # arrays of another dtype, tensors: convert row by row
        values = np.concatenate([np.asarray(c[3], np.float64).reshape(-1) for c in buf])
    steps = np.repeat(np.fromiter(map(itemgetter(0), buf), np.int64, n_calls), counts)
    times = np.repeat(np.fromiter(map(itemgetter(1), buf), np.float64, n_calls), counts)
    return steps, list(names), name_idx, values, times


def _block_columns(
    block: tuple[Any, float, tuple[str, ...], Any, Any],
) -> tuple[Any, list[str], Any, Any, Any]:
    """(steps, names, name index per row, values, times) of one ``log_block`` entry."""
    import numpy as np

    steps, t, names, values, mask = block
    n, m = values.shape
    step_col = np.repeat(steps, m)
    idx = np.tile(np.arange(m, dtype=np.int32), n)
    flat = values.reshape(-1)
    if mask is not None:
        keep = mask.reshape(-1)
        step_col, idx, flat = step_col[keep], idx[keep], flat[keep]
    return step_col, list(names), idx, flat, np.full(len(flat), t, np.float64)


def list_shards(directory: str | Path) -> list[Path]:
    """Complete shard files in ``directory``, oldest first (temporary files are never listed)."""
    d = Path(directory)
    try:
        names = os.listdir(d)  # names sorted as strings: a Path comparison is ~20x slower (2,048 runs a tick)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [d / n for n in sorted(n for n in names if n.endswith(".parquet"))]
