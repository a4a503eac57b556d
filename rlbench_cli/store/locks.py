"""The store's write lock: several processes that write to one database take turns, in order.

DuckDB lets one process hold a file for writing, and while it does, no other process can open it at all. Every
writer (each coordinator of a suite, ``rlbench import``, ``status`` recording what a Slurm job did) takes
``<db>.writelock``, an flock, for as long as it holds a read-write connection (``Connections.open_writer``
takes it, closing the connection drops it), so writers wait for each other on the lock instead of racing for
the file. On release the lock file records who released it and when (``<pid> <unix time>``); a writer of
another process that takes it within GAP_S of that waits out the rest of GAP_S before it opens the file, so
readers (which retry every <= 0.1 s) get in between two writers' windows as they do between one coordinator's.
A writer that must not wait (the coordinator's ``Recorder`` between ticks, ``wait=0``) is told StoreBusy and
keeps its writes queued: while another process writes, or, having taken the lock within the gap, while the
gap lasts (it keeps the lock reserved meanwhile, so the writers of two processes alternate).

Within one process the lock is counted: nested write connections (DuckDB shares one database instance per
process) hold it once. A writer killed with -9 loses its flock with its life; the file stays, stale and free.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ..errors import StoreBusy

__all__ = ["GAP_S", "write_lock_path", "acquire_write", "release_write"]

GAP_S = 0.25  # the file is left free at least this long between two processes' write windows


def write_lock_path(db: Path) -> Path:
    """``<db>.writelock``: held by whoever writes to ``db`` now."""
    return db.with_name(db.name + ".writelock")


@dataclass
class _Held:
    fh: IO[str]
    count: int  # 0: taken, but waiting out the gap after another process's window (reserved)
    ready_at: float  # time.monotonic() from which this process may open the file


_held: dict[Path, _Held] = {}
_mutex = threading.Lock()  # one thread of a process takes the flock; the others count on it


def _last_release(fh: IO[str]) -> tuple[int, float] | None:
    fh.seek(0)
    try:
        pid, when = fh.read().split()
        return int(pid), float(when)
    except ValueError:  # a new, empty file
        return None


def _busy(db: Path, wait: float) -> StoreBusy:
    return StoreBusy(
        f"{db}: another process has been writing to the database for {wait:.0f}s; try again when it finishes"
    )


def acquire_write(db: Path, wait: float) -> None:
    """Take ``db``'s write lock for this process (again, if it holds it already: counted), waiting up to
    ``wait`` seconds for another process's writer to release it and for the gap after that; raises StoreBusy
    after that. A caller that cannot wait that long for the gap (``wait=0``) is refused, but keeps the lock
    reserved: its next call, once the gap is over, goes ahead (the coordinator's next tick), and no other
    process's writer takes the file in between."""
    key = Path(os.path.abspath(db))
    deadline = time.monotonic() + wait
    with _mutex:
        held = _held.get(key)
        if held is None:
            fh = open(write_lock_path(key), "a+")
            delay = 0.01
            try:
                while True:
                    try:
                        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if time.monotonic() >= deadline:
                            raise _busy(db, wait) from None
                        time.sleep(delay)
                        delay = min(delay * 1.5, 0.05)
                last = _last_release(fh)
            except BaseException:
                fh.close()  # drops the flock if taken
                raise
            ready_at = time.monotonic()
            if last is not None and last[0] != os.getpid():
                ready_at += min(max(GAP_S - (time.time() - last[1]), 0.0), GAP_S)  # a clock set back: GAP_S
            held = _held[key] = _Held(fh, 0, ready_at)
        if held.count == 0:
            left = held.ready_at - time.monotonic()
            if left > 0:
                if time.monotonic() + left > deadline:
                    raise _busy(db, wait)  # reserved: the lock stays this process's for its next call
                time.sleep(left)
        held.count += 1


def release_write(db: Path, opened: bool = True) -> None:
    """Drop one hold of ``db``'s write lock; the last one records this process and the time (unless the
    file was not ``opened``: no gap is owed after a writer that never got in), and unlocks."""
    key = Path(os.path.abspath(db))
    with _mutex:
        held = _held.get(key)
        if held is None:
            return
        held.count -= 1
        if held.count > 0:
            return
        del _held[key]
        fh = held.fh
        try:
            if opened:
                fh.seek(0)
                fh.truncate()
                fh.write(f"{os.getpid()} {time.time():.6f}")
                fh.flush()
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
            fh.close()
