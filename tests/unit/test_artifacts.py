"""A run's listed files (``artifacts``): the worker's index, its ingest by the coordinator (idempotent, a cut
line ignored, a new attempt replacing the old rows) and bundles carrying the rows."""

import os
import time
from pathlib import Path
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest

from rlbench_cli import artifacts
from rlbench_cli.artifacts import INDEX, ArtifactLog, current, read_index, resolve, sha256_file
from rlbench_cli.coordinator import Recorder
from rlbench_cli.executors.base import Job
from rlbench_cli.store import Store

pytestmark = pytest.mark.fast

RUN = {"run_id": "r1", "suite": "s", "algo": "a", "algo_name": "ppo", "env": "E", "seed": 0, "config": {}}


def _file(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_the_index_lists_files_relative_to_the_run_folder_with_size_and_sha256(tmp_path):
    attempt = tmp_path / "run" / "attempt-1"
    f = _file(attempt / "videos" / "eval-0.mp4", b"frames")
    (row,) = ArtifactLog(attempt).add(0, "video", [f])
    assert row == {"step": 0, "kind": "video", "path": "attempt-1/videos/eval-0.mp4", "bytes": 6,
                   "sha256": sha256_file(f)}  # fmt: skip
    assert read_index(attempt) == [row]
    assert resolve(tmp_path / "run", row["path"]) == f.resolve()


def test_a_later_best_policy_replaces_the_earlier_and_a_cut_line_is_ignored(tmp_path):
    attempt = tmp_path / "run" / "attempt-1"
    log = ArtifactLog(attempt)
    log.add(0, "policy_best", [_file(attempt / "policy/best-0/policy.pt", b"a"),
                               _file(attempt / "policy/best-0/policy.json", b"{}")])  # fmt: skip
    log.add(0, "video", [_file(attempt / "videos/eval-0.mp4", b"v0")])
    log.add(5, "policy_best", [_file(attempt / "policy/best-5/policy.pt", b"b")])
    log.add(5, "video", [_file(attempt / "videos/eval-5.mp4", b"v5")])
    with open(attempt / INDEX, "a") as f:
        f.write('{"step": 9, "kind": "video", "pa')  # a kill in the middle of a line
    rows = current(read_index(attempt))
    assert [(r["step"], r["kind"], r["path"]) for r in rows] == [
        (0, "video", "attempt-1/videos/eval-0.mp4"),
        (5, "policy_best", "attempt-1/policy/best-5/policy.pt"),
        (5, "video", "attempt-1/videos/eval-5.mp4"),
    ]


def test_resolve_refuses_paths_out_of_the_run_folder(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (tmp_path / "secret").write_text("x")
    os.symlink(tmp_path / "secret", run / "link")
    for bad in ("../secret", "/etc/hostname", "link", ""):
        with pytest.raises(ValueError):
            resolve(run, bad)


def _job(folder: Path, run_id: str = "r1", attempt: int = 1) -> Job:
    return Job(SimpleNamespace(run_id=run_id), folder, attempt)  # type: ignore[arg-type]


def _stored(store: Store) -> list[tuple]:
    with store.reader() as con:
        rows = store.artifacts(con, run_id="r1")
        return [(a["step"], a["kind"], a["path"], a["bytes"]) for a in rows if a["kind"] != "source"]


def test_the_recorder_ingests_an_index_once_and_follows_it_as_it_grows(tmp_path):
    store = Store(tmp_path / "db.duckdb")
    attempt = tmp_path / "runs" / "s" / "r1" / "attempt-1"
    with store.writer() as con:
        store.add_runs(con, [RUN])
        store.start_attempt(con, "r1", 1, {"started_at": time.time()})
        con.execute("INSERT INTO artifacts (run_id, kind, path) VALUES ('r1', 'source', 'elsewhere')")
    log = ArtifactLog(attempt)
    log.add(0, "video", [_file(attempt / "videos/eval-0.mp4", b"v0")])
    rec = Recorder(store)
    for _ in range(2):  # ingested twice: the same rows
        rec.ingest(_job(attempt))
        rec.close()  # recorded, and the file released for the reader below
    assert _stored(store) == [(0, "video", "attempt-1/videos/eval-0.mp4", 2)]
    log.add(4, "policy_final", [_file(attempt / "policy/final/policy.pt", b"p")])
    rec.ingest(_job(attempt))
    rec.close()
    again = Recorder(store)  # a new coordinator (after a kill -9) reads every index again
    again.ingest(_job(attempt))
    again.close()
    assert _stored(store) == [(0, "video", "attempt-1/videos/eval-0.mp4", 2),
                              (4, "policy_final", "attempt-1/policy/final/policy.pt", 1)]  # fmt: skip
    with store.reader() as con:  # an imported run's source row is never replaced
        assert [a["path"] for a in store.artifacts(con, kind="source")] == ["elsewhere"]
    with store.writer() as con:  # a new attempt starts with none of the old attempt's files listed
        store.start_attempt(con, "r1", 2, {"started_at": time.time()})
    assert _stored(store) == []


def test_a_bundle_carries_the_artifact_rows_and_importing_twice_adds_none(tmp_path):
    from rlbench_cli.bundle import write_bundle
    from rlbench_cli.importers.bundle_source import load

    store = Store(tmp_path / "db.duckdb")
    attempt = tmp_path / "runs" / "s" / "r1" / "attempt-1"
    ArtifactLog(attempt).add(3, "video", [_file(attempt / "videos/eval-3.mp4", b"v3")])
    with store.writer() as con:
        store.register_suite(con, "s", "", {}, "")
        store.add_runs(con, [RUN])
        store.start_attempt(con, "r1", 1, {"started_at": time.time()})
        store.ingest_artifacts(con, [("r1", current(read_index(attempt)))])
        store.end_attempt(con, "r1", "finished", {})
    with store.reader() as con:
        write_bundle(store, con, "s", tmp_path / "bundle")
    table = pq.read_table(tmp_path / "bundle" / "artifacts.parquet")
    assert table.to_pylist() == [{"run_id": "r1", "step": 3, "kind": "video", "path": "attempt-1/videos/eval-3.mp4",
                                  "bytes": 2, "sha256": artifacts.sha256_file(attempt / "videos/eval-3.mp4")}]  # fmt: skip
    other = Store(tmp_path / "other.duckdb")
    suite, runs, metrics = load(tmp_path / "bundle", "bundle")
    for _ in range(2):
        with other.writer() as con:
            other.import_bundle(con, suite, runs, metrics, "bundle:x", artifacts=table)
    with other.reader() as con:
        assert [(a["step"], a["kind"]) for a in other.artifacts(con, run_id="r1")] == [
            (3, "video"),
            (None, "source"),
        ]  # NULLs last


def test_ray_brings_back_each_listed_file_once_and_before_its_index(tmp_path):
    from rlbench_cli.executors.ray.transfer import new_artifacts, write_files

    node = tmp_path / "node" / "s" / "r1" / "attempt-2"  # an actor's node-local attempt folder
    here = tmp_path / "coordinator" / "s" / "r1" / "attempt-2"
    log = ArtifactLog(node)
    log.append(
        [{"step": 0, "kind": "video", "path": "attempt-1/videos/eval-0.mp4", "bytes": 1, "sha256": "x"}]
    )
    log.add(4, "video", [_file(node / "videos/eval-4.mp4", b"v4")])
    sent: set[str] = set()
    first = new_artifacts(node, sent)
    assert [rel for rel, _ in first] == [
        "videos/eval-4.mp4",
        INDEX,
    ]  # not attempt-1's: the coordinator has it
    assert new_artifacts(node, sent) == []  # nothing new: nothing sent
    log.add(8, "policy_final", [_file(node / "policy/final/policy.pt", b"p")])
    second = new_artifacts(node, sent)
    assert [rel for rel, _ in second] == ["policy/final/policy.pt", INDEX]
    write_files(here, first + second)
    assert current(read_index(here)) == current(read_index(node))
    assert (here / "policy/final/policy.pt").read_bytes() == b"p"


def test_a_resumed_attempt_on_another_ray_node_gets_the_earlier_attempts_index_and_files(tmp_path):
    from rlbench_cli.executors.ray.transfer import resume_files, write_files

    run = tmp_path / "coordinator" / "s" / "r1"  # the run folder on the coordinator's machine
    first = run / "attempt-1"
    log = ArtifactLog(first)
    log.add(0, "video", [_file(first / "videos/eval-0.mp4", b"v0")])
    log.add(4, "video", [_file(first / "videos/eval-4.mp4", b"v4")])
    log.add(4, "policy_best", [_file(first / "policy/best-4/policy.pt", b"b4")])
    log.add(8, "video", [_file(first / "videos/eval-8.mp4", b"v8")])  # after the checkpoint
    log.add(8, "policy_final", [_file(first / "policy/final/policy.pt", b"f")])
    _file(first / "metrics/shard-0.parquet", b"rows")
    _file(run / "checkpoint/step-000000004.pt", b"ckpt")
    spec = SimpleNamespace(budget={"checkpoint_every": 4})
    files = resume_files(Job(spec, run / "attempt-2", 2))  # type: ignore[arg-type]
    sent = [rel for rel, _ in files]
    assert sent.index("attempt-1/videos/eval-4.mp4") < sent.index(
        f"attempt-1/{INDEX}"
    )  # a file before its index
    assert "attempt-1/videos/eval-8.mp4" not in sent and "attempt-1/policy/final/policy.pt" not in sent
    node = (
        tmp_path / "node" / "s" / "r1"
    )  # another node's run folder: only what was sent (as the actor writes it)
    write_files(node, files, checkpoints_up=False)
    rows = current(read_index(node / "attempt-1"))
    assert rows == current(read_index(first))
    # what the resumed attempt lists of them (RunContext._carry_artifacts): each row up to the checkpoint,
    # but the final policy, whose file is there
    carried = [
        r["path"]
        for r in rows
        if r["step"] <= 4 and r["kind"] != "policy_final" and (node / r["path"]).is_file()
    ]
    assert sorted(carried) == [
        "attempt-1/policy/best-4/policy.pt",
        "attempt-1/videos/eval-0.mp4",
        "attempt-1/videos/eval-4.mp4",
    ]
    assert (node / "attempt-1/videos/eval-4.mp4").read_bytes() == b"v4"


class _Saveable:
    """A policy the Keeper can save: one number in a file."""

    loader = "nowhere:load"
    policy_file = "policy.txt"

    def __init__(self, value: float):
        self.value = value

    def save(self, path):
        Path(path).write_text(str(self.value))

    def detach(self):
        return _Saveable(self.value)


def test_a_deferred_keeper_writes_only_its_best_policy_and_only_when_asked(tmp_path):
    from rlbench_cli.algos.keep import Keeper

    run = tmp_path / "attempt-1"
    ctx = SimpleNamespace(run_dir=run, spec=SimpleNamespace(score=None, budget={}, algo_name="a", env_id="E",
                                                            env_kwargs={}, env_wrappers=[], run_id="r", seed=0))  # fmt: skip
    keeper = Keeper(ctx)
    keeper.defer()
    for step, ret in [(0, 10.0), (512, 30.0), (1024, 20.0), (1536, 30.0)]:
        keeper.after_evaluation(step, {"eval/return": ret}, _Saveable(ret))
    assert not (run / "policy").exists() and keeper.best == 30.0
    keeper.write_best()
    keeper.write_best()  # nothing left to write
    assert [p.name for p in (run / "policy").iterdir()] == ["best-000000512"]
    assert (run / "policy" / "best-000000512" / "policy.txt").read_text() == "30.0"
    assert [r["kind"] for r in read_index(run)] == [
        "policy_best",
        "policy_best",
    ]  # its two files, listed once
