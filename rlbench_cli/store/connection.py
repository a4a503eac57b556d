"""Opening the results database: a writer for the moment it writes, readers that retry on a lock.

DuckDB lets one process hold a file for writing, and while it does, no other process can open it at all. So
the coordinator opens the file only for the moment it writes (``writer()``, ``open_writer()``), readers
(``reader()``) retry briefly on a lock instead of failing, and ``batch`` groups many writes into one
transaction. Writers of several processes (two coordinators of different suites, an import) take turns at
the store's write lock (``locks``) for as long as they hold a read-write connection.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import StoreBusy, StoreError, error_line
from .locks import acquire_write, release_write
from .schema import migrate


def default_db_path() -> Path:
    return Path(os.environ.get("RLBENCH_DB") or "results/rlbench.duckdb")


def _is_lock_error(e: Exception) -> bool:
    text = str(e)
    return "lock" in text.lower() or "Conflicting lock" in text


def write_locked(path: Path) -> bool:
    """Whether another process holds the database file for writing now: DuckDB's fcntl write lock on it,
    as ``/proc/locks`` lists it (Linux; False where that cannot be read). A reader waits while it is held
    without trying to open the file: a failed open costs ~5 ms of CPU, a look at the list ~0.1 ms."""
    try:
        st = os.stat(path)
        with open("/proc/locks", "rb") as f:
            text = f.read()
    except OSError:
        return False
    # "N: POSIX  ADVISORY  WRITE PID MAJ:MIN:INODE START END"; this process's own writer is not waited for
    file_id = b"%02x:%02x:%d" % (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    for line in text.splitlines():
        fields = line.split()
        if (
            file_id in fields
            and b"WRITE" in fields
            and fields[fields.index(file_id) - 1] != b"%d" % os.getpid()
        ):
            return True
    return False


class Connections:
    """The file and its connections; the base of ``Store``. Cheap to construct; connections are opened per
    operation."""

    def __init__(self, path: str | Path | None = None, wait: float = 60.0):
        self.path = Path(path) if path is not None else default_db_path()
        self.wait = wait
        self._batch_con: Any = None  # the connection of an open ``batch``: its writes join that transaction

    # -- connections ------------------------------------------------------------------------------
    def _connect(self, read_only: bool, wait: float | None = None) -> Any:
        import duckdb

        problem = _not_duckdb(self.path)
        if problem:  # before DuckDB sees it: it would open a SQLite file through an extension it downloads
            raise StoreError(
                f"{self.path}: not a usable DuckDB results file ({problem}); pass your rlbench results file "
                "with --db or RLBENCH_DB"
            )
        wait = self.wait if wait is None else wait
        deadline = time.monotonic() + wait
        delay = 0.02
        while True:
            if read_only and time.monotonic() < deadline and write_locked(self.path):
                time.sleep(0.02)  # the writer's window (a few tenths of a second): looked at, not tried
                continue
            try:
                return duckdb.connect(str(self.path), read_only=read_only)
            except duckdb.Error as e:  # IOException on a lock or a file that is not DuckDB
                if _is_lock_error(e) and time.monotonic() < deadline:
                    time.sleep(delay)
                    delay = min(
                        delay * 1.5, 0.1
                    )  # a writer in a burst leaves the file free >= 0.25 s at a time
                    continue
                if _is_lock_error(e):
                    raise StoreBusy(
                        f"{self.path}: another process has held the database for {wait:.0f}s; "
                        "try again when it finishes, or copy the file and pass the copy with --db"
                    ) from None
                raise StoreError(f"{self.path}: not a usable DuckDB results file ({error_line(e)})") from None

    @contextmanager
    def writer(self) -> Iterator[Any]:
        """A read-write connection, migrated to the current schema; closed on exit."""
        con = self.open_writer()
        try:
            yield con
        finally:
            con.close()

    def open_writer(self, migrated: bool = False, wait: float | None = None) -> Any:
        """A read-write connection the caller closes, holding the store's write lock until then (``locks``).
        ``migrated``: this process has already brought the file to the current schema (skips the check,
        ~15 ms); ``wait``: seconds to wait for another writer or a reader (default the store's; 0 raises
        StoreBusy at once if another process holds the lock or the file)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        wait = self.wait if wait is None else wait
        deadline = time.monotonic() + wait
        acquire_write(self.path, wait)
        try:
            con = self._connect(read_only=False, wait=max(0.0, deadline - time.monotonic()))
        except BaseException:
            release_write(self.path, opened=False)
            raise
        writer = WriterConnection(con, self.path)
        if not migrated:
            try:
                migrate(con, self.path)
            except BaseException:
                writer.close()
                raise
        return writer

    @contextmanager
    def batch(self, con: Any) -> Iterator[Any]:
        """One transaction around several writes (``start_attempt``, ``ingest_shards``, ``end_attempt``, ...
        of many runs): all of them are recorded, or none. Those methods then skip their own transactions."""
        con.execute("BEGIN TRANSACTION")
        self._batch_con = con
        try:
            yield con
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        finally:
            self._batch_con = None

    @contextmanager
    def _transaction(self, con: Any) -> Iterator[None]:
        if self._batch_con is con:  # already inside ``batch``
            yield
            return
        con.execute("BEGIN TRANSACTION")
        try:
            yield
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    @contextmanager
    def reader(self) -> Iterator[Any]:
        """A read-only connection. Waits (up to ``wait`` seconds) while a writer holds the file."""
        if not self.path.exists():
            raise StoreError(
                f"{self.path}: no results database here; run a suite first (rlbench run SUITE.yaml) "
                "or point --db / RLBENCH_DB at your file"
            )
        con = self._connect(read_only=True)
        try:
            from .schema import check_version

            check_version(con, self.path)
            yield con
        finally:
            con.close()

    def exists(self) -> bool:
        return self.path.exists()


class WriterConnection:
    """A read-write DuckDB connection (every attribute is the connection's) that releases the store's write
    lock when it is closed."""

    def __init__(self, con: Any, db: Path):
        self._con = con
        self._db = db
        self._open = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)

    def close(self) -> None:
        if not self._open:
            return
        self._open = False
        try:
            self._con.close()
        finally:
            release_write(self._db)

    def __enter__(self) -> WriterConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # a connection dropped unclosed must not keep the lock for the process's life
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit the modules may be gone
            pass


def _not_duckdb(path: Path) -> str | None:
    """Why ``path`` is not a DuckDB database, from its first bytes; None when it is, or is not a file."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError:  # missing (DuckDB creates it), a folder or unreadable: DuckDB's own message says so
        return None
    if not head:
        return None
    if head.startswith(b"SQLite format 3"):
        return "it is a SQLite database"
    if head[8:12] != b"DUCK":
        return "it is not a DuckDB database file"
    return None
