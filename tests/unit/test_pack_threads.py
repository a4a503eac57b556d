"""A pack's threads are the job's, not its seeds': ``packed.run_packed`` of N seeds starts one shard flusher (and
at most ``FLUSH_WORKERS`` helpers writing shards) and one system monitor whatever N is (a 256-seed job had 535
threads), while each seed keeps its own shards and its own system-metric rows at its own step.

The threads are counted inside a real packed run: a user function marked ``@rlbench_cli.seeds_per_job`` looks
at ``threading.enumerate()`` while its seeds train. run_packed seeds torch for user code, so this module
imports torch and is not of the fast tier.
"""

import textwrap
import threading
from collections import Counter

import pyarrow.parquet as pq
import pytest
import user_code

from rlbench_cli.packed import run_packed
from rlbench_cli.sink import FLUSH_WORKERS, list_shards
from rlbench_cli.suite.grid import RunSpec

pytestmark = pytest.mark.slow

USER_CODE = textwrap.dedent(
    """
    import threading
    import time

    import numpy as np

    import rlbench_cli
    from rlbench_cli.sink import list_shards

    seen = []  # per call: the threads alive while the seeds train

    @rlbench_cli.seeds_per_job
    def train(ctxs):
        for c in ctxs:  # each seed at a step of its own, with a row for the flusher to write
            c.log_system(100 * (c.seed + 1))
            c.sink.log(0, **{"train/started": 1.0})
        end = time.monotonic() + 60
        while not all(list_shards(c.sink.directory) for c in ctxs):  # the flusher has written every seed's
            assert time.monotonic() < end
            time.sleep(0.01)
        seen.append(list(threading.enumerate()))
        for c in ctxs:
            c.finish(100 * (c.seed + 1), lambda obs: np.zeros(len(obs), dtype=int))
    """
)


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    yield from user_code.user_module(tmp_path, monkeypatch, "pack_threads_user", USER_CODE)


def _specs(n):
    budget = {"steps": 10_000, "eval_every": 10_000, "eval_episodes": 1}
    return [RunSpec(suite="pt", algo="mine", algo_name="mine", params={}, env_id="CartPole-v1", env_kwargs={},
                    seed=s, budget=dict(budget), entrypoint="pack_threads_user:train") for s in range(n)]  # fmt: skip


def _rows(folder):
    t = pq.read_table(list_shards(folder / "metrics"))
    return list(zip(t["name"].to_pylist(), t["step"].to_pylist()))


def _ours(threads):
    return Counter(t.name.partition("_")[0] for t in threads if t.name.startswith("rlbench-"))


@pytest.mark.parametrize("n", [2, 24])
def test_a_pack_runs_one_flusher_and_one_monitor_and_each_seed_keeps_its_own_rows(user_module, tmp_path, n):
    import pack_threads_user

    before = set(threading.enumerate())
    specs = _specs(n)
    folders = [tmp_path / s.run_id / "attempt-1" for s in specs]
    results = run_packed(specs, folders)
    assert [r["status"] for r in results] == ["finished"] * n
    (inside,) = pack_threads_user.seen
    started = [t for t in inside if t not in before]
    ours = _ours(started)
    assert ours["rlbench-sink"] == 1 and ours["rlbench-sysmon"] == 1, [t.name for t in started]
    assert ours["rlbench-sink-io"] <= min(n, FLUSH_WORKERS)  # helpers writing the shards of seeds due at once
    assert set(ours) <= {"rlbench-sink", "rlbench-sysmon", "rlbench-sink-io"}
    assert len(started) == sum(ours.values())  # nothing else grows with the pack
    assert not _ours(t for t in threading.enumerate() if t not in before)  # and they end with the pack
    for spec, folder in zip(specs, folders):
        rows = _rows(folder)
        mine = 100 * (spec.seed + 1)
        assert ("sys/sps_overall", mine) in rows and ("eval/return", 0) in rows  # its own finish, evaluation
        sys_rows = Counter(name for name, step in rows if name.startswith("sys/") and step == mine)
        # the monitor's last sample, in this seed's shards at this seed's step; no other seed's step
        assert {"sys/steps_per_second", "sys/cpu_percent", "sys/rss_mb"} <= set(sys_rows)
        others = {100 * (s + 1) for s in range(n)} - {mine}
        assert not [r for r in rows if r[1] in others]
