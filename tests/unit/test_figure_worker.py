"""The figure worker (``rlbench_cli.figure_worker``): jobs run in a forked child, in order, their results,
exceptions and warnings come back; a dead child's jobs are drawn in this process; ``rlbench plot`` writes the
same files, byte for byte, with the worker and without it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest

from rlbench_cli import figure_worker
from rlbench_cli.figure_worker import FigureWorker

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the worker is forked on Linux")


def pid_and(value: int) -> tuple[int, int]:
    return os.getpid(), value


def fails() -> None:
    warnings.warn("drawn with care", UserWarning, stacklevel=1)
    raise ValueError("this figure cannot be drawn")


def warns(value: int) -> int:
    warnings.warn(f"warned about {value}", UserWarning, stacklevel=1)
    return value


@pytest.fixture
def worker(monkeypatch):
    monkeypatch.delenv("RLBENCH_FIGURE_PROCESS", raising=False)
    monkeypatch.setattr(figure_worker, "enabled", lambda: True)  # also on a 1-core machine
    w = FigureWorker.start()
    assert w is not None
    yield w
    w.close()


def test_jobs_run_in_the_child_in_order_and_return_their_results(worker):
    jobs = [worker.submit(pid_and, i) for i in range(5)]
    results = [j.result() for j in reversed(jobs)][::-1]  # collected out of order: answers keep theirs
    assert [v for _, v in results] == list(range(5))
    pids = {p for p, _ in results}
    assert pids != {os.getpid()} and len(pids) == 1


def test_a_failing_job_raises_here_with_its_warnings_and_the_next_job_still_runs(worker):
    bad, good = worker.submit(fails), worker.submit(warns, 7)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="this figure cannot be drawn"):
            bad.result()
        assert good.result() == 7
    assert [str(w.message) for w in caught] == ["drawn with care", "warned about 7"]


def test_jobs_of_a_killed_child_are_drawn_here(worker):
    first = worker.submit(pid_and, 1)
    assert first.result()[0] != os.getpid()
    os.kill(worker._pid, signal.SIGKILL)
    time.sleep(0.2)
    later = [worker.submit(pid_and, i) for i in (2, 3)]
    assert [j.result() for j in later] == [(os.getpid(), 2), (os.getpid(), 3)]
    assert worker.submit(pid_and, 4).result() == (os.getpid(), 4)  # from then on, here at once


def test_no_worker_when_turned_off_or_when_threads_run(monkeypatch):
    monkeypatch.setenv("RLBENCH_FIGURE_PROCESS", "0")
    assert not figure_worker.enabled() and FigureWorker.start() is None
    monkeypatch.delenv("RLBENCH_FIGURE_PROCESS")
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:  # a fork would copy that thread's locks mid-use
        assert not figure_worker.enabled()
    finally:
        stop.set()
        t.join()


def test_a_job_without_a_worker_runs_at_once():
    job = figure_worker.Job(None, pid_and, (9,), {})
    assert job.result() == (os.getpid(), 9)


def test_plot_writes_the_same_files_with_and_without_the_worker(tmp_path, make_results_db):
    runs = [(a, e, s, [(1000, 10.0 * s + len(a) + len(e)), (2000, 20.0 * s + 3 * len(a))])
            for a in ("dqn", "ppo", "a2c") for e in ("Acrobot-v1", "CartPole-v1") for s in range(3)]  # fmt: skip
    db = tmp_path / "db.duckdb"
    make_results_db(db, runs, suite="same")
    rlbench = Path(sys.executable).with_name("rlbench")
    outputs = {}
    for mode in ("1", "0"):
        out = tmp_path / f"figures-{mode}"
        env = {**os.environ, "RLBENCH_FIGURE_PROCESS": mode}
        for curves in ("--curves", "--no-curves"):
            r = subprocess.run([str(rlbench), "plot", "same", "--db", str(db), "--reps", "300", "--out",
                                str(out / curves), curves], capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
            assert r.returncode == 0, r.stderr
            outputs[(mode, curves)] = r.stdout
        files = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
        assert len(files) == 12  # 5 figures + 2 leaderboard files with curves, 3 + 2 without
        outputs[mode] = {f: (out / f).read_bytes() for f in files}
    assert outputs["1"] == outputs["0"]
    for curves in ("--curves", "--no-curves"):  # the same report, the files named in the same order
        assert outputs[("1", curves)].replace("figures-1", "figures-0") == outputs[("0", curves)]
