"""The store's write lock: writers of several processes (coordinators of different suites) take turns at the
database, each for as long as it holds a read-write connection, leaving readers a gap between two processes'
windows; one process's nested writers share its hold; a writer killed with -9 leaves the lock free."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from rlbench_cli.errors import StoreBusy
from rlbench_cli.store import Store
from rlbench_cli.store.locks import GAP_S, write_lock_path

HOLDER = """
import sys, time
from rlbench_cli.store import Store
store = Store(sys.argv[1])
con = store.open_writer()
con.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
con.execute("INSERT INTO t VALUES (1)")
print("held", flush=True)
sys.stdin.readline()  # until told to let go (or killed)
con.close()
print("released", flush=True)
"""


# a coordinator's Recorder with a write queued every 50 ms for a few seconds; prints its write windows (from
# just after it opened the file to just before it closed it) and how many writes it queued
RECORDER = """
import json, sys, time
from rlbench_cli.coordinator import Recorder
from rlbench_cli.store import Store
store, windows = Store(sys.argv[1]), []
opener = store.open_writer
def open_writer(*args, **kwargs):
    con = opener(*args, **kwargs)
    opened, close = time.time(), con.close
    def closing():
        windows.append((opened, time.time()))
        close()
    con.close = closing
    return con
store.open_writer = open_writer
rec, n = Recorder(store), 0
print("go", flush=True)
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    rec.add(lambda con, n=n: con.execute("INSERT INTO t VALUES (?)", [n]))
    n += 1
    rec.tick()
    time.sleep(0.05)
rec.close()
print(json.dumps({"n": n, "windows": windows}), flush=True)
"""


def _holder(db):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(db)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout.readline().strip() == "held"
    return proc


@pytest.mark.slow
def test_two_coordinators_writers_take_turns_leaving_readers_a_gap_between_them(tmp_path):
    store = Store(tmp_path / "r.duckdb")
    with store.writer() as con:
        con.execute("CREATE TABLE t (x INTEGER)")
    procs = [subprocess.Popen([sys.executable, "-c", RECORDER, str(store.path), "4"], stdout=subprocess.PIPE,
                              text=True) for _ in range(2)]  # fmt: skip
    try:
        said = [json.loads(p.stdout.read().splitlines()[-1]) for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=10)
    with store.reader() as con:  # every write of both is recorded
        assert con.execute("SELECT count(*) FROM t").fetchone() == (said[0]["n"] + said[1]["n"],)
    windows = sorted((w[0], w[1], i) for i, s in enumerate(said) for w in s["windows"])
    turns = 0
    for (_, closed, who), (opened, _, nxt) in zip(windows, windows[1:]):
        assert opened > closed  # never both at once
        if nxt != who:  # another process's window next: not before the gap after this one's release
            turns += 1
            assert opened - closed >= GAP_S, (closed, opened)
    assert turns >= 2, windows  # they took turns


@pytest.mark.fast
def test_a_process_holds_the_lock_while_its_writer_is_open_and_records_its_release(tmp_path):
    store = Store(tmp_path / "r.duckdb")
    lock = write_lock_path(store.path)
    assert lock.name == "r.duckdb.writelock"
    with store.writer() as con:
        with (
            store.writer() as inner
        ):  # nested in one process: the same hold, counted (DuckDB shares the file)
            inner.execute("CREATE TABLE t (x INTEGER)")
        con.execute("INSERT INTO t VALUES (1)")  # still held after the inner one closed
        assert lock.read_text() == ""
    pid, when = lock.read_text().split()
    assert int(pid) == os.getpid() and abs(float(when) - time.time()) < 60
    with store.writer() as con:  # this process's own release leaves no gap to wait out
        assert con.execute("SELECT count(*) FROM t").fetchone() == (1,)


@pytest.mark.fast
def test_another_process_writing_refuses_a_writer_that_cannot_wait_and_the_next_waits_its_turn(tmp_path):
    store = Store(tmp_path / "r.duckdb")
    proc = _holder(store.path)
    try:
        with pytest.raises(StoreBusy, match="another process"):
            store.open_writer(wait=0)  # the coordinator between ticks: its writes stay queued
        t0 = time.monotonic()
        proc.stdin.write("\n")
        proc.stdin.flush()
        con = store.open_writer(wait=30)  # waits for the lock, then the gap after the other's release
        try:
            released = float(write_lock_path(store.path).read_text().split()[1])
            assert proc.stdout.readline().strip() == "released"
            assert time.time() - released >= GAP_S  # readers had the file to themselves in between
            assert con.execute("SELECT count(*) FROM t").fetchone() == (1,)
        finally:
            con.close()
        assert time.monotonic() - t0 < 30
    finally:
        proc.kill()
        proc.wait(timeout=10)


@pytest.mark.fast
def test_a_writer_killed_with_9_leaves_the_lock_and_the_file_free(tmp_path):
    store = Store(tmp_path / "r.duckdb")
    proc = _holder(store.path)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    with store.writer() as con:  # its committed row is there, nothing is held
        assert con.execute("SELECT count(*) FROM t").fetchone() == (1,)


@pytest.mark.fast
def test_a_writer_that_fails_to_open_the_file_releases_the_lock(tmp_path):
    db = tmp_path / "r.duckdb"
    db.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    with pytest.raises(Exception, match="SQLite"):
        Store(db).open_writer()
    code = (
        "import sys, pathlib; from rlbench_cli.store.locks import acquire_write\n"
        "acquire_write(pathlib.Path(sys.argv[1]), 0)"
    )
    # free for another process at once: a writer that never got in owes no gap
    assert subprocess.run([sys.executable, "-c", code, str(db)]).returncode == 0


@pytest.mark.fast
def test_a_writer_that_cannot_wait_out_the_gap_keeps_the_lock_reserved_for_its_next_try(tmp_path):
    store = Store(tmp_path / "r.duckdb")
    with store.writer():
        pass
    write_lock_path(store.path).write_text(f"{os.getpid() + 1} {time.time()}")  # another process just wrote
    with pytest.raises(StoreBusy):
        store.open_writer(wait=0)  # the coordinator's tick inside the gap: refused, its writes stay queued
    other = "import sys; from rlbench_cli.store import Store; Store(sys.argv[1]).open_writer(wait=0)"
    r = subprocess.run([sys.executable, "-c", other, str(store.path)], capture_output=True, text=True)
    assert r.returncode != 0 and "StoreBusy" in r.stderr  # reserved: no other process's writer goes first
    time.sleep(GAP_S)
    store.open_writer(wait=0).close()  # the next tick, after the gap: goes ahead at once
    waits = other.replace("wait=0", "wait=5")  # released after it: another process's writer goes next
    r = subprocess.run([sys.executable, "-c", waits, str(store.path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
