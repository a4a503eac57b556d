"""What changed, and a run's new points, without opening the database: ``rlbench ui``'s live path.

Opening DuckDB costs 20-60 ms of CPU (more while its write-ahead log grows), and while the UI holds the file
the coordinator cannot write. So the page does not poll the database. It asks ``/api/changes``, which
answers as soon as something changed (a long poll: an idle page costs nothing) from ``stat`` calls alone:

- ``db``: the database file and its write-ahead log (inode, size, modification time), which change on every
  commit of ``rlbench run``;
- ``files`` (with ``run=ID``): that run's folder: its latest attempt, the attempt's ``metrics/`` folder (a
  shard renamed into place changes it), ``result.json`` and the size of ``output.log``; (with
  ``suite=NAME`` and ``metric=M``) the shards holding rows of M in the ``metrics/`` folders of the suite's
  running runs' current attempts (at most ``MAX_SUITE_RUNS``, looked up in the database once per change of
  it), so a suite's page sees a new row of the metric it shows one flush after it is logged, not one
  ingest and one refresh later.

A run's points come from its latest attempt's shards (``points``): a shard is written whole and never
changed, and the store's rows of a run are exactly its current attempt's shards (a new attempt drops the old
rows), so the files are the same rows, sooner, and only the shards not read before are parsed. A run without
shards on disk (imported, or its folder removed) is read from the database, once per database change."""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

from ..coordinator import runs_root
from ..errors import StoreError
from ..runner import attempt_dir
from ..sink import list_shards
from .live import read_shard

MAX_RUNS = 32  # runs whose rows are kept in memory (the run pages open lately)
MAX_SUITE_RUNS = 64  # a suite's running runs whose shard folders a long poll watches (as live.MAX_RUNS)
RUNNING_TTL_S = 5.0  # a suite's running runs looked up in the database at most this often
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
        self._running: dict[str, tuple[str, list[Path], float]] = {}  # suite -> (db stamp, folders, when)
        self._folders: dict[tuple[Path, str], tuple[Any, int]] = {}  # (folder, metric) -> (stat, shards)
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

    def running_folders(self, suite: str) -> list[Path]:
        """The ``metrics/`` folders of the suite's running runs' current attempts (``MAX_SUITE_RUNS`` at
        most, by run id), read from the database again when it changed, at most every ``RUNNING_TTL_S``
        (while rlbench run writes, it changes every second: an attach each time would cost more than the
        rest of the live path; a run started meanwhile shows on the page's next whole refresh)."""
        stamp, now = self.db_stamp(), time.monotonic()
        cached = self._running.get(suite)
        if cached is not None and (cached[0] == stamp or now - cached[2] < RUNNING_TTL_S):
            return cached[1]
        with self.store.reader() as con:
            found = con.execute(
                "SELECT run_id, attempts FROM runs WHERE suite = ? AND status = 'running' AND attempts > 0 "
                f"ORDER BY run_id LIMIT {MAX_SUITE_RUNS}",
                [suite],
            ).fetchall()
        root, folders = runs_root(self.store), []
        for run_id, attempts in found:
            try:
                folders.append(attempt_dir(root, suite, run_id, int(attempts)) / "metrics")
            except StoreError:  # a name that cannot name a folder: no shards to watch
                continue
        if len(self._running) >= MAX_RUNS:
            self._running.clear()
        self._running[suite] = (stamp, folders, now)
        return folders

    def shards_known(self, folders: list[Path], metric: str = "") -> bool:
        """Whether ``shards_stamp`` needs stat calls only (no folder changed since it last looked)."""
        for folder in folders:
            cached = self._folders.get((folder, metric))
            if cached is None or cached[0] != file_stamp(folder):
                return False
        return True

    def shards_stamp(self, folders: list[Path], metric: str = "") -> str:
        """What a suite's page waits on: in each of its running runs' shard folders, how many shards hold a
        row of ``metric`` (of any metric when empty), so a shard of other metrics (a run's system metrics)
        refreshes nothing. A folder is listed again only when its stat changed; a shard is parsed once
        (``live.read_shard``: the curves' refresh reads the same parse)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        counts = []
        for folder in folders:
            stat, key = file_stamp(folder), (folder, metric)
            cached = self._folders.get(key)
            if cached is None or cached[0] != stat:
                n = 0
                for shard in list_shards(folder):
                    try:
                        names = read_shard(shard).column("name")
                        n += not metric or bool(pc.any(pc.equal(names, metric)).as_py())
                    except (OSError, pa.ArrowInvalid):  # removed meanwhile: the database has its rows
                        continue
                if len(self._folders) >= 4 * MAX_SUITE_RUNS:
                    self._folders.clear()
                cached = self._folders[key] = (stat, n)
            counts.append((folder.parent.name, cached[1]))
        return repr(counts)

    def stamp(
        self, run_id: str | None, folders: list[Path] | None = None, metric: str = ""
    ) -> dict[str, str]:
        """``{db, files}``: ``files`` of the run ``run_id``, else of a suite's running runs' shard ``folders``
        (``shards_stamp`` of ``metric``)."""
        if run_id:
            files = self.files_stamp(run_id)
        elif folders is not None:
            files = repr([f.parent.parent.name for f in folders]) + self.shards_stamp(folders, metric)
        else:
            files = ""
        return {"db": self.db_stamp(), "files": files}

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
