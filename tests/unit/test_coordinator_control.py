"""The coordinator's library calls for `rlbench cancel` and `rlbench status` (data back, no printing), its
public run lock, and the executor table the coordinator asks instead of an executor's name. Slurm's
commands are stood in for: what Slurm says of each job is a dict."""

import json
import re
import time
from pathlib import Path

import pytest

import rlbench_cli.executors.slurm as slurm
from rlbench_cli.coordinator import CancelResult, RunLock, cancel, live_states, snapshot, unless_running
from rlbench_cli.errors import StoreBusy, UnknownName, UsageError
from rlbench_cli.executors import EXECUTORS, NAMES, executor_kind
from rlbench_cli.runner import attempt_dir
from rlbench_cli.store import Store


@pytest.fixture
def fake_slurm(monkeypatch):
    """Slurm as a dict {job id: state}; scancel turns the jobs it is given CANCELLED and notes them."""
    states: dict[str, str] = {}
    cancelled: list[str] = []

    def query_states(ids):
        return {j: slurm.SlurmState(states[j]) for j in ids if j in states}

    def scancel(ids):
        for j in ids:
            cancelled.append(j)
            states[j] = "CANCELLED"

    monkeypatch.setattr(slurm, "query_states", query_states)
    monkeypatch.setattr(slurm, "scancel", scancel)
    return states, cancelled


def _store(tmp_path: Path, jobs: dict[str, str]) -> Store:
    """Suite 's' with one run per Slurm job id, each recorded as started there (a detached `rlbench run`)."""
    store = Store(tmp_path / "r.duckdb")
    with store.writer() as con:
        store.register_suite(con, "s", "", {"name": "s"}, "s.yaml")
        store.add_runs(con, [{"run_id": f"r{i}", "suite": "s", "algo": "a", "algo_name": "random", "env": "E",
                              "seed": i, "config": {}} for i in range(len(jobs))])  # fmt: skip
        for i, job_id in enumerate(jobs):
            store.start_attempt(con, f"r{i}", 1, {"started_at": time.time(), "host": "", "device": "",
                                                  "executor": "slurm", "job_id": job_id})  # fmt: skip
            attempt_dir(tmp_path / "runs", "s", f"r{i}", 1).mkdir(parents=True)
    return store


def _status(store: Store) -> dict[str, tuple[str, str | None]]:
    with store.reader() as con:
        return {r["run_id"]: (r["status"], r["error"]) for r in store.runs(con, "s")}


@pytest.mark.fast
def test_the_run_lock_is_a_context_manager_that_refuses_a_second_holder(tmp_path):
    db = tmp_path / "r.duckdb"
    with RunLock(db, "s") as lock:
        assert lock.path.read_text().isdigit()
        with pytest.raises(StoreBusy, match="another 'rlbench run'"):
            with RunLock(db, "s"):
                pass
        with unless_running(db, "s") as busy:  # status / cancel: only look while a run holds it
            assert busy is not None and "another 'rlbench run'" in busy
    assert not lock.path.exists()
    with unless_running(db, "s") as busy:  # free: held for the block
        assert busy is None and lock.path.exists()
        with pytest.raises(StoreBusy):
            with RunLock(db, "s"):
                pass
    assert not lock.path.exists()


@pytest.mark.fast
def test_an_error_inside_unless_running_releases_the_lock(tmp_path):
    db = tmp_path / "r.duckdb"
    with pytest.raises(RuntimeError):
        with unless_running(db, "s"):
            raise RuntimeError("boom")
    with RunLock(db, "s"):
        pass


def test_cancel_returns_what_it_cancelled_and_records_the_ends(tmp_path, fake_slurm):
    states, cancelled = fake_slurm
    states.update({"7_0": "RUNNING", "7_1": "PENDING", "7_2": "COMPLETED"})
    store = _store(tmp_path, {"7_0": "", "7_1": "", "7_2": ""})
    (attempt_dir(tmp_path / "runs", "s", "r2", 1) / "result.json").write_text(
        json.dumps({"status": "finished", "duration_s": 1.0})
    )
    result = cancel(store, "s", settle_s=1.0)
    assert result == CancelResult("s", ["7_0", "7_1"], ["7_2"], None)
    assert cancelled == ["7_0", "7_1"]
    for i in (0, 1):  # the marker tells whoever records the end that it was asked for
        assert (attempt_dir(tmp_path / "runs", "s", f"r{i}", 1) / slurm.CANCEL_MARKER).exists()
    got = _status(store)
    assert got["r0"][0] == got["r1"][0] == "interrupted" and "rlbench cancel" in got["r0"][1]
    assert got["r2"] == ("finished", None)  # ended before: recorded as it ended
    assert cancel(store, "s", settle_s=1.0) == CancelResult("s")  # nothing left in Slurm


