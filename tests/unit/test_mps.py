"""rlbench_cli.mps against NVIDIA's real control program (Debian's nvidia-cuda-mps): its daemon starts, answers
and quits without a GPU; only a CUDA client would need one."""

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from rlbench_cli import mps
from rlbench_cli.errors import UsageError


def quit_daemon(pipe: Path) -> None:
    subprocess.run(["nvidia-cuda-mps-control"], input="quit\n", text=True, capture_output=True,
                   env={**os.environ, "CUDA_MPS_PIPE_DIRECTORY": str(pipe)}, timeout=30)  # fmt: skip


def control_log(d: mps.MpsDaemon, waiting_for: str) -> str:
    """The daemon's log once it holds ``waiting_for`` (it writes it a moment after it starts), or after 5 s."""
    deadline = time.monotonic() + 5
    while True:
        log = (d.log / "control.log").read_text() if (d.log / "control.log").exists() else ""
        if waiting_for in log or time.monotonic() > deadline:
            return log
        time.sleep(0.05)


@pytest.fixture
def daemon(mps_control, tmp_path):
    d = mps.MpsDaemon(tmp_path / "mps")
    yield d
    quit_daemon(d.pipe)


def test_a_daemon_starts_answers_and_quits(daemon):
    assert not daemon.running()
    assert daemon.start() is True
    assert daemon.running() and (daemon.pipe / "control").exists()
    assert daemon.env == {
        "CUDA_MPS_PIPE_DIRECTORY": str(daemon.pipe),
        "CUDA_MPS_LOG_DIRECTORY": str(daemon.log),
    }
    assert "Starting control daemon" in control_log(daemon, "Starting control daemon")
    assert daemon.stop() is True
    assert not daemon.running()
    assert daemon.stop() is True  # nothing left to stop


def test_a_running_daemon_is_used_not_started_twice(daemon):
    other = mps.MpsDaemon(daemon.folder)  # the next run on the store, after a coordinator was killed
    assert daemon.start() is True
    assert other.start() is False
    assert other.running()
    assert control_log(daemon, "Starting control daemon").count("Starting control daemon") == 1


def test_a_daemon_that_cannot_start_is_a_one_line_error(mps_control, tmp_path):
    d = mps.MpsDaemon(tmp_path / ("x" * 120))  # a Unix socket's path holds at most 107 bytes
    with pytest.raises(UsageError) as e:
        d.start()
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(
        "resources.mps / --mps: 'nvidia-cuda-mps-control -d' did not start"
    )
    assert "--no-mps" in msg and not d.running()


def test_without_the_control_program_asking_for_mps_is_a_one_line_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UsageError) as e:
        mps.MpsDaemon(tmp_path)
    assert "\n" not in str(e.value) and "nvidia-cuda-mps-control is not on PATH" in str(e.value)
    assert "--no-mps" in str(e.value)
    assert mps.stop_left_behind(tmp_path / "r.duckdb", "s") is False  # a run without MPS needs nothing of it


def test_a_stores_folder_is_short_the_same_each_time_and_its_own(tmp_path):
    a, b = tmp_path / "a" / "rlbench.duckdb", tmp_path / "b" / "rlbench.duckdb"
    assert mps.store_folder(a, "s") == mps.store_folder(a, "s") != mps.store_folder(b, "s")
    assert mps.store_folder(a, "s") != mps.store_folder(
        a, "t"
    )  # each suite's coordinator on a store has its own
    assert len(str(mps.store_folder(a, "s" * 100) / "pipe" / "control")) < 107
    assert mps.store_folder(a, "s").name.startswith(f"rlbench-mps-{os.getuid()}-")


def test_a_daemon_a_killed_run_left_is_stopped_by_a_run_without_mps(mps_control, tmp_path, monkeypatch):
    db = tmp_path / "rlbench.duckdb"
    left = mps.store_daemon(db, "s")
    try:
        left.start()
        assert mps.stop_left_behind(db, "t") is False  # another suite's run on the store leaves it alone
        assert left.running()
        assert mps.stop_left_behind(db, "s") is True
        assert not left.running()
        assert mps.stop_left_behind(db, "s") is False
    finally:
        quit_daemon(left.pipe)
        shutil.rmtree(left.folder, ignore_errors=True)


def test_the_users_own_daemon_is_found_through_its_pipe_folder(daemon, monkeypatch):
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(daemon.pipe))
    assert mps.user_daemon() is None  # not running yet
    daemon.start()
    assert mps.user_daemon() == daemon.pipe


def test_whether_a_daemon_runs_is_asked_of_the_lock_it_holds(daemon):
    """The daemon serves one client at a time and turns the others away (a query meeting another run's fails,
    sometimes without a word), so whether it runs is asked of the POSIX lock it holds on ``control_lock``."""
    from concurrent.futures import ThreadPoolExecutor

    lock = daemon.pipe / "control_lock"
    assert not mps._locked(lock)
    daemon.start()
    assert mps._locked(lock)
    with ThreadPoolExecutor(12) as pool:  # many asking at once: every one of them sees it running
        assert all(pool.map(lambda _: daemon.running(), range(24)))
    assert daemon.stop() is True
    assert not mps._locked(lock) and not daemon.running()
