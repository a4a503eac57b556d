"""The metric sink's columnar call: the same rows as log_many, mixed with it in one shard, checked lengths; a
run's flushes never import pandas; sinks sharing one flusher (a pack's seeds) each get their own shards from
one thread, one sink's failing disk stays its own, and a kill -9 leaves every sink's shards complete."""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from rlbench_cli.sink import FLUSH_WORKERS, Flusher, ShardSink, list_shards


def _rows(folder):
    table = pq.read_table(list_shards(folder)).to_pandas()
    return sorted(zip(table["step"], table["name"].astype(str), table["value"]))


def test_log_columns_writes_the_same_rows_as_log_many(tmp_path):
    names = ("a", "b", "c")
    cols, mapping = ShardSink(tmp_path / "c", background=False), ShardSink(tmp_path / "m", background=False)
    for step in range(50):
        values = [step * 0.5, -step, float(step % 3)]
        cols.log_columns(step, names, values if step % 2 else np.asarray(values, np.float32))
        mapping.log_many(step, dict(zip(names, values)))
    cols.close()
    mapping.close()
    assert _rows(tmp_path / "c") == _rows(tmp_path / "m")
    assert len(_rows(tmp_path / "c")) == 150


def test_columnar_and_mapping_calls_with_different_names_share_one_shard(tmp_path):
    sink = ShardSink(tmp_path, background=False)
    sink.log(0, x=1.0)
    sink.log_columns(0, ("y", "z"), [2.0, 3.0])
    sink.log_columns(1, ("z",), np.array([4.0]))
    sink.log_many(1, {"x": 5.0, "y": 6.0})
    sink.close()
    assert len(list_shards(tmp_path)) == 1
    assert _rows(tmp_path) == [(0, "x", 1.0), (0, "y", 2.0), (0, "z", 3.0), (1, "x", 5.0), (1, "y", 6.0),
                               (1, "z", 4.0)]  # fmt: skip


def test_log_columns_refuses_a_length_mismatch_at_the_call(tmp_path):
    sink = ShardSink(tmp_path, background=False)
    with pytest.raises(ValueError, match="2 names but 3 values"):
        sink.log_columns(0, ("a", "b"), [1.0, 2.0, 3.0])
    sink.close()
    assert list_shards(tmp_path) == []


def test_log_columns_keeps_each_calls_values_out_of_the_collector(tmp_path):
    """A caller that reuses one list logs each step's values (not the list's last contents), and the
    buffered calls are untracked by the garbage collector once it has seen them (a growing buffer of
    tracked lists made every collection rescan it)."""
    import gc

    import pyarrow.parquet as pq

    from rlbench_cli.sink import ShardSink, list_shards

    sink = ShardSink(tmp_path / "m", background=False)
    names, row = ("a", "b"), [0.0, 0.0]
    for step in range(1000):
        row[0], row[1] = float(step), -float(step)
        sink.log_columns(step, names, row)
    gc.collect()  # the first pass untracks each call's values, the next the entry holding them
    gc.collect()
    assert not any(gc.is_tracked(entry) for entry in sink._buf)
    sink.close()
    table = pq.read_table(list_shards(tmp_path / "m")[0])
    assert table.num_rows == 2000
    assert table.column("value").to_pylist()[:4] == [0.0, -0.0, 1.0, -1.0]
    assert table.column("value").to_pylist()[-2:] == [999.0, -999.0]


RUN_WITHOUT_PANDAS = """
import json, sys
from pathlib import Path
from rlbench_cli.suite.grid import RunSpec
from rlbench_cli.runner import run_one
spec = RunSpec(suite="t", algo="random", algo_name="random", params={}, env_id="CartPole-v1", env_kwargs={},
               seed=0, budget={"steps": 300, "eval_every": 100, "eval_episodes": 1, "timeout": None,
                               "checkpoint_every": None})
result = run_one(spec, Path(sys.argv[1]))
print(json.dumps({"status": result["status"], "rows": result["rows"], "pandas": "pandas" in sys.modules}))
"""


