import os

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")
# Ray reads these when it is imported: set before any test imports it, so every Ray node a test starts in this
# process (ray.cluster_utils.Cluster) advertises loopback and the driver never waits on usage stats or auth
for _key, _value in {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
                     "RAY_AUTH_MODE": "disabled"}.items():  # fmt: skip
    os.environ.setdefault(_key, _value)


@pytest.fixture
def suite_dict():
    return {
        "name": "t",
        "seeds": 2,
        "budget": {"steps": 1000, "eval_every": 500, "eval_episodes": 2},
        "envs": ["CartPole-v1"],
        "algorithms": ["random"],
    }


def _make_results_db(db, runs, suite="s", status="finished", config=None, metric="eval/return"):
    """A results database written the way `rlbench run` writes one: suite row, runs, shards, end status.

    ``runs``: ``(algo, env, seed, [(step, value), ...])`` tuples; ``status``: one for all runs or one per run.
    Returns the ``Store``.
    """
    import time
    from pathlib import Path

    from rlbench_cli.sink import ShardSink, list_shards
    from rlbench_cli.store import Store

    store = Store(db, wait=5)
    with store.writer() as con:
        store.register_suite(con, suite, "", config or {}, f"{suite}.yaml")
        for i, (algo, env, seed, points) in enumerate(runs):
            run_id = f"{suite}-{algo}-{env}-{seed}"
            row = {"run_id": run_id, "suite": suite, "algo": algo, "algo_name": algo, "env": env, "seed": seed,
                   "config": {}}  # fmt: skip
            store.add_runs(con, [row])
            store.start_attempt(con, run_id, 1, {"started_at": time.time()})
            folder = Path(db).parent / "shards" / suite / run_id
            sink = ShardSink(folder, background=False)
            for step, value in points:
                sink.log_scalar(step, metric, value)
            sink.close()
            store.ingest_shards(con, run_id, 1, list_shards(folder))
            run_status = status if isinstance(status, str) else status[i]
            store.end_attempt(con, run_id, run_status, {"exit_code": 0 if run_status == "finished" else 1,
                                                        "duration_s": 1.0})  # fmt: skip
    return store


@pytest.fixture(scope="session")
def make_results_db():
    """``make_results_db(db, runs, suite=..., status=..., config=...)``: see ``_make_results_db``."""
    return _make_results_db
