"""rlbench ui's live rows: a running run's shards that are written but not yet ingested show in its latest
metrics, its curves and the long poll's stamp at once; once ingested they are counted once; a run that is not
running is read from the store only."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rlbench_cli.runner import attempt_dir
from rlbench_cli.sink import ShardSink, list_shards
from rlbench_cli.store import Store
from rlbench_cli.ui import data
from rlbench_cli.ui.watch import Watch

pytestmark = pytest.mark.fast


def _shard(folder: Path, *points: tuple[int, float]) -> None:
    sink = ShardSink(folder, background=False)
    for step, value in points:
        sink.log_scalar(step, "eval/return", value)
    sink.close()


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """Suite 's': run 'live' running with one shard ingested (step 0), run 'done' finished (steps 0, 100)."""
    store = Store(tmp_path / "r.duckdb", wait=5)
    with store.writer() as con:
        store.register_suite(con, "s", "", {"name": "s"}, "s.yaml")
        store.add_runs(con, [{"run_id": rid, "suite": "s", "algo": "a", "algo_name": "a", "env": "E", "seed": i,
                              "config": {}} for i, rid in enumerate(("done", "live"))])  # fmt: skip
        for rid, points in (("done", [(0, 1.0), (100, 2.0)]), ("live", [(0, 5.0)])):
            store.start_attempt(con, rid, 1, {"started_at": time.time()})
            metrics = attempt_dir(tmp_path / "runs", "s", rid, 1) / "metrics"
            _shard(metrics, *points)
            store.ingest_shards(con, rid, 1, list_shards(metrics))
        store.end_attempt(con, "done", "finished", {"exit_code": 0, "duration_s": 1.0})
    return store


def _metrics(store: Store, rid: str) -> Path:
    return attempt_dir(store.path.parent / "runs", "s", rid, 1) / "metrics"


def _points(store: Store, rid: str) -> list[tuple[int, float]]:
    out = data.curves(store, "s", "eval/return", filters=[("run_id", [rid])], reps=10)
    (group,) = out["groups"]
    return list(zip(group["step"], group["y"]))


def test_a_flushed_shard_shows_before_it_is_ingested_and_once_after(store: Store) -> None:
    before = Watch(store).stamp("live")
    _shard(_metrics(store, "live"), (100, 6.0), (200, 7.0))
    assert Watch(store).stamp("live") != before  # the page's long poll answers on the flush
    assert data.run(store, "live")["latest"]["eval/return"] == {"step": 200, "value": 7.0}
    assert _points(store, "live") == [(0, 5.0), (100, 6.0), (200, 7.0)]
    with store.writer() as con:  # the coordinator's ingest: the same rows, now from the store only
        store.ingest_shards(con, "live", 1, list_shards(_metrics(store, "live")))
    assert _points(store, "live") == [(0, 5.0), (100, 6.0), (200, 7.0)]
    assert data.run(store, "live")["latest"]["eval/return"] == {"step": 200, "value": 7.0}


def test_a_run_that_is_not_running_is_read_from_the_store_only(store: Store) -> None:
    _shard(_metrics(store, "done"), (300, 9.0))  # a file left after the end (never ingested): not its rows
    assert data.run(store, "done")["latest"]["eval/return"] == {"step": 100, "value": 2.0}
    assert _points(store, "done") == [(0, 1.0), (100, 2.0)]


def test_a_running_run_without_its_folder_is_shown_from_the_store(store: Store) -> None:
    import shutil

    shutil.rmtree(_metrics(store, "live"))
    assert data.run(store, "live")["latest"]["eval/return"] == {"step": 0, "value": 5.0}
    assert _points(store, "live") == [(0, 5.0)]
