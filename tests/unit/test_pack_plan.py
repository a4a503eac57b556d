"""resources.seeds_per_job: validation and the pure grouping of a grid's runs into jobs."""

import pytest

from rlbench_cli.errors import SuiteInvalid
from rlbench_cli.packed import plan_packs, unpackable
from rlbench_cli.suite.grid import expand
from rlbench_cli.suite.loader import parse_suite

pytestmark = pytest.mark.fast


def _suite(n=3, seeds=5, algos=("ppo", "dqn")):
    return parse_suite({"name": "p", "seeds": seeds, "envs": ["CartPole-v1", "Acrobot-v1"],
                        "algorithms": list(algos), "resources": {"seeds_per_job": n}})  # fmt: skip


@pytest.mark.parametrize(
    "n, sizes",
    [(1, [1] * 20), (2, [2, 2, 1] * 2 + [1] * 10), (3, [3, 2] * 2 + [1] * 10), (5, [5, 5] + [1] * 10)],
    ids=["one", "two", "three", "all"],
)
def test_packable_cells_are_cut_into_jobs_of_n_seeds_and_the_rest_run_alone(n, sizes):
    specs = expand(_suite(n))
    jobs = plan_packs(specs, n)
    assert sorted(map(len, jobs), reverse=True) == sorted(sizes, reverse=True)
    assert sorted(s.run_id for job in jobs for s in job) == sorted(s.run_id for s in specs)  # each run once
    for job in jobs:
        assert len({(s.algo, s.env) for s in job}) == 1  # one cell per job
        assert [s.seed for s in job] == sorted(s.seed for s in job)
        assert len(job) == 1 or job[0].algo == "ppo"
    assert unpackable(specs) == ["dqn"]


def test_packing_does_not_change_run_ids():
    assert [s.run_id for s in expand(_suite(1))] == [s.run_id for s in expand(_suite(4))]


@pytest.mark.parametrize(
    "value, message",
    [(0, "seeds_per_job must be a positive integer"), ("4", "seeds_per_job must be a positive integer"),
     (True, "seeds_per_job must be a positive integer"), (6, "seeds_per_job is 6 but the suite has 5 seed(s)")],
)  # fmt: skip
def test_bad_seeds_per_job_names_the_field(value, message):
    with pytest.raises(SuiteInvalid, match="seeds_per_job") as e:
        _suite(value)
    assert message in str(e.value)


def test_a_big_packs_seeds_flush_their_shards_less_often_but_at_least_every_30_s():
    from rlbench_cli.packed import MAX_PACK_FLUSH_S, pack_flush_interval

    assert pack_flush_interval(1) == pack_flush_interval(256) == 1.0  # a shard a second, as one run's
    assert pack_flush_interval(2048) == 8.0
    assert pack_flush_interval(8192) == MAX_PACK_FLUSH_S == 30.0
    assert pack_flush_interval(4, interval=0.2) == 0.2 and pack_flush_interval(4096, interval=20.0) == 20.0


def test_the_coordinator_looks_for_a_big_packs_shards_twice_a_flush_not_every_second(tmp_path):
    from rlbench_cli.coordinator.loop import INGEST_S, ingest_every
    from rlbench_cli.executors.base import Job

    def job(seeds: int) -> Job:
        runs = expand(_suite(min(seeds, 5)))[:1] * seeds  # only their number matters here
        members = [Job(spec=s, folder=tmp_path / str(i), attempt=1) for i, s in enumerate(runs)]
        return Job(spec=runs[0], folder=tmp_path / "0", attempt=1, pack=members if seeds > 1 else [])

    assert ingest_every(job(1)) == ingest_every(job(4)) == ingest_every(job(512)) == INGEST_S == 1.0
    assert ingest_every(job(2048)) == 4.0  # its seeds flush every 8 s
    assert ingest_every(job(8192)) == 15.0  # every 30 s