def test_cancel_while_a_run_holds_the_database_leaves_the_record_to_it(tmp_path, fake_slurm):
    states, _ = fake_slurm
    states["9_0"] = "RUNNING"
    store = _store(tmp_path, {"9_0": ""})
    with RunLock(store.path, "s"):
        result = cancel(store, "s", settle_s=1.0)
    assert result.cancelled == ["9_0"] and result.recorded_by and "pid" in result.recorded_by
    assert _status(store)["r0"][0] == "running"  # the attached run records it


def test_cancel_of_a_suite_the_store_does_not_have_names_the_ones_it_has(tmp_path, fake_slurm):
    store = _store(tmp_path, {})
    with pytest.raises(UnknownName, match=re.escape("no suite 'x'") + ".*suites there: s"):
        cancel(store, "x")


def test_status_shows_slurms_word_for_live_runs_and_records_ended_ones(tmp_path, fake_slurm):
    states, _ = fake_slurm
    states.update({"5_0": "PENDING", "5_1": "RUNNING", "5_2": "FAILED"})
    store = _store(tmp_path, {"5_0": "", "5_1": "", "5_2": ""})
    with RunLock(store.path, "s"):  # a run holds the database: only look, record nothing
        assert live_states(store, "s") == {"r0": "queued", "r1": "running", "r2": "failed"}
    assert {s for s, _ in _status(store).values()} == {"running"}
    snap = snapshot(store, "s")
    assert {r["run_id"]: r["status"] for r in snap.runs} == {"r0": "queued", "r1": "running", "r2": "failed"}
    assert snap.counts == {"s": {"queued": 1, "running": 1, "failed": 1}} and snap.note is None
    assert _status(store)["r2"][0] == "failed"


def test_status_records_a_suite_while_a_run_of_another_suite_holds_its_own_lock(tmp_path, fake_slurm):
    states, _ = fake_slurm
    states.update({"6_0": "RUNNING", "6_1": "COMPLETED"})
    store = _store(tmp_path, {"6_0": "", "6_1": ""})
    attempt_dir(tmp_path / "runs", "s", "r1", 1).joinpath("result.json").write_text(
        json.dumps({"status": "finished", "duration_s": 1.0})
    )
    with RunLock(store.path, "other"):  # a coordinator of another suite on the same store
        assert live_states(store, None) == {"r0": "running"}  # every suite: 's' is nobody's, so recorded
        assert _status(store) == {"r0": ("running", None), "r1": ("finished", None)}
        with RunLock(store.path, "s"):  # while a run of 's' itself holds it: only look
            states["6_0"] = "FAILED"
            assert live_states(store, None) == {"r0": "failed"}
            assert _status(store)["r0"][0] == "running"
        assert (
            cancel(store, "s", settle_s=0).recorded_by is None
        )  # recorded here, beside the other suite's run
    assert _status(store)["r0"][0] == "failed"


def test_status_without_slurms_commands_shows_the_store_with_a_note(tmp_path, monkeypatch):
    def no_slurm(ids):
        raise UsageError("squeue: no 'squeue' on PATH")

    monkeypatch.setattr(slurm, "query_states", no_slurm)
    store = _store(tmp_path, {"3_0": ""})
    snap = snapshot(store, "s")
    assert [r["status"] for r in snap.runs] == ["running"]
    assert snap.note.startswith("cannot ask Slurm about its runs (squeue: no 'squeue' on PATH)")


@pytest.mark.fast
def test_every_executor_of_the_table_names_where_it_is_built():
    assert NAMES == ("local", "ray", "slurm")
    assert [e.name for e in EXECUTORS.values() if e.takes_address] == ["ray"]  # rlbench run --address
    assert executor_kind("slurm").label == "Slurm"  # rlbench run: "N runs queued or running in Slurm"
    for kind in EXECUTORS.values():
        module, _, fn = kind.target.partition(":")
        assert callable(getattr(kind.module(), fn)), kind.target
        if kind.outlives_coordinator:  # found again by a later run, status and cancel
            assert all(callable(getattr(kind.module(), f)) for f in ("survey", "peek", "cancel"))
    with pytest.raises(UsageError, match="choose one of local, ray, slurm"):
        executor_kind("kubernetes")


@pytest.mark.fast
def test_the_coordinator_never_asks_for_an_executor_by_name():
    package = Path(__file__).resolve().parents[2] / "rlbench_cli" / "coordinator"
    for path in package.glob("*.py"):
        text = path.read_text()
        for name in NAMES:
            assert f'"{name}"' not in text and f"'{name}'" not in text, f"{path.name} names {name!r}"
