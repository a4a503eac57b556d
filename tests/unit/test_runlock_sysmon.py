"""The coordinator's run lock (one `rlbench run` per suite and database, removed on exit, stale ones taken
over) and the per-run system monitor."""

import os
import subprocess
import sys
import threading
import time

import pytest

from rlbench_cli.coordinator import RunLock
from rlbench_cli.errors import StoreBusy
from rlbench_cli.sysmon import SystemMonitor, rss_mb


def test_the_lock_file_holds_the_pid_while_held_and_is_gone_after(tmp_path):
    db = tmp_path / "r.duckdb"
    lock = db.with_name("r.duckdb.s.runlock")
    with RunLock(db, "s"):
        assert lock.read_text() == str(os.getpid())
    assert not lock.exists()
    with RunLock(db, "s"):  # and it can be taken again
        assert lock.exists()
    assert not lock.exists()


def test_a_live_holder_refuses_a_second_run_with_its_pid(tmp_path):
    db = tmp_path / "r.duckdb"
    code = ("import sys, time; from pathlib import Path; from rlbench_cli.coordinator import RunLock\n"
            "with RunLock(Path(sys.argv[1]), 's'):\n    print('held', flush=True); time.sleep(60)\n")  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-c", code, str(db)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(StoreBusy, match=f"another 'rlbench run' \\(pid {proc.pid}\\)"):
            with RunLock(db, "s"):
                pass
        with RunLock(db, "t"):  # another suite of the same database runs beside it
            pass
    finally:
        proc.kill()
        proc.wait(timeout=10)
    # killed with -9: the file stays behind with its PID, but nobody holds it, so it is stale
    lock = db.with_name("r.duckdb.s.runlock")
    assert lock.read_text() == str(proc.pid)
    with RunLock(db, "s"):
        assert lock.read_text() == str(os.getpid())
    assert not lock.exists()


class _ListSink:
    def __init__(self):
        self.rows = []

    def log(self, step, **values):
        self.rows.append((step, values))

    def log_many(self, step, values):
        self.rows.append((step, dict(values)))


def test_the_system_monitor_logs_steps_per_second_cpu_and_memory_at_the_current_step():
    sink, progress = _ListSink(), {"step": 0}
    with SystemMonitor(sink, lambda: progress["step"], "cpu", interval=0.2):
        t_end = time.monotonic() + 0.7
        while time.monotonic() < t_end:  # busy: about one core
            progress["step"] += 1
    assert len(sink.rows) >= 3  # samples every 0.2 s, plus one at the end
    step, last = sink.rows[-1]
    assert step == progress["step"]
    assert set(last) == {"sys/steps_per_second", "sys/cpu_percent", "sys/rss_mb"}  # no GPU here
    total = sum(v["sys/steps_per_second"] for _, v in sink.rows)
    assert total > 0
    assert max(v["sys/cpu_percent"] for _, v in sink.rows) > 30
    assert 10 < last["sys/rss_mb"] < 100_000
    assert abs(last["sys/rss_mb"] - rss_mb()) < 200


def test_one_monitor_logs_each_runs_rows_at_its_own_step_with_its_own_speed():
    """A pack's seeds share one monitor thread: every sample reaches every run's sink, each row at that run's
    step, steps per second from that run's progress, the process's CPU and memory the same for all."""
    sinks, steps = [_ListSink() for _ in range(3)], [0, 0, 0]
    runs = [(sink, lambda i=i: steps[i]) for i, sink in enumerate(sinks)]
    monitor = SystemMonitor.of_runs(runs, "cpu", interval=60)
    for k in (1, 2):
        time.sleep(0.01)
        steps[1:] = [100 * k, 200 * k]  # run 0 stands still, run 2 trains twice as fast as run 1
        monitor.sample()
    alive = [t.name for t in threading.enumerate()].count("rlbench-sysmon")
    with monitor:  # one thread for all the runs; one more sample as it ends
        assert [t.name for t in threading.enumerate()].count("rlbench-sysmon") == alive + 1
    assert [t.name for t in threading.enumerate()].count("rlbench-sysmon") == alive
    for i, sink in enumerate(sinks):
        assert [step for step, _ in sink.rows] == [100 * i, 200 * i, 200 * i]
        assert set(sink.rows[-1][1]) == {"sys/steps_per_second", "sys/cpu_percent", "sys/rss_mb"}
    assert [v["sys/steps_per_second"] for _, v in sinks[0].rows] == [0, 0, 0]
    assert [v["sys/steps_per_second"] > 0 for _, v in sinks[1].rows] == [True, True, False]  # none since
    for row1, row2 in zip(sinks[1].rows, sinks[2].rows):
        assert row2[1]["sys/steps_per_second"] == 2 * row1[1]["sys/steps_per_second"]
        assert row1[1]["sys/cpu_percent"] == row2[1]["sys/cpu_percent"]
        assert row1[1]["sys/rss_mb"] == row2[1]["sys/rss_mb"]
