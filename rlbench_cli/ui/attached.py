"""The UI's reads through one in-memory DuckDB kept for the server's life, the store's file attached to it
read-only for the moment of a read.

Opening a DuckDB database makes a new database instance: about 20 ms of CPU, more than the reads of a live
refresh. Attaching the file to an instance that is already there costs about 1.5 ms. The file is held
exactly as a read-only connection holds it, from the ``ATTACH`` to the ``DETACH``: reads that overlap share
one attachment, the last one out detaches, so the UI still holds nothing between requests and
``rlbench run`` writes in between. While another process writes (``store.write_locked``) the attach waits
without trying, as ``Store.reader`` does.

The query box (``/api/sql``) does not come here: it switches external access off for its database
instance, which would leave this one unable to attach."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import StoreBusy, StoreError
from ..store.connection import _is_lock_error, _not_duckdb, write_locked
from ..store.schema import check_version

ALIAS = "rlbench_store"


class AttachedStore:
    """A ``Store`` whose ``reader()`` is a cursor of the shared instance, the file attached; everything else
    is the store's."""

    def __init__(self, store: Any):
        self._store = store
        self._db: Any = None
        self._users = 0
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def _attach(self) -> None:
        import duckdb

        path = self._store.path
        if not path.exists():
            raise StoreError(f"{path}: no results database here; run a suite first (rlbench run SUITE.yaml)")
        problem = _not_duckdb(path)
        if problem:
            raise StoreError(f"{path}: not a usable DuckDB results file ({problem}); pass another --db")
        if self._db is None:
            self._db = duckdb.connect(":memory:")
        deadline = time.monotonic() + self._store.wait
        quoted = str(path).replace("'", "''")
        while True:
            if time.monotonic() < deadline and write_locked(path):
                time.sleep(0.02)  # the writer's window: looked at, not tried
                continue
            try:
                self._db.execute(f"ATTACH '{quoted}' AS {ALIAS} (READ_ONLY)")
                break
            except duckdb.Error as e:
                if _is_lock_error(e) and time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                if _is_lock_error(e):
                    raise StoreBusy(
                        f"{path}: another process has held the database for {self._store.wait:.0f}s; try "
                        "again when it finishes"
                    ) from None
                raise StoreError(
                    f"{path}: not a usable DuckDB results file ({str(e).splitlines()[0]})"
                ) from None
        con = self._db.cursor()
        try:
            con.execute(f"USE {ALIAS}")
            check_version(con, path)
        except BaseException:
            con.close()
            self._db.execute(f"DETACH {ALIAS}")
            raise
        con.close()

    @contextmanager
    def reader(self) -> Iterator[Any]:
        """A cursor reading the store (waits, up to the store's ``wait``, while a writer holds the file)."""
        with self._lock:
            if self._users == 0:
                self._attach()
            self._users += 1
            con = self._db.cursor()
        try:
            con.execute(f"USE {ALIAS}")
            yield con
        finally:
            con.close()
            with self._lock:
                self._users -= 1
                if self._users == 0:
                    self._db.execute(f"DETACH {ALIAS}")
