"""The local pool's zygote (``executors.zygote``): workers forked from one process that did the imports once.

- forked workers are the zygote's children, find its imports done, and report how they ended exactly as
  ``multiprocessing.Process`` does (an exit code, minus the signal that killed them);
- a zygote that dies takes its workers with it, and the pool then spawns its workers instead;
- ``LocalExecutor`` runs real jobs on forked workers, replaces a worker killed mid-job by forking a new one,
  and does the same with ``RLBENCH_WORKER_START=spawn`` (each worker a fresh process, as on a GPU).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from multiprocessing.connection import wait
from pathlib import Path

import pytest

from rlbench_cli.executors import zygote
from rlbench_cli.executors.base import Job, Outcome, Placement
from rlbench_cli.executors.local import LocalExecutor
from rlbench_cli.suite.grid import RunSpec

pytestmark = pytest.mark.skipif(not zygote.usable(["cpu"]), reason="forking workers needs Linux pidfds")

PRELOADED: int | None = None


def _preload(tag: str) -> None:
    global PRELOADED
    PRELOADED = os.getpid()  # in a forked worker: the zygote's pid, the import it did not have to repeat
    os.environ["RLBENCH_TEST_TAG"] = tag


def _import(name: str) -> str:
    """The check the zygote runs: an import its later forks find done."""
    __import__(name)
    return f"imported {name}"


def _echo_worker(conn, parent_pid: int, what: str) -> None:
    import sys

    conn.send((what, os.getpid(), os.getppid(), parent_pid, PRELOADED, os.environ.get("RLBENCH_TEST_TAG"),
               "colorsys" in sys.modules))  # fmt: skip
    msg = conn.recv()
    if msg == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    if msg == "hang":
        time.sleep(600)
    os._exit(msg)


def _ended(proc, timeout: float = 20.0) -> int | None:
    assert wait([proc.sentinel], timeout=timeout), "the worker did not end"
    assert not proc.is_alive()
    return proc.exitcode


def test_workers_are_forked_from_the_zygote_and_end_as_processes_do() -> None:
    z = zygote.Zygote(mp.get_context("spawn"), _preload, ("warm",), _echo_worker, _import)
    try:
        first = z.fork(("w0",))
        assert first is not None and first[1].recv()[-1] is False  # colorsys: not imported yet
        assert z.check("colorsys") == ("imported colorsys",)  # the check runs in the zygote...
        workers = [first, *(z.fork((f"w{i}",)) for i in range(1, 4))]
        assert all(w is not None for w in workers)
        hellos = [conn.recv() for _, conn in workers[1:]]
        assert [h[0] for h in hellos] == ["w1", "w2", "w3"]
        for (proc, _), (_, pid, ppid, parent_pid, preloaded, tag, colorsys) in zip(workers[1:], hellos):
            assert pid == proc.pid and ppid == z.proc.pid == parent_pid == preloaded  # the zygote's imports
            assert tag == "warm" and proc.is_alive() and proc.exitcode is None
            assert colorsys  # ...and the workers forked after it find what it imported
        (p0, c0), (p1, c1), (p2, c2), (p3, _) = workers
        c0.send("segfault")
        c1.send(3)
        c2.send("hang")
        assert _ended(p0) == -signal.SIGSEGV
        assert _ended(p1) == 3
        p2.kill()
        assert _ended(p2) == -signal.SIGKILL
        p3.terminate()
        assert _ended(p3) == -signal.SIGTERM
        again = z.fork(("again",))  # a replacement, from the same zygote
        assert again is not None and again[1].recv()[2] == z.proc.pid
        again[1].send(0)
        assert _ended(again[0]) == 0
        for p, _ in [*workers, again]:
            p.close()
            assert p.sentinel == -1
    finally:
        z.close()
    assert not z.proc.is_alive()


def test_a_dead_zygote_takes_its_workers_with_it_and_forks_no_more() -> None:
    z = zygote.Zygote(mp.get_context("spawn"), _preload, ("warm",), _echo_worker)
    try:
        forked = z.fork(("w",))
        assert forked is not None
        proc, conn = forked
        conn.recv()
        os.kill(z.proc.pid, signal.SIGKILL)
        # its parent-death signal; the exit code says so without a report from the zygote
        assert _ended(proc) == -signal.SIGKILL
        assert z.fork(("after",)) is None  # the pool spawns from now on
    finally:
        z.close()


def _spec(seed: int) -> RunSpec:
    return RunSpec(suite="z", algo="random", algo_name="random", params={}, env_id="CartPole-v1", env_kwargs={},
                   seed=seed, budget={"steps": 200, "eval_every": 100, "eval_episodes": 1, "timeout": None})  # fmt: skip


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_the_pool_runs_jobs_and_replaces_a_killed_worker(tmp_path: Path, monkeypatch, start: str) -> None:
    monkeypatch.setenv("RLBENCH_WORKER_START", start)
    pool = LocalExecutor([(None, "cpu"), (None, "cpu")], threads=1, poll=0.1)
    jobs = [Job(_spec(s), tmp_path / f"seed{s}" / "attempt-1", 1) for s in range(4)]
    started: dict[int, str] = {}
    ended: dict[int, Outcome] = {}
    killed: list[int] = []

    def on_start(job: Job, where: Placement) -> None:
        started[job.spec.seed] = where.job_id
        if job.spec.seed == 1:  # what the out-of-memory killer does to a worker, mid-job
            killed.append(int(where.job_id))
            os.kill(int(where.job_id), signal.SIGKILL)

    def on_end(job: Job, outcome: Outcome) -> None:
        ended[job.spec.seed] = outcome

    pool.start(preload_torch=False)
    try:
        assert (pool._zygote is not None) == (start == "fork")
        assert pool.check([_spec(0)]) is None  # in the zygote, which then forks the workers
        parents = {_ppid(int(s.proc.pid)) for s in pool.slots}
        assert parents == ({pool._zygote.proc.pid} if start == "fork" else {os.getpid()})
        pool.run(jobs, on_start, on_end)
        after = {s.proc.pid for s in pool.slots}
    finally:
        pool.close()
    assert sorted(ended) == [0, 1, 2, 3]
    assert ended[1].status == "failed" and ended[1].exit_code == -signal.SIGKILL
    assert "worker killed by SIGKILL" in (ended[1].error or "")
    assert all(ended[s].status == "finished" for s in (0, 2, 3)), ended
    assert len(after) == 2 and killed[0] not in after  # the killed worker was replaced by a new process


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
