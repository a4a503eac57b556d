"""Bootstraps of several algorithms (or pairs) run on threads with an integer seed: the results are the
same, bit for bit, as one after another ($RLBENCH_THREADS=1), and a RandomState (rliable replay) stays serial."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from rlbench_cli import bootstrap

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def scores() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {f"algo{i}": rng.normal(i, 1.0, size=(5 + i, 4)) for i in range(4)}


def _all(scores: dict[str, np.ndarray]) -> list[np.ndarray]:
    est = bootstrap.interval_estimates(scores, reps=300, seed=3)
    prof = bootstrap.performance_profile(scores, np.linspace(-2, 5, 9), reps=300, seed=3)
    return [np.concatenate([*est[a], *prof[a]]) for a in scores]


def test_threads_give_the_serial_results(scores, monkeypatch):
    monkeypatch.setenv("RLBENCH_THREADS", "1")
    assert bootstrap.workers(10) == 1
    serial = _all(scores)
    monkeypatch.setenv("RLBENCH_THREADS", "4")
    threaded = _all(scores)
    for a, b in zip(serial, threaded):
        np.testing.assert_array_equal(a, b)


def test_stats_poi_threads_equal_serial(monkeypatch):
    import pandas as pd

    from rlbench_cli import stats

    rng = np.random.default_rng(1)
    rows = [(f"{a}-{t}-{s}", a, t, s, 1, float(rng.normal(i))) for i, a in enumerate(["a", "b", "c", "d"])
            for t in ("T0", "T1", "T2") for s in range(5)]  # fmt: skip
    df = pd.DataFrame(rows, columns=["run_id", "algo", "env", "seed", "step", "value"])
    table = stats.score_table(df, normalize=None)
    monkeypatch.setenv("RLBENCH_THREADS", "1")
    serial = stats.probability_of_improvement(table, reps=200, seed=1)
    monkeypatch.setenv("RLBENCH_THREADS", "3")
    threaded = stats.probability_of_improvement(table, reps=200, seed=1)
    assert len(serial) == 12
    assert serial.equals(threaded)


def test_map_independent_uses_threads_only_for_integer_seeds(monkeypatch):
    monkeypatch.setenv("RLBENCH_THREADS", "2")
    seen: set[str] = set()

    def name(_: int) -> str:
        seen.add(threading.current_thread().name)
        return threading.current_thread().name

    assert (
        bootstrap.map_independent(name, range(3), np.random.RandomState(0))
        == [threading.current_thread().name] * 3
    )
    if bootstrap.workers(2) == 2:  # a machine that lets this process use two CPUs
        names = bootstrap.map_independent(name, range(8), 0)
        assert all(n.startswith("rlbench-bootstrap") for n in names)
    assert bootstrap.map_independent(lambda i: i * i, range(5), 0) == [0, 1, 4, 9, 16]
