"""One builder at a time per generated dataset: the build lock beside its file.

Two ``rlbench run`` of different suites may share a store and a datasets folder, and both may need the same
generated dataset (``CartPole-v1-medium``, a text env's ``MazeFO-v0-mixed``) or the same behaviour policy.
Whoever builds one holds ``<file>.lock`` beside it (an flock, as the store's write lock and the suites' run
locks are): the other waits, then finds the file complete and uses it. The builders write to a temporary name
and rename the finished file into place, so a build killed mid-way leaves no file that looks complete; its
lock dies with it (the kernel drops the flock), and the next builder starts over.

The lock file holds the builder's PID while it builds and is removed when it is done (while still held, so
nobody takes over a file about to go: a waiter that locked a removed file opens the new one). Within one
process the lock is counted, so a build may take it again for the same path (``datagen.prepare`` holds it
while the family's builder takes it too).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

__all__ = ["building", "lock_path"]

_held: dict[Path, tuple[IO[str], int]] = {}
_mutex = threading.Lock()
_POLL_S = 0.1


def lock_path(path: Path) -> Path:
    """``<path>.lock``: held by whoever builds the dataset (or behaviour policy folder) at ``path``."""
    path = Path(path)
    return path.with_name(path.name + ".lock")


def _take(lock: Path, waiting: Callable[[str], None]) -> IO[str]:
    told = False
    while True:
        fh = open(lock, "a+")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not told:
                fh.seek(0)
                waiting(fh.read().strip() or "?")
                told = True
            fh.close()
            time.sleep(_POLL_S)
            continue
        try:
            same = os.stat(lock).st_ino == os.fstat(fh.fileno()).st_ino
        except FileNotFoundError:
            same = False
        if same:
            fh.seek(0)
            fh.truncate()
            fh.write(str(os.getpid()))
            fh.flush()
            return fh
        fh.close()  # removed by its last holder between our open and our lock: open the new one


@contextlib.contextmanager
def building(path: Path, waiting: Callable[[str], None] = lambda pid: None) -> Iterator[None]:
    """Hold the build lock of ``path`` for the block, waiting for another process that holds it (``waiting``
    hears that process's PID once, when it has to wait). After the wait, check whether the file is there
    before building it."""
    key = Path(os.path.abspath(path))
    with _mutex:
        held = _held.get(key)
        if held is not None:
            _held[key] = (held[0], held[1] + 1)
    if held is None:
        key.parent.mkdir(parents=True, exist_ok=True)
        fh = _take(lock_path(key), waiting)
        with _mutex:
            _held[key] = (fh, 1)
    try:
        yield
    finally:
        with _mutex:
            fh, count = _held[key]
            if count > 1:
                _held[key] = (fh, count - 1)
            else:
                del _held[key]
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(lock_path(key))  # while still held (see the module docstring)
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
                fh.close()
