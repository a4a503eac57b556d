"""One writer per database: the run lock every ``rlbench run`` holds, and ``rlbench status`` / ``cancel``
take to record what they find (or only look, while a run holds it)."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import StoreBusy

__all__ = ["RunLock", "unless_running"]


class RunLock:
    """One ``rlbench run`` per database: a second one refuses at once instead of fighting over the file.

    Use it as ``with RunLock(db):``; entering raises StoreBusy (naming the holder's PID) while another process
    holds it. The lock is an flock on ``<db>.runlock``, which holds the owner's PID while it runs and is
    removed when it ends. A coordinator killed with -9 leaves the file behind, but the kernel drops its flock,
    so the file is stale and the next run takes it over. Taking the lock checks that the file locked is still
    the one at the path (an owner that just removed it on exit leaves a locked, unlinked file to whoever
    opened it first).
    """

    def __init__(self, db: Path):
        self.path = db.with_name(db.name + ".runlock")
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
                    f"{self.path.with_suffix('')}: another 'rlbench run' (pid {pid}) is writing to this "
                    "database; wait for it to finish, or pass another --db"
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
def unless_running(db: Path) -> Iterator[str | None]:
    """Hold ``db``'s run lock for the block, unless an ``rlbench run`` holds it: yields None when held here,
    else why not (StoreBusy's message); the block then only looks, the running coordinator records."""
    with contextlib.ExitStack() as stack:
        busy = None
        try:
            stack.enter_context(RunLock(db))
        except StoreBusy as e:
            busy = str(e)
        yield busy
