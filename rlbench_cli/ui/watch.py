"""What changed, and a run's new points, without opening the database: ``rlbench ui``'s live path.

Opening DuckDB costs 20-60 ms of CPU (more while its write-ahead log grows), and while the UI holds the file
the coordinator cannot write. So the page does not poll the database. It asks ``/api/changes``, which
answers as soon as something changed (a long poll: an idle page costs nothing) from ``stat`` calls alone:

- ``db``: the database file and its write-ahead log (inode, size, modification time), which change on every
  commit of ``rlbench run``;
- ``files`` (with ``run=ID``): that run's folder: its latest attempt, the attempt's ``metrics/`` folder (a
  shard renamed into place changes it), ``result.json`` and the size of ``output.log``.

A run's points come from its latest attempt's shards (``points``): a shard is written whole and never
changed, and the store's rows of a run are exactly its current attempt's shards (a new attempt drops the old
rows), so the files are the same rows, sooner, and only the shards not read before are parsed. A run without
shards on disk (imported, or its folder removed) is read from the database, once per database change."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from ..coordinator import runs_root
from ..sink import list_shards

MAX_RUNS = 32  # runs whose rows are kept in memory (the run pages open lately)
MAX_WAIT_S = 30.0  # the longest a long poll is held


def file_stamp(path: Path) -> tuple[int, int, int] | None:
    """``(inode, size, mtime in ns)`` of ``path``; None when it is not there."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def latest_attempt(folder: Path) -> int:
    """The highest N of the ``attempt-N`` folders in a run's folder; 0 when there is none."""
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    numbers = [int(n[8:]) for n in names if n.startswith("attempt-") and n[8:].isdigit()]
    return max(numbers, default=0)


class _Rows:
    """One attempt's rows, grown shard by shard: per metric, steps, values and wall times in logged order."""

    def __init__(self, metrics: Path):
        self.metrics = metrics
        self.read: list[str] = []  # shard names parsed, in order
        self.by_name: dict[str, tuple[list[int], list[float], list[float]]] = {}

    def update(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        names = [p.name for p in list_shards(self.metrics)]
        if names[: len(self.read)] != self.read:  # a shard set aside (a requeued attempt): read them again
            self.read, self.by_name = [], {}
        for name in names[len(self.read) :]:
            try:
                t = pq.read_table(self.metrics / name, columns=["step", "name", "value", "wall_time"])
            except (OSError, pa.ArrowInvalid):  # the folder removed meanwhile: the database has the rows
                return
            cols = [t.column(c).to_pylist() for c in ("step", "name", "value", "wall_time")]
            for step, metric, value, wall in zip(*cols):
                steps, values, walls = self.by_name.setdefault(metric, ([], [], []))
                steps.append(step)
                values.append(value)
                walls.append(wall)
            self.read.append(name)


class Watch:
    """The live path's state for one store: run rows looked up once, each watched run's parsed shards."""

    def __init__(self, store: Any):
        self.store = store
        self._suites: dict[str, str] = {}  # run_id -> suite (never changes)
        self._rows: OrderedDict[Path, _Rows] = OrderedDict()
        self._stored: dict[
            tuple[str, str], tuple[Any, dict[str, Any]]
        ] = {}  # (run, metric) -> (db stamp, out)
        self._lock = threading.Lock()

    def db_stamp(self) -> str:
        path = self.store.path
        return repr((file_stamp(path), file_stamp(path.with_name(path.name + ".wal"))))

    def suite_of(self, run_id: str) -> str | None:
        """The run's suite (from the database the first time); None for an unknown run."""
        if run_id not in self._suites:
            with self.store.reader() as con:
                row = con.execute("SELECT suite FROM runs WHERE run_id = ?", [run_id]).fetchone()
            if row is None:
                return None
            self._suites[run_id] = row[0]
        return self._suites[run_id]

    def run_folder(self, run_id: str) -> Path | None:
        suite = self.suite_of(run_id)
        for part in (suite, run_id):
            if part is None or part in ("", ".", "..") or any(c in part for c in "/\\\0"):
                return None
        return runs_root(self.store) / str(suite) / run_id

    def files_stamp(self, run_id: str) -> str:
        """What changes in a run's folder while it runs (stat calls only)."""
        folder = self.run_folder(run_id)
        if folder is None:
            return ""
        n = latest_attempt(folder)
        attempt = folder / f"attempt-{n}"
        return repr((n, file_stamp(attempt / "metrics"), file_stamp(attempt / "result.json"),
                     file_stamp(attempt / "output.log")))  # fmt: skip

    def stamp(self, run_id: str | None) -> dict[str, str]:
        return {"db": self.db_stamp(), "files": self.files_stamp(run_id) if run_id else ""}

    def points(
        self, run_id: str, metric: str, after: int = 0, attempt: int | None = None
    ) -> dict[str, Any] | None:
        """One metric of one run in logged order: the points after the first ``after`` the page has of
        ``attempt`` (all of them when the attempt is another one, or the rows are not those any more:
        ``reset``); None for an unknown run. From the latest attempt's shards, else from the database."""
        folder = self.run_folder(run_id)
        if folder is None:
            return None
        n = latest_attempt(folder)
        metrics = folder / f"attempt-{n}" / "metrics"
        with self._lock:
            rows = self._rows.get(metrics)
            if rows is None:
                rows = self._rows[metrics] = _Rows(metrics)
                while len(self._rows) > MAX_RUNS:
                    self._rows.popitem(last=False)
            self._rows.move_to_end(metrics)
            rows.update()
            names = sorted(rows.by_name)
            if rows.read or metric is None:
                steps, values, walls = (list(c) for c in rows.by_name.get(metric or "", ([], [], [])))
            else:
                n, (steps, values, walls) = 0, self._from_store(run_id, metric)
        reset = attempt != n or after > len(steps)
        start = 0 if reset else after
        return {"attempt": n, "total": len(steps), "reset": reset, "names": names, "step": steps[start:],
                "value": values[start:], "wall": walls[start:]}  # fmt: skip

    def _from_store(self, run_id: str, metric: str) -> tuple[list[int], list[float], list[float]]:
        """A run's points from the database (sorted by step), read again only when the database changed."""
        key, stamp = (run_id, metric), self.db_stamp()
        cached = self._stored.get(key)
        if cached is None or cached[0] != stamp:
            with self.store.reader() as con:
                found = con.execute(
                    "SELECT step, value, wall_time FROM metrics WHERE run_id = ? AND name = ? ORDER BY step",
                    [run_id, metric],
                ).fetchall()
            if len(self._stored) >= MAX_RUNS:
                self._stored.clear()
            cached = self._stored[key] = (stamp, {"cols": [list(c) for c in zip(*found)] or [[], [], []]})
        return tuple(cached[1]["cols"])  # type: ignore[return-value]
