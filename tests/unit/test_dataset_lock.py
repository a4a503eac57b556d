"""The build lock of a generated dataset (``datagen.lock``): another process that holds it is waited for (its
PID heard once) and the file it wrote is there when the waiter gets in; a holder killed with -9 frees it at
once and leaves no file that looks complete; one process may take it again (counted); the lock file goes
when the last holder is done."""

import os
import signal
import subprocess
import sys
import threading

import pytest

from rlbench_cli.datagen.lock import building, lock_path

pytestmark = pytest.mark.fast

HOLDER = """
import sys
from pathlib import Path
from rlbench_cli.datagen.lock import building

path = Path(sys.argv[1])
with building(path):
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("half")
    print("held", flush=True)
    sys.stdin.readline()  # until the test says go on (or kills it)
    tmp.replace(path)  # the finished file, renamed into place
"""


def _holder(path):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout.readline().strip() == "held"
    return proc


def _enter_in_thread(path):
    """Enter ``building(path)`` on a thread; returns (waited-for PIDs, event set inside, what it saw there,
    thread)."""
    heard, inside, seen = [], threading.Event(), {}

    def enter():
        with building(path, heard.append):
            seen["file"] = path.read_text() if path.exists() else None
            inside.set()

    t = threading.Thread(target=enter, daemon=True)
    t.start()
    return heard, inside, seen, t


def _wait_until(condition, timeout=60.0):
    done = threading.Event()
    for _ in range(int(timeout / 0.02)):
        if condition():
            return
        done.wait(0.02)
    raise AssertionError("condition not met before the deadline")


def test_a_second_builder_waits_for_the_first_and_then_finds_its_file(tmp_path):
    path = tmp_path / "CartPole-v1-medium.hdf5"
    proc = _holder(path)
    try:
        heard, inside, seen, t = _enter_in_thread(path)
        _wait_until(lambda: heard)
        assert heard == [str(proc.pid)] and not inside.is_set()  # told who builds it, and waiting
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.wait(timeout=60) == 0
        t.join(timeout=60)
        assert inside.is_set() and seen["file"] == "half"  # the other builder's finished file
    finally:
        proc.kill()
    assert not lock_path(path).exists()


def test_a_builder_killed_mid_build_frees_the_lock_and_leaves_no_complete_looking_file(tmp_path):
    path = tmp_path / "MazeFO-v0-mixed.jsonl"
    proc = _holder(path)
    heard, inside, seen, t = _enter_in_thread(path)
    _wait_until(lambda: heard)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    t.join(timeout=60)
    assert inside.is_set() and seen["file"] is None  # only the dead builder's temporary file is there
    assert (tmp_path / "MazeFO-v0-mixed.jsonl.tmp").exists() and not path.exists()


def test_one_process_takes_it_again_and_the_lock_file_goes_after_the_last_hold(tmp_path):
    path = tmp_path / "behaviour" / "CartPole-v1-ppo-seed0"
    heard = []
    with building(path, heard.append):
        assert lock_path(path).read_text() == str(os.getpid())
        with building(path, heard.append):  # nested (datagen.prepare, then the family's builder): no wait
            pass
        assert lock_path(path).exists()
    assert heard == [] and not lock_path(path).exists()
    with building(path, heard.append):  # and free again
        assert heard == []