def test_a_run_and_its_flushes_never_import_pandas(tmp_path):
    """pyarrow's numpy conversions import pandas (0.8 s of a worker's first flush, tens of seconds on a starved
    Ray actor, where a kill then found nothing flushed): the shards are built from buffers instead."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", RUN_WITHOUT_PANDAS, str(tmp_path / "attempt-1")],
                          capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["status"] == "finished" and got["rows"] > 0, got
    assert got["pandas"] is False
    table = pq.read_table(list_shards(tmp_path / "attempt-1" / "metrics"))
    assert table.num_rows == got["rows"]
    assert [str(t) for t in table.schema.types] == [
        "int64",
        "dictionary<values=string, indices=int32, ordered=0>",
        "double",
        "double",
    ]
    assert {"eval/return", "sys/steps_per_second"} <= set(table.column("name").to_pylist())


def _wait_for_shards(folders, deadline_s=60.0):
    """Until every folder holds a shard (written by a flusher, not by close); a deadline only against a hang."""
    end = time.monotonic() + deadline_s
    while not all(list_shards(f) for f in folders):
        assert time.monotonic() < end, [len(list_shards(f)) for f in folders]
        time.sleep(0.02)


def _flushers(helpers=False):
    name = "rlbench-sink-io" if helpers else "rlbench-sink"
    return {t for t in threading.enumerate() if t.name.partition("_")[0] == name}


def test_sinks_sharing_a_flusher_get_their_own_shards_from_one_thread(tmp_path):
    before, helpers = len(_flushers()), _flushers(helpers=True)
    flusher = Flusher()
    folders = [tmp_path / f"seed{i}" for i in range(20)]
    sinks = [ShardSink(f, flush_interval=0.05, flusher=flusher) for f in folders]
    assert len(_flushers()) == before + 1 and len(flusher) == 20
    for i, sink in enumerate(sinks):
        sink.log(i, seed=float(i))
    _wait_for_shards(folders)  # in the background, before any close
    assert len(_flushers(helpers=True) - helpers) <= FLUSH_WORKERS  # writing the shards due at once
    for i, sink in enumerate(sinks):
        sink.log_columns(i + 1, ("seed",), [float(i)])
        sink.close()
    assert len(flusher) == 0
    flusher.close()
    assert len(_flushers()) == before and _flushers(helpers=True) <= helpers
    for i, folder in enumerate(folders):
        assert _rows(folder) == [(i, "seed", float(i)), (i + 1, "seed", float(i))]


def test_a_sink_whose_flush_fails_leaves_the_shared_flusher_and_the_others_go_on(tmp_path, capsys):
    flusher = Flusher()
    broken, fine = (
        ShardSink(tmp_path / "broken", 0.05, flusher=flusher),
        ShardSink(tmp_path / "fine", 0.05, flusher=flusher),
    )
    shutil.rmtree(tmp_path / "broken")  # its folder is gone: every flush of it raises
    broken.log(0, x=1.0)
    fine.log(0, x=1.0)
    _wait_for_shards([tmp_path / "fine"])
    end = time.monotonic() + 60
    while len(flusher) != 1:  # the broken sink has left it
        assert time.monotonic() < end
        time.sleep(0.02)
    assert "FileNotFoundError" in capsys.readouterr().err
    fine.log(1, x=2.0)
    broken.log(1, x=2.0)
    _wait_for_shards([tmp_path / "fine"])
    fine.close()
    with pytest.raises(FileNotFoundError):  # what run_packed records as "could not write metrics"
        broken.close()
    flusher.close()
    assert [r[0] for r in _rows(tmp_path / "fine")] == [0, 1]


KILLED_PACK = """
import sys, time
from pathlib import Path
from rlbench_cli.sink import Flusher, ShardSink
flusher = Flusher()
sinks = [ShardSink(Path(sys.argv[1]) / f"seed{i}", flush_interval=0.05, flusher=flusher) for i in range(8)]
step = 0
while True:  # every seed logs its own index until the process is killed
    for i, sink in enumerate(sinks):
        sink.log_columns(step, ("seed", "step"), [float(i), float(step)])
    step += 1
    time.sleep(0.001)
"""


def test_a_pack_killed_with_9_leaves_every_seeds_shards_complete_and_its_own(tmp_path):
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", KILLED_PACK, str(tmp_path)], env=env)
    folders = [tmp_path / f"seed{i}" for i in range(8)]
    try:
        _wait_for_shards(folders)
        while min(len(list_shards(f)) for f in folders) < 3:  # several shards each, flushed by one thread
            assert proc.poll() is None
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    for i, folder in enumerate(folders):
        table = pq.read_table(list_shards(folder))  # every listed shard is complete
        rows = list(zip(table["name"].to_pylist(), table["value"].to_pylist()))
        assert {v for n, v in rows if n == "seed"} == {float(i)}  # this seed's rows only
        steps = [v for n, v in rows if n == "step"]
        assert steps == list(range(len(steps)))  # and all of them up to its last flush: only the tail is lost


def test_log_block_writes_a_chunks_rows_with_the_entries_its_mask_keeps(tmp_path):
    # a compiled program's rows for an evaluation interval: one call per seed, the episode columns only where
    # training episodes ended
    names = ("loss", "lr", "episode_return")
    values = np.array([[0.5, 1e-3, np.nan], [0.25, 9e-4, 120.0], [np.nan, 8e-4, np.nan]])
    mask = np.array([[True, True, False], [True, True, True], [True, True, False]])
    block, rowwise = ShardSink(tmp_path / "b", background=False), ShardSink(tmp_path / "r", background=False)
    block.log(0, start=1.0)
    block.log_block(np.array([512, 1024, 1536]), names, values, mask)
    values[:] = -1.0  # the sink copied them: the caller may reuse its arrays
    rowwise.log(0, start=1.0)
    rowwise.log_many(512, {"loss": 0.5, "lr": 1e-3})
    rowwise.log_many(1024, {"loss": 0.25, "lr": 9e-4, "episode_return": 120.0})
    rowwise.log_many(1536, {"loss": float("nan"), "lr": 8e-4})
    block.close()
    rowwise.close()
    got, want = _rows(tmp_path / "b"), _rows(tmp_path / "r")
    assert len(got) == len(want) == 8
    assert [(s, n) for s, n, _ in got] == [(s, n) for s, n, _ in want]
    assert np.allclose([v for *_, v in got], [v for *_, v in want], equal_nan=True)
    assert len(list_shards(tmp_path / "b")) == 1


def test_log_block_refuses_shapes_that_do_not_match_at_the_call(tmp_path):
    sink = ShardSink(tmp_path, background=False)
    with pytest.raises(ValueError, match="2 steps x 3 names"):
        sink.log_block([1, 2], ("a", "b", "c"), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="mask of shape"):
        sink.log_block([1, 2], ("a", "b"), np.zeros((2, 2)), np.ones((2, 3), bool))
    sink.close()
    assert list_shards(tmp_path) == []
