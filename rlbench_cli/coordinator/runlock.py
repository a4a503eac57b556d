"""One ``rlbench run`` per suite and database: the run lock every ``rlbench run`` holds for its suite, and
``rlbench status`` / ``cancel`` take to record what they find of a suite (or only look, while a run holds it).

Coordinators of different suites share the database: each holds its own suite's run lock, and they take turns
at the file through the store's write lock (``store.locks``). Whatever a coordinator leaves behind when it is
killed (runs left 'running', attempts started without a record, a CUDA MPS daemon) is its suite's, so the next
holder of that suite's run lock, and only it, recovers it."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import StoreBusy

__all__ = ["RunLock", "unless_running", "run_lock_path"]


def run_lock_path(db: Path, suite: str) -> Path:
    """``<db>.<suite>.runlock``: held by the ``rlbench run`` of ``suite`` on ``db``."""
    return db.with_name(f"{db.name}.{suite}.runlock")


class RunLock:
    """One ``rlbench run`` per suite and database: a second one of the same suite refuses at once instead of
    fighting over its runs; one of another suite runs beside it.

    Use it as ``with RunLock(db, suite):``; entering raises StoreBusy (naming the holder's PID) while another
    process holds it. The lock is an flock on ``<db>.<suite>.runlock``, which holds the owner's PID while it
    runs and is removed when it ends. A coordinator killed with -9 leaves the file behind, but the kernel
    drops its flock, so the file is stale and the next run of the suite takes it over (and recovers what the
    dead one left of the suite). Taking the lock checks that the file locked is still the one at the path (an
    owner that just removed it on exit leaves a locked, unlinked file to whoever opened it first).
    """

    def __init__(self, db: Path, suite: str):
        self.db = db
        self.suite = suite
        self.path = run_lock_path(db, suite)
        self.fh: Any = None

    def __enter__(self) -> RunLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fh = open(self.path, "a+")
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.seek(0)
                pid = fh.read().strip() or "?"
                fh.close()
                raise StoreBusy(
                    f"{self.db}: another 'rlbench run' (pid {pid}) is writing to this database (suite "
                    f"{self.suite!r}); wait for it to finish, or pass another --db"
                ) from None
            try:
                same = os.stat(self.path).st_ino == os.fstat(fh.fileno()).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            fh.close()  # removed by its last owner between our open and our lock: open the new one
        self.fh = fh
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            os.unlink(self.path)  # while still holding the lock, so nobody takes over a file about to go
        except FileNotFoundError:
            pass
        fcntl.flock(self.fh.fileno(), fcntl.LOCK_UN)
        self.fh.close()


@contextlib.contextmanager
def unless_running(db: Path, suite: str) -> Iterator[str | None]:
    """Hold ``suite``'s run lock on ``db`` for the block, unless an ``rlbench run`` of it holds it: yields
    None when held here, else why not (StoreBusy's message); the block then only looks, the running
    coordinator records."""
    with contextlib.ExitStack() as stack:
        busy = None
        try:
            stack.enter_context(RunLock(db, suite))
        except StoreBusy as e:
            busy = str(e)
        yield busy
