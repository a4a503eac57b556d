"""The metric path inside a worker: buffered logging into append-only Parquet shards.

A run never opens the database. ``ShardSink.log`` appends to an in-memory list (about a microsecond a
scalar); a background thread writes the buffer to a new shard file at least once a second. Each shard is
written to a temporary name and renamed, so a shard on disk is always complete: a killed worker loses at
most its last unflushed second. The coordinator ingests shards idempotently (``store``).

Shard layout: ``<run_dir>/attempt-<N>/metrics/<seq:08d>.parquet`` with columns
step (int64), name (string), value (float64), wall_time (float64, Unix seconds).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

__all__ = ["MetricSink", "ShardSink", "list_shards", "SHARD_SCHEMA_COLUMNS"]

SHARD_SCHEMA_COLUMNS = ("step", "name", "value", "wall_time")


class MetricSink(Protocol):
    """What an algorithm sees: cheap per call, buffered."""

    def log(self, step: int, **values: float) -> None: ...

    def log_many(self, step: int, values: Mapping[str, float]) -> None: ...


class ShardSink:
    """Buffers metrics and flushes them to Parquet shards every ``flush_interval`` seconds.

    Thread-safe for one logging thread plus the flusher: the buffer is a single list swapped atomically.
    """

    def __init__(self, directory: str | Path, flush_interval: float = 1.0, background: bool = True):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        existing = list_shards(self.directory)
        self._seq = (int(existing[-1].stem) + 1) if existing else 0
        self._buf: list[tuple[int, str, float, float]] = []
        self._lock = threading.Lock()  # serialises flushes, never taken by log()
        self._interval = flush_interval
        self._closed = False
        self.rows_written = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if background:
            self._thread = threading.Thread(target=self._loop, name="rlbench-sink", daemon=True)
            self._thread.start()

    # -- logging ---------------------------------------------------------------------------------
    def log(self, step: int, **values: float) -> None:
        t = time.time()
        self._buf.extend([(step, k, float(v), t) for k, v in values.items()])

    def log_many(self, step: int, values: Mapping[str, float]) -> None:
        t = time.time()
        self._buf.extend([(step, k, float(v), t) for k, v in values.items()])

    def log_scalar(self, step: int, name: str, value: float) -> None:
        self._buf.append((step, name, float(value), time.time()))

    # -- flushing --------------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.flush()

    def flush(self) -> int:
        """Write everything buffered so far to one new shard. Returns rows written."""
        with self._lock:
            buf, self._buf = self._buf, []
            if not buf:
                return 0
            import pyarrow as pa
            import pyarrow.parquet as pq

            steps, names, values, times = zip(*buf)
            table = pa.table(
                {
                    "step": pa.array(steps, pa.int64()),
                    "name": pa.array(names, pa.string()).dictionary_encode(),
                    "value": pa.array(values, pa.float64()),
                    "wall_time": pa.array(times, pa.float64()),
                }
            )
            final = self.directory / f"{self._seq:08d}.parquet"
            tmp = final.with_suffix(".tmp")
            pq.write_table(table, tmp, compression="zstd")
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, final)
            self._seq += 1
            self.rows_written += len(buf)
            return len(buf)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.flush()


def list_shards(directory: str | Path) -> list[Path]:
    """Complete shard files in ``directory``, oldest first (temporary files are never listed)."""
    d = Path(directory)
    if not d.is_dir():
        return []
    return sorted(p for p in d.iterdir() if p.suffix == ".parquet")
